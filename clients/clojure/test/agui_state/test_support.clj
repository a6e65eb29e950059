(ns agui-state.test-support
  "What the client tests share: where the binary and the repository's files are,
  a client per test namespace, and the witnesses.

  Witnesses. There is no Debian JSON Patch library for Clojure, so every call is
  checked three ways: its ops are compared exactly with the ops the scenario
  expects; the events are replayed by a small strict RFC 6902 applier (apply-op)
  onto a model of what the browser client holds (*view* for state, and
  replay-activities for activity messages); and getState (getActivity) must equal
  both that replay and the value computed by hand."
  (:require [agui-state.client :as c]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [is]])
  (:import (java.io File)))

;;; Files

(def ^File client-dir
  "clients/clojure, found from where the client's source was loaded rather than
  from the working directory: the tests run from the repository root (npm test)
  or from clients/clojure (clojure -M:test)."
  (-> (io/resource "agui_state/client.clj") io/file .getCanonicalFile
      .getParentFile .getParentFile .getParentFile))

(defn repo-file
  "The repository's file at relative path `rel` (\"protocol/openrpc.json\"), or nil
  when it is not there (a copy of clients/clojure on its own)."
  ^File [rel]
  (let [f (.getCanonicalFile (io/file client-dir ".." ".." rel))]
    (when (.exists f) f)))

(defn bin
  "The binary: the runner's argument (system property agui-state.bin), else
  AGUI_STATE_BIN, else the repository's dist/agui-state."
  ^String []
  (or (System/getProperty "agui-state.bin")
      (System/getenv "AGUI_STATE_BIN")
      (some-> (repo-file "dist/agui-state") str)
      (throw (IllegalStateException. "no binary: pass it to the runner or set AGUI_STATE_BIN"))))

(defn start-client
  "A client on the real binary. Quiet logs (they are inherited by the test's
  stderr) and a per-call timeout, so that a lost response fails a test instead of
  hanging the run."
  ([] (start-client {}))
  ([opts] (c/start (merge {:path (bin) :env {"AGUI_STATE_LOG_LEVEL" "warn"} :timeout-ms 30000} opts))))

;;; Fixtures

(def ^:dynamic *client* "The client shared by the deftests of one namespace." nil)
(def ^:dynamic *view* "thread id -> the replay of every event forwarded to the browser client so far." nil)

(defn with-client
  "A :once fixture: one sidecar for the namespace, closed afterwards."
  [f]
  (with-open [cl (start-client)]
    (binding [*client* cl] (f))))

(defn with-view
  "An :each fixture: each deftest starts with an empty browser client."
  [f]
  (binding [*view* (atom {})] (f)))

;;; A strict RFC 6902 applier: it throws where a strict client would.

(defn parse-ptr [p]
  (if (= p "") []
      (do (when-not (str/starts-with? p "/") (throw (ex-info (str "not a pointer: " (pr-str p)) {})))
          (mapv #(-> % (str/replace "~1" "/") (str/replace "~0" "~")) (rest (str/split p #"/" -1))))))

(defn- index [tok n add?]
  (cond (and add? (= tok "-")) n
        (re-matches #"0|[1-9][0-9]*" tok)
        (let [i (Long/parseLong tok)]
          (if (if add? (<= i n) (< i n)) i (throw (ex-info (str "index out of bounds: " tok) {}))))
        :else (throw (ex-info (str "bad index: " tok) {}))))

(defn- at-path [doc [s & more :as segs] f]
  (if (empty? segs) (f doc)
      (cond (map? doc) (if (contains? doc s) (assoc doc s (at-path (get doc s) more f))
                           (throw (ex-info (str "missing: " s) {})))
            (vector? doc) (let [i (index s (count doc) false)] (assoc doc i (at-path (nth doc i) more f)))
            :else (throw (ex-info (str "not a container at " s) {})))))

(defn- value-at [doc path]
  (reduce (fn [d s]
            (cond (map? d) (if (contains? d s) (get d s) (throw (ex-info (str "missing: " path) {})))
                  (vector? d) (nth d (index s (count d) false))
                  :else (throw (ex-info (str "not a container in " path) {}))))
          doc (parse-ptr path)))

(defn- write-at
  "add, remove or replace at `path`, as RFC 6902 §4.1–4.3 define them."
  [doc op path value]
  (let [segs (parse-ptr path)]
    (if (empty? segs)
      (case op ("add" "replace") value (throw (ex-info (str "bad root op " op) {})))
      (at-path doc (pop segs)
               (fn [parent]
                 (let [k (peek segs)]
                   (cond
                     (map? parent)
                     (case op
                       "add" (assoc parent k value)
                       "replace" (if (contains? parent k) (assoc parent k value) (throw (ex-info (str "replace missing " path) {})))
                       "remove" (if (contains? parent k) (dissoc parent k) (throw (ex-info (str "remove missing " path) {}))))
                     (vector? parent)
                     (let [i (index k (count parent) (= op "add"))]
                       (case op
                         "add" (into (conj (subvec parent 0 i) value) (subvec parent i))
                         "replace" (assoc parent i value)
                         "remove" (into (subvec parent 0 i) (subvec parent (inc i)))))
                     :else (throw (ex-info (str "no container for " path) {})))))))))

(defn apply-op
  "One op, strictly: every op of RFC 6902 §4, and an exception for any op that does
  not fit the document (a missing member or array, an index out of bounds, a
  failed test, a move into its own child), or that is not well formed."
  [doc {:strs [op path from] :as o}]
  (when-not (and (string? op) (string? path)
                 (or (contains? #{"remove" "move" "copy"} op) (contains? o "value"))
                 (or (not (contains? #{"move" "copy"} op)) (string? from)))
    (throw (ex-info (str "malformed op " (pr-str o)) {})))
  (case op
    ("add" "remove" "replace") (write-at doc op path (get o "value"))
    "copy" (write-at doc "add" path (value-at doc from))
    "move" (if (= from path)
             (do (value-at doc from) doc)
             (let [v (value-at doc from)]
               (when (str/starts-with? path (str from "/"))
                 (throw (ex-info (str "move into its own child: " from " -> " path) {})))
               (write-at (write-at doc "remove" from nil) "add" path v)))
    "test" (if (= (value-at doc path) (get o "value")) doc
               (throw (ex-info (str "test failed at " path) {})))
    (throw (ex-info (str "unknown op " (pr-str op)) {}))))

(defn replay [state events]
  (reduce (fn [s {:strs [type delta snapshot]}]
            (case type
              "STATE_DELTA" (reduce apply-op s delta)
              "STATE_SNAPSHOT" snapshot))
          state events))

;;; Activities (protocol/README.md §10): what the browser client holds of each
;;; activity message, messageId -> {"activityType" … "content" …}.

(defn- bad-event [why e] (throw (ex-info (str why ": " (pr-str e)) {})))

(defn replay-activity
  "One forwarded activity event onto `activities`, as @ag-ui/client applies it but
  strictly, so that anything the client would drop, warn about or refuse fails:
  - ACTIVITY_SNAPSHOT sets the activity's type and content, except that with
    \"replace\" false an activity the client already holds stays as it is. The
    event has exactly type, messageId, activityType and content, plus \"replace\"
    only as false; its content is an object.
  - ACTIVITY_DELTA applies its patch to the content with apply-op (any op that does
    not fit throws) and takes the event's activityType. It has exactly type,
    messageId, activityType and patch; the activity must exist (the client would
    ignore the delta without a word) and the content must still be an object."
  [activities {:strs [type messageId activityType content patch] :as e}]
  (when-not (and (string? messageId) (string? activityType))
    (bad-event "messageId and activityType must be strings" e))
  (case type
    "ACTIVITY_SNAPSHOT"
    (let [ks (set (keys e))
          keep? (false? (get e "replace"))]
      (when-not (or (= ks #{"type" "messageId" "activityType" "content"})
                    (and keep? (= ks #{"type" "messageId" "activityType" "content" "replace"})))
        (bad-event "ACTIVITY_SNAPSHOT of another shape" e))
      (when-not (map? content) (bad-event "ACTIVITY_SNAPSHOT content is not an object" e))
      (if (and keep? (contains? activities messageId))
        activities
        (assoc activities messageId {"activityType" activityType "content" content})))
    "ACTIVITY_DELTA"
    (let [_ (when-not (= (set (keys e)) #{"type" "messageId" "activityType" "patch"})
              (bad-event "ACTIVITY_DELTA of another shape" e))
          _ (when-not (vector? patch) (bad-event "ACTIVITY_DELTA patch is not an array" e))
          held (or (get activities messageId)
                   (bad-event "ACTIVITY_DELTA for an activity the client holds no snapshot of" e))
          patched (reduce apply-op (get held "content") patch)]
      (when-not (map? patched) (bad-event "ACTIVITY_DELTA leaves the content something other than an object" e))
      (assoc activities messageId {"activityType" activityType "content" patched}))
    (bad-event "not an activity event" e)))

(defn replay-activities [activities events] (reduce replay-activity activities events))

;;; Checks

(defn op
  ([o p] {"op" o "path" p})
  ([o p v] {"op" o "path" p "value" v}))

(defn delta-events [ops] (if (seq ops) [{"type" "STATE_DELTA" "delta" ops}] []))

(defn view! [tid state] (swap! *view* assoc tid state))

(defn forward!
  "Forwards events to the browser client: each must apply strictly."
  [tid events]
  (let [error (try (swap! *view* update tid replay events) nil
                   (catch Exception e (ex-message e)))]
    (is (nil? error) (str tid ": the events replay strictly"))))

(defn step!
  "Checks one state-changing result: delta and events exactly `ops`, version, then forwards it."
  [label tid result ops version]
  (is (= ops (:delta result)) (str label ": delta"))
  (is (= (delta-events ops) (:events result)) (str label ": events"))
  (is (= version (:version result)) (str label ": version"))
  (forward! tid (:events result)))

(defn witness!
  "getState equals the state computed by hand and the replay of the forwarded events."
  [client label tid expected]
  (let [{:keys [state]} (c/get-state client tid)]
    (is (= expected state) (str label ": getState = expected"))
    (is (= state (get @*view* tid)) (str label ": replayed events = getState"))))

(defn thrown
  "Runs f, which must throw the client's ex-info of `kind`; returns its ex-data
  with the message under ::msg (nil if it did not throw)."
  [label kind f]
  (let [data (try (f) nil
                  (catch clojure.lang.ExceptionInfo e (assoc (ex-data e) ::msg (ex-message e))))]
    (is (= kind (:kind data)) (str label ": throws " kind))
    (is (= :agui-state/error (:type data)) (str label ": :type"))
    data))
