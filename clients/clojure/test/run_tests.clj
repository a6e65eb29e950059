;; Test program for agui-state.client. Run from the repository root:
;;   clojure -cp /usr/share/java/data.json.jar:clients/clojure/src clients/clojure/test/run_tests.clj [BINARY]
;; The binary comes from the first argument, else AGUI_STATE_BIN. Exits 1 on any failure.
;;
;; Witnesses. There is no Debian JSON Patch library for Clojure, so every call is
;; checked three ways: its ops are compared exactly with the ops the scenario
;; expects; the events are replayed by a small strict applier (add/remove/replace,
;; the only ops agui-state emits here) onto a model of what the browser client
;; holds; and getState must equal both that replay and the state computed by hand.
(ns run-tests
  (:require [agui-state.client :as c]
            [clojure.string :as str]))

(def bin (or (first *command-line-args*) (System/getenv "AGUI_STATE_BIN")
             (do (println "usage: run_tests.clj BINARY (or set AGUI_STATE_BIN)") (System/exit 2))))

(def passed (atom 0))
(def failures (atom []))

(defn check [label expected actual]
  (if (= expected actual)
    (swap! passed inc)
    (do (swap! failures conj label)
        (println "FAIL:" label "\n  expected:" (pr-str expected) "\n  actual:  " (pr-str actual)))))

(defn thrown
  "Runs f, which must throw ex-info of `kind`; returns its ex-data (nil if it did not throw)."
  [label kind f]
  (let [data (try (f) nil (catch clojure.lang.ExceptionInfo e (assoc (ex-data e) ::msg (ex-message e))))]
    (check (str label ": throws " kind) kind (:kind data))
    (when data (check (str label ": :type") :agui-state/error (:type data)))
    data))

;;; A strict RFC 6902 applier for add/remove/replace: it throws where a strict client would.

(defn parse-ptr [p]
  (if (= p "") []
      (mapv #(-> % (str/replace "~1" "/") (str/replace "~0" "~")) (rest (str/split p #"/" -1)))))

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

(defn apply-op [doc {:strs [op path value]}]
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

(defn replay [state events]
  (reduce (fn [s {:strs [type delta snapshot]}]
            (case type
              "STATE_DELTA" (reduce apply-op s delta)
              "STATE_SNAPSHOT" snapshot))
          state events))

;;; The browser client's view of each thread: the replay of every event forwarded so far.

(def client-view (atom {}))

(defn forward! [tid events]
  (try (swap! client-view update tid replay events)
       (catch Exception e
         (check (str tid ": events replay strictly (" (ex-message e) ")") :ok :failed))))

(defn delta-events [ops] (if (seq ops) [{"type" "STATE_DELTA" "delta" ops}] []))

(defn step!
  "Checks one state-changing result: delta and events exactly `ops`, version, then forwards it."
  [label tid result ops version]
  (check (str label ": delta") ops (:delta result))
  (check (str label ": events") (delta-events ops) (:events result))
  (check (str label ": version") version (:version result))
  (forward! tid (:events result)))

(defn witness!
  "getState equals the state computed by hand and the replay of the forwarded events."
  [client label tid expected]
  (let [{:keys [state]} (c/get-state client tid)]
    (check (str label ": getState = expected") expected state)
    (check (str label ": replayed events = getState") state (get @client-view tid))))

(defn op
  ([o p] {"op" o "path" p})
  ([o p v] {"op" o "path" p "value" v}))

;;; Scenarios

(defn namespace-mode [client]
  (let [own {"selectedLayer" "era5", "ui" {"panel" "open"}}
        ts1 {"raster-ops/dataset" "era5", "a~b" 1, "key with spaces" {"x" [1 2]}, "Zed" true}
        r (c/open-run client {:thread-id "t1" :run-id "r1" :state own :tool-state {}})]
    (swap! client-view assoc "t1" own)
    (check "run 1 openRun: thread-id, run-id" ["t1" "r1"] [(:thread-id r) (:run-id r)])
    (step! "run 1 openRun" "t1" r [(op "add" "/toolState" {})] 1)
    (witness! client "run 1 openRun" "t1" (assoc own "toolState" {}))

    (let [r (c/diff-tool-state client {:thread-id "t1"
                                       :set {"raster-ops/dataset" "era5", "a~b" 1,
                                             "key with spaces" {"x" [1 2]}, "Zed" true}})]
      (step! "set with / and ~ keys" "t1" r
             [(op "add" "/toolState/Zed" true) (op "add" "/toolState/a~0b" 1)
              (op "add" "/toolState/key with spaces" {"x" [1 2]})
              (op "add" "/toolState/raster-ops~1dataset" "era5")] 2))
    (witness! client "set with / and ~ keys" "t1" (assoc own "toolState" ts1))

    (let [r (c/diff-tool-state client {:thread-id "t1"
                                       :set {"raster-ops/dataset" "era5", "a~b" 1.0,
                                             "key with spaces" {"x" [1 2]}}})]
      (step! "equal rewrite (1.0 = 1)" "t1" r [] 2))
    (witness! client "equal rewrite" "t1" (assoc own "toolState" ts1))

    (let [r (c/diff-tool-state client {:thread-id "t1" :remove ["Zed" "never-there"]})]
      (step! "remove" "t1" r [(op "remove" "/toolState/Zed")] 3))
    (witness! client "remove" "t1" (assoc own "toolState" (dissoc ts1 "Zed")))

    (let [stored {"raster-ops/dataset" "cerra", "a~b" 1, "new/key~" []}
          r (c/diff-tool-state client {:thread-id "t1" :tool-state stored})]
      (step! "full-map form" "t1" r
             [(op "remove" "/toolState/key with spaces") (op "add" "/toolState/new~1key~0" [])
              (op "add" "/toolState/raster-ops~1dataset" "cerra")] 4)
      (witness! client "full-map form" "t1" (assoc own "toolState" stored))

      ;; Run 2: the client sends its state (its own keys changed by the user meanwhile);
      ;; the server sends its stored map.
      (let [sent (assoc (get @client-view "t1") "selectedLayer" "merra2")
            _ (swap! client-view assoc "t1" sent)
            r (c/open-run client {:thread-id "t1" :run-id "r2" :state sent :tool-state stored})]
        (step! "run 2 openRun" "t1" r [(op "add" "/toolState" stored)] 5)
        (check "run 2 openRun names every stored key" (set (keys stored))
               (set (keys (get-in r [:delta 0 "value"]))))
        (witness! client "run 2 openRun" "t1" (assoc sent "toolState" stored))
        (check "run 2: the client's own keys untouched" {"selectedLayer" "merra2", "ui" {"panel" "open"}}
               (dissoc (get @client-view "t1") "toolState"))))))

(def m1 {"title" "plan" "todos" ["milk"] "owner" "ana" "meta/data" {"a~b" {"c/d" 1}}})

(defn model-ops [client]
  (let [r (c/open-run client {:thread-id "m1" :state {"title" "plan"}})]
    (step! "plain openRun" "m1" r [] 1)
    (swap! client-view assoc "m1" {"title" "plan"}))
  (let [r (c/apply-ops client {:thread-id "m1"
                               :ops [{:op "add" :path "/todos/-" :value "milk"}
                                     {:op "replace" :path "/owner" :value "ana"}
                                     {:op "remove" :path "/gone"}
                                     {:op "add" :path ["meta/data"] :value {"a~b" {"c/d" 1}}}]})]
    (step! "applyOps" "m1" r [(op "add" "/todos" []) (op "add" "/todos/-" "milk")
                              (op "add" "/owner" "ana") (op "add" "/meta~1data" {"a~b" {"c/d" 1}})] 2)
    (check "applyOps: remove of a missing key skipped"
           [[2 {"op" "remove" "path" "/gone"} "PATH_NOT_FOUND"]]
           (mapv (juxt #(get % "index") #(get % "op") #(get % "code")) (:skipped r))))
  (witness! client "applyOps" "m1" m1)

  (let [d (thrown "atomic failure" :patch-failed
                  #(c/apply-ops client {:thread-id "m1" :atomic true
                                        :ops [{:op "add" :path "/x" :value 1} {:op "remove" :path "/gone"}]}))]
    (check "atomic failure: code -32002, data" [-32002 "PATH_NOT_FOUND" 1]
           [(:code d) (get-in d [:data "code"]) (get-in d [:data "index"])]))
  (witness! client "atomic failure changes nothing" "m1" m1)
  (check "atomic failure: version unchanged" 2 (:version (c/get-state client "m1")))

  (let [d (thrown "ifVersion mismatch" :version-conflict
                  #(c/apply-ops client {:thread-id "m1" :if-version 1
                                        :ops [{:op "add" :path "/x" :value 1}]}))]
    (check "ifVersion mismatch: data" [-32004 1 2]
           [(:code d) (get-in d [:data "expected"]) (get-in d [:data "actual"])]))
  (witness! client "ifVersion mismatch changes nothing" "m1" m1)
  (let [r (c/apply-ops client {:thread-id "m1" :if-version 2 :atomic true
                               :ops [{:op "add" :path "/todos/-" :value "eggs"}]})]
    (step! "ifVersion match" "m1" r [(op "add" "/todos/-" "eggs")] 3))
  (witness! client "ifVersion match" "m1" (update m1 "todos" conj "eggs"))

  (let [d (thrown "unknown thread" :unknown-thread #(c/get-state client "nope"))]
    (check "unknown thread: data" {"code" "UNKNOWN_THREAD" "threadId" "nope" "reason" "never opened"} (:data d)))
  (thrown "unknown thread (applyOps)" :unknown-thread
          #(c/apply-ops client {:thread-id "nope" :ops []}))
  (let [d (thrown "diffToolState outside namespace mode" :invalid-params
                  #(c/diff-tool-state client {:thread-id "m1" :set {"k" 1}}))]
    (check "invalid params: reason" "NOT_NAMESPACE_MODE" (get-in d [:data "reason"])))
  (thrown "unknown method" :rpc-error #(c/call client "noSuchMethod" {}))

  (let [r (c/normalize client {:ops [{:op "add" :path "/todos/-" :value 1}] :state {}})]
    (check "normalize: delta" [(op "add" "/todos" []) (op "add" "/todos/-" 1)] (:delta r))
    (check "normalize: state" {"todos" [1]} (:state r)))
  (check "closeThread" [true false] [(:closed (c/close-thread client "m1")) (:closed (c/close-thread client "m1"))])
  (check "closed thread: reason" "closed"
         (get-in (thrown "closed thread" :unknown-thread #(c/get-state client "m1")) [:data "reason"])))

(defn diff-state [client]
  (let [items (vec (range 1000))]
    (c/open-run client {:thread-id "d1" :state {"items" items}})
    (swap! client-view assoc "d1" {"items" items})
    (let [r (c/diff-state client {:thread-id "d1" :path "/items" :value (into [-1] items)})]
      (step! "diffState prepend to 1000 elements" "d1" r [(op "add" "/items/0" -1)] 2))
    (witness! client "diffState prepend" "d1" {"items" (into [-1] items)})
    (let [r (c/diff-state client {:thread-id "d1" :value {"items" (into [-2 -1] items)}})]
      (step! "diffState at the root" "d1" r [(op "add" "/items/0" -2)] 3))
    (witness! client "diffState at the root" "d1" {"items" (into [-2 -1] items)})))

(defn concurrency [client]
  (let [per-thread (doall (for [i (range 8)]
                            (future
                              (let [tid (str "c" i)]
                                (c/open-run client {:thread-id tid :tool-state {}})
                                (dotimes [j 5] (c/diff-tool-state client {:thread-id tid :set {(str "k/" j) [i j]}}))
                                (c/get-state client tid)))))
        _ (c/open-run client {:thread-id "shared" :state {"log" []}})
        shared (doall (for [i (range 32)]
                        (future (c/apply-ops client {:thread-id "shared"
                                                     :ops [{:op "add" :path "/log/-" :value i}]}))))]
    (doseq [[i f] (map-indexed vector per-thread)]
      (check (str "concurrent thread c" i ": its own state")
             {:version 6 :state {"toolState" (into {} (for [j (range 5)] [(str "k/" j) [i j]]))}} @f))
    (doseq [[i f] (map-indexed vector shared)]
      (check (str "concurrent append " i ": its own delta") [(op "add" "/log/-" i)] (:delta @f)))
    (check "concurrent appends: 32 distinct versions" (set (range 2 34)) (set (map (comp :version deref) shared)))
    (check "concurrent appends: all landed" (vec (range 32)) (vec (sort (get-in (c/get-state client "shared") [:state "log"]))))))

(defn crash-recovery [client]
  (let [p (c/process client)
        stored {"raster-ops/dataset" "cerra", "a~b" 1, "new/key~" []}]
    ;; Freeze the sidecar so a call is certainly pending, then kill it.
    (.waitFor (.start (ProcessBuilder. ["kill" "-STOP" (str (.pid p))])))
    (let [pending (future (try (c/get-state client "t1") :answered
                               (catch clojure.lang.ExceptionInfo e (ex-data e))))]
      (Thread/sleep 300)
      (check "a call is pending while the sidecar is stopped" false (realized? pending))
      (.destroyForcibly p)
      (.waitFor p)
      (let [d (deref pending 10000 :hung)]
        (check "pending call: :sidecar-exited with exit status" [:sidecar-exited 137]
               (when (map? d) [(:kind d) (:exit-status d)]))))
    (let [d (thrown "call after the crash" :sidecar-exited
                    #(c/diff-tool-state client {:thread-id "t1" :set {"k" 1}}))]
      (check "call after the crash: status 137 named in the message" true
             (boolean (re-find #"exit status 137" (str (::msg d))))))

    (c/restart client)
    (check "restart: a fresh process" true (.isAlive (c/process client)))
    (check "after restart: thread never opened" "never opened"
           (get-in (thrown "after restart" :unknown-thread #(c/get-state client "t1")) [:data "reason"]))
    (let [sent (get @client-view "t1")
          r (c/open-run client {:thread-id "t1" :run-id "r3" :state sent :tool-state stored})]
      (step! "resync openRun" "t1" r [(op "add" "/toolState" stored)] 1)
      (witness! client "resync openRun" "t1" sent))
    (let [r (c/diff-tool-state client {:thread-id "t1" :set {"raster-ops/bounds" [0 0 10 10]}})]
      (step! "after resync: set" "t1" r [(op "add" "/toolState/raster-ops~1bounds" [0 0 10 10])] 2))
    (let [r (c/diff-tool-state client {:thread-id "t1" :remove ["a~b"] :set {"raster-ops/dataset" "era5"}})]
      (step! "after resync: set and remove" "t1" r
             [(op "remove" "/toolState/a~0b") (op "add" "/toolState/raster-ops~1dataset" "era5")] 3))
    (witness! client "after resync" "t1"
              {"selectedLayer" "merra2", "ui" {"panel" "open"},
               "toolState" {"raster-ops/dataset" "era5", "new/key~" [], "raster-ops/bounds" [0 0 10 10]}})))

(defn lifecycle []
  (let [cl (with-open [cl (c/start {:path bin :env {"AGUI_STATE_LOG_LEVEL" "warn"}})]
             (check "keyword keys keep their full text" {"raster-ops/dataset" 1}
                    (:state (do (c/open-run cl {:thread-id "k" :state {:raster-ops/dataset 1}})
                                (c/get-state cl "k"))))
             cl)]
    (check "with-open: close ends stdin, the sidecar exits 0" 0 (.exitValue (c/process cl)))
    (check "call after close names exit status 0" 0
           (:exit-status (thrown "call after close" :sidecar-exited #(c/get-state cl "k")))))
  (when (System/getenv "AGUI_STATE_BIN")
    (with-open [cl (c/start {:env {"AGUI_STATE_LOG_LEVEL" "warn"}})]
      (check "path from AGUI_STATE_BIN" true (string? (:version (c/call cl "stats" {})))))))

(defn -main []
  (let [t0 (System/nanoTime)]
    (with-open [client (c/start {:path bin :env {"AGUI_STATE_LOG_LEVEL" "warn"} :timeout-ms 30000})]
      (doseq [[name f] [["namespace mode" namespace-mode] ["model-style ops" model-ops]
                        ["diffState" diff-state] ["concurrency" concurrency]
                        ["crash recovery" crash-recovery]]]
        (try (f client)
             (catch Throwable e
               (swap! failures conj name)
               (println "FAIL:" name "threw" (pr-str e))))))
    (try (lifecycle) (catch Throwable e (swap! failures conj "lifecycle") (println "FAIL: lifecycle threw" (pr-str e))))
    (let [ms (quot (- (System/nanoTime) t0) 1000000)]
      (if (seq @failures)
        (do (println (str "clojure client: " (count @failures) " of " (+ @passed (count @failures))
                          " checks FAILED: " (str/join ", " @failures)))
            (shutdown-agents) (System/exit 1))
        (do (println (str "clojure client: " @passed " checks passed (" ms " ms)"))
            (shutdown-agents) (System/exit 0))))))

(-main)
