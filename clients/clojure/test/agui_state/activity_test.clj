(ns agui-state.activity-test
  "Activities (protocol/README.md §10), played through the four activity wrappers
  and checked like state: each call's delta, skips and events are compared
  exactly; every forwarded event is replayed strictly onto a model of the browser
  client's activity messages (test-support/replay-activities); and after every
  call, failed ones included, getActivity must equal both that replay and the
  activity computed by hand, at the version computed by hand. A sidecar that
  answers -32601 (no §10) fails here."
  (:require [agui-state.client :as c]
            [agui-state.test-support :as s :refer [*client* op thrown]]
            [clojure.test :refer [deftest is testing use-fixtures]]))

(use-fixtures :once s/with-client)

;;; The browser client: thread id -> messageId -> {"activityType" "content"}.

(def ^:dynamic *browser* nil)

(defn- with-browser [f] (binding [*browser* (atom {})] (f)))

(use-fixtures :each with-browser)

(defn- forward!
  "Forwards events to the browser client: each must apply strictly."
  [tid events]
  (let [error (try (swap! *browser* update tid #(s/replay-activities (or % {}) events)) nil
                   (catch Exception e (ex-message e)))]
    (is (nil? error) (str tid ": the activity events replay strictly"))))

(defn- snapshot-event
  ([mid type content] {"type" "ACTIVITY_SNAPSHOT" "messageId" mid "activityType" type "content" content})
  ([mid type content replace?] (assoc (snapshot-event mid type content) "replace" replace?)))

(defn- delta-event [mid type patch]
  {"type" "ACTIVITY_DELTA" "messageId" mid "activityType" type "patch" patch})

(defn- activity [type content] {"activityType" type "content" content})

(defn- step!
  "Checks one activity call's result exactly (`expected` holds :version, :events and,
  where the method returns them, :delta and :skipped as [index code op]), then
  forwards its events."
  [label tid result expected]
  (is (= (:version expected) (:version result)) (str label ": version"))
  (is (= (:events expected) (:events result)) (str label ": events"))
  (when (contains? expected :delta)
    (is (= (:delta expected) (:delta result)) (str label ": delta")))
  (when (contains? expected :skipped)
    (is (= (:skipped expected)
           (mapv (juxt #(get % "index") #(get % "code") #(get % "op")) (:skipped result)))
        (str label ": skipped")))
  (is (= (set (keys expected)) (set (keys result))) (str label ": the result's members"))
  (forward! tid (:events result)))

(defn- witness!
  "The thread's activities, as computed by hand (messageId -> activity), at
  `version`: getActivity answers each of them, the browser holds exactly them,
  and `unknown` messageIds are -32005."
  ([cl label tid version expected] (witness! cl label tid version expected []))
  ([cl label tid version expected unknown]
   (doseq [[mid {:strs [activityType content]}] expected]
     (is (= {:version version :activity-type activityType :content content}
            (c/get-activity cl {:thread-id tid :message-id mid}))
         (str label ": getActivity " mid " = expected")))
   (is (= expected (get @*browser* tid {})) (str label ": replayed events = getActivity"))
   (doseq [mid unknown]
     (let [d (thrown (str label ": " mid " unknown") :unknown-activity
                     #(c/get-activity cl {:thread-id tid :message-id mid}))]
       (is (= [-32005 {"code" "UNKNOWN_ACTIVITY" "threadId" tid "messageId" mid}] [(:code d) (:data d)]))))))

(defn- field-reason [d] [(get-in d [:data "field"]) (get-in d [:data "reason"])])

(deftest one-thread-through-the-four-methods
  (let [tid "a1", cl *client*
        plan "plan-1", search "search-1"
        at (fn [mid & kvs] (into {:thread-id tid :message-id mid} (apply hash-map kvs)))
        v1 {"steps" [{"title" "search" "done" false}] "meta" {"n" 1 "k" "x"}}
        v2 {"steps" [{"title" "search" "done" true}] "meta" {"n" 2 "k" "x"} "done" nil}
        v3 (assoc v2 "status" "running" "notes" ["started"])
        v4 (-> v3 (update "steps" conj {"title" "search" "done" true})
               (update "meta" dissoc "k") (assoc "kind" "x"))]
    ;; A non-empty state, so that openRun itself is version 1 (an empty one would
    ;; equal the new thread's {} and leave it at 0).
    (is (= 1 (:version (c/open-run cl {:thread-id tid :state {"title" "plan"}}))))

    (testing "errors before any activity: an unknown activity, an unknown thread"
      (witness! cl "fresh thread" tid 1 {} [plan])
      (let [d (thrown "applyActivityOps, unknown activity" :unknown-activity
                      #(c/apply-activity-ops cl (at plan :ops [{:op "add" :path "/a" :value 1}])))]
        (is (= [-32005 {"code" "UNKNOWN_ACTIVITY" "threadId" tid "messageId" plan}] [(:code d) (:data d)])))
      (let [d (thrown "an unknown thread" :unknown-thread #(c/get-activity cl {:thread-id "nope" :message-id plan}))]
        (is (= {"code" "UNKNOWN_THREAD" "threadId" "nope" "reason" "never opened"} (:data d))))
      (let [d (thrown "diffActivity creating with no type" :invalid-params
                      #(c/diff-activity cl (at plan :content {})))]
        (is (= ["/activityType" "MISSING"] (field-reason d))))
      (let [d (thrown "content not an object" :invalid-params
                      #(c/activity-snapshot cl (at plan :activity-type "plan" :content [1 2])))]
        (is (= ["/content" "ROOT_NOT_OBJECT"] (field-reason d))))
      (witness! cl "the refused calls created nothing" tid 1 {} [plan]))

    (testing "diffActivity creates it: an ACTIVITY_SNAPSHOT, delta []"
      (step! "diffActivity create" tid (c/diff-activity cl (at plan :activity-type "plan" :content v1))
             {:version 2 :delta [] :events [(snapshot-event plan "plan" v1)]})
      (witness! cl "diffActivity create" tid 2 {plan (activity "plan" v1)} [search]))

    (testing "diffActivity: a minimal ACTIVITY_DELTA, nil inside the content as null; equal content: nothing"
      (let [ops [(op "replace" "/steps/0/done" true) (op "replace" "/meta/n" 2) (op "add" "/done" nil)]]
        (step! "diffActivity delta" tid (c/diff-activity cl (at plan :content v2))
               {:version 3 :delta ops :events [(delta-event plan "plan" ops)]}))
      (witness! cl "diffActivity delta" tid 3 {plan (activity "plan" v2)})
      (step! "diffActivity equal" tid (c/diff-activity cl (at plan :content v2 :activity-type "plan"))
             {:version 3 :delta [] :events []})
      (witness! cl "diffActivity equal" tid 3 {plan (activity "plan" v2)}))

    (testing "applyActivityOps: a retype, and ops that do not fit as given"
      ;; A replace of a missing member becomes an add; an append to a missing array
      ;; creates it first; a replace of the root with an array, and a remove of a
      ;; missing member, are skipped.
      (let [given [{"op" "replace" "path" "/status" "value" "running"}
                   {"op" "add" "path" "/notes/-" "value" "started"}
                   {"op" "replace" "path" "" "value" []}
                   {"op" "remove" "path" "/gone"}]
            ops [(op "add" "/status" "running") (op "add" "/notes" []) (op "add" "/notes/-" "started")]]
        (step! "applyActivityOps retype" tid
               (c/apply-activity-ops cl (at plan :activity-type "plan-running" :ops given))
               {:version 4 :delta ops :skipped [[2 "ROOT_NOT_OBJECT" (given 2)] [3 "PATH_NOT_FOUND" (given 3)]]
                :events [(delta-event plan "plan-running" ops)]}))
      (witness! cl "applyActivityOps retype" tid 4 {plan (activity "plan-running" v3)}))

    (testing "applyActivityOps: copy, move and test; a passing test is checked and dropped"
      (let [ops [{"op" "copy" "from" "/steps/0" "path" "/steps/-"} {"op" "move" "from" "/meta/k" "path" "/kind"}]]
        (step! "applyActivityOps copy/move" tid
               (c/apply-activity-ops cl (at plan :ops (into [{:op "test" :path "/meta/n" :value 2}] ops)))
               {:version 5 :delta ops :skipped [] :events [(delta-event plan "plan-running" ops)]}))
      (witness! cl "applyActivityOps copy/move" tid 5 {plan (activity "plan-running" v4)}))

    (testing "applyActivityOps: a retype with no ops is one ACTIVITY_DELTA with an empty patch"
      (step! "retype, no ops" tid (c/apply-activity-ops cl (at plan :activity-type "plan-done" :ops []))
             {:version 6 :delta [] :skipped [] :events [(delta-event plan "plan-done" [])]})
      (witness! cl "retype, no ops" tid 6 {plan (activity "plan-done" v4)})
      (step! "same type, no ops" tid (c/apply-activity-ops cl (at plan :activity-type "plan-done" :ops []))
             {:version 6 :delta [] :skipped [] :events []})
      (witness! cl "same type, no ops" tid 6 {plan (activity "plan-done" v4)}))

    (testing "applyActivityOps: atomic and ifVersion refusals change nothing"
      (let [d (thrown "atomic" :patch-failed
                      #(c/apply-activity-ops cl (at plan :atomic true :ops [{:op "add" :path "/x" :value 1}
                                                                            {:op "replace" :path "" :value [1]}])))]
        (is (= [-32002 "ROOT_NOT_OBJECT" 1] [(:code d) (get-in d [:data "code"]) (get-in d [:data "index"])])))
      (let [d (thrown "ifVersion" :version-conflict
                      #(c/apply-activity-ops cl (at plan :if-version 5 :ops [{:op "add" :path "/x" :value 1}])))]
        (is (= {"code" "VERSION_CONFLICT" "expected" 5 "actual" 6} (:data d))))
      (thrown "ifVersion (activitySnapshot)" :version-conflict
              #(c/activity-snapshot cl (at plan :if-version 0 :activity-type "t" :content {})))
      (witness! cl "the refused calls changed nothing" tid 6 {plan (activity "plan-done" v4)}))

    (testing "activitySnapshot with replace false: an existing activity stays as it is"
      (step! "replace false, existing" tid
             (c/activity-snapshot cl (at plan :activity-type "other" :content {} :replace false))
             {:version 6 :events [(snapshot-event plan "plan-done" v4 false)]})
      (witness! cl "replace false, existing" tid 6 {plan (activity "plan-done" v4)})
      (step! "replace false, new" tid
             (c/activity-snapshot cl (at search :activity-type "search" :content {"q" "era5"} :replace false))
             ;; created here: no replace member, so it replaces any copy a client kept (§10)
             {:version 7 :events [(snapshot-event search "search" {"q" "era5"})]})
      (witness! cl "replace false, new" tid 7
                {plan (activity "plan-done" v4) search (activity "search" {"q" "era5"})}))

    (testing "activitySnapshot: replaces type and content; an equal one still sends its event"
      (step! "snapshot replace" tid
             (c/activity-snapshot cl (at plan :activity-type "plan" :content {"steps" []}))
             {:version 8 :events [(snapshot-event plan "plan" {"steps" []})]})
      (step! "snapshot equal" tid
             (c/activity-snapshot cl (at plan :activity-type "plan" :content {"steps" []} :replace true))
             {:version 8 :events [(snapshot-event plan "plan" {"steps" []})]})
      (witness! cl "snapshot replace" tid 8
                {plan (activity "plan" {"steps" []}) search (activity "search" {"q" "era5"})}))

    (testing "applyActivityOps: no emitted op names the root (protocol/README.md §5 rule 7)"
      (let [ops [(op "remove" "/steps") (op "add" "/title" "t")]]
        (step! "root add of an object" tid
               (c/apply-activity-ops cl (at plan :ops [{:op "add" :path "" :value {"title" "t"}}]))
               {:version 9 :delta ops :skipped [] :events [(delta-event plan "plan" ops)]}))
      (witness! cl "root add of an object" tid 9
                {plan (activity "plan" {"title" "t"}) search (activity "search" {"q" "era5"})}))

    (testing "activities survive openRun, and go with closeThread"
      (let [r (c/open-run cl {:thread-id tid :state {"title" "plan 2"}})]
        (is (= [10 []] [(:version r) (:events r)])))
      (witness! cl "after openRun" tid 10
                {plan (activity "plan" {"title" "t"}) search (activity "search" {"q" "era5"})})
      (let [before (:activities (c/stats cl))]
        (is (= {:closed true} (c/close-thread cl tid)))
        (is (= (- before 2) (:activities (c/stats cl))) "closeThread dropped the thread's two activities"))
      (let [d (thrown "closed thread" :unknown-thread #(c/get-activity cl (at plan)))]
        (is (= "closed" (get-in d [:data "reason"]))))
      (thrown "closed thread (diffActivity)" :unknown-thread
              #(c/diff-activity cl (at plan :activity-type "plan" :content {})))
      (is (= 0 (:version (c/open-run cl {:thread-id tid}))) "opened again: a new thread")
      (swap! *browser* dissoc tid)                 ; a new thread: the client starts over too
      (witness! cl "opened again" tid 0 {} [plan search]))))

(deftest restarted-sidecar-then-resync
  ;; Its own sidecar, so that stats counts from zero, and --max-threads 1 to see
  ;; an eviction drop activities too.
  (with-open [cl (s/start-client {:args ["--max-threads" "1"]})]
    (let [tid "r1", plan "plan-1", search "search-1"
          at (fn [mid & kvs] (into {:thread-id tid :message-id mid} (apply hash-map kvs)))
          content {"steps" [{"title" "search" "done" true}] "status" "running"}
          state {"title" "plan"}]
      (is (= 0 (:activities (c/stats cl))) "a fresh sidecar holds no activity")
      (c/open-run cl {:thread-id tid :state state})
      (step! "create plan" tid (c/diff-activity cl (at plan :activity-type "plan" :content {"steps" []}))
             {:version 2 :delta [] :events [(snapshot-event plan "plan" {"steps" []})]})
      (step! "patch plan" tid
             (c/apply-activity-ops cl (at plan :ops [{:op "add" :path "/steps/-" :value {"title" "search" "done" true}}
                                                     {:op "replace" :path "/status" :value "running"}]))
             {:version 3 :delta [(op "add" "/steps/-" {"title" "search" "done" true}) (op "add" "/status" "running")]
              :skipped [] :events [(delta-event plan "plan" [(op "add" "/steps/-" {"title" "search" "done" true})
                                                            (op "add" "/status" "running")])]})
      (step! "create search" tid (c/activity-snapshot cl (at search :activity-type "search" :content {"q" "era5"}))
             {:version 4 :events [(snapshot-event search "search" {"q" "era5"})]})
      (witness! cl "before the restart" tid 4 {plan (activity "plan" content) search (activity "search" {"q" "era5"})})
      (is (= [1 2] ((juxt :threads :activities) (c/stats cl))))

      (c/restart cl)
      (testing "restart, openRun again: the thread is back, its activities are not"
        (is (= 1 (:version (c/open-run cl {:thread-id tid :state state}))))
        (let [d (thrown "applyActivityOps after the restart" :unknown-activity
                        #(c/apply-activity-ops cl (at plan :ops [{:op "replace" :path "/status" :value "done"}])))]
          (is (= [-32005 {"code" "UNKNOWN_ACTIVITY" "threadId" tid "messageId" plan}] [(:code d) (:data d)])))
        (is (= 0 (:activities (c/stats cl)))))

      (testing "resync: diffActivity snapshots the activity it does not hold, activitySnapshot the other"
        ;; The browser still holds both activities as they were: the snapshots replace them.
        (step! "diffActivity resync" tid (c/diff-activity cl (at plan :activity-type "plan" :content content))
               {:version 2 :delta [] :events [(snapshot-event plan "plan" content)]})
        (step! "activitySnapshot resync" tid
               (c/activity-snapshot cl (at search :activity-type "search" :content {"q" "era5"}))
               {:version 3 :events [(snapshot-event search "search" {"q" "era5"})]})
        (witness! cl "after the resync" tid 3 {plan (activity "plan" content) search (activity "search" {"q" "era5"})})
        (step! "carry on" tid (c/apply-activity-ops cl (at plan :ops [{:op "replace" :path "/status" :value "done"}]))
               {:version 4 :delta [(op "replace" "/status" "done")] :skipped []
                :events [(delta-event plan "plan" [(op "replace" "/status" "done")])]})
        (witness! cl "carry on" tid 4
                  {plan (activity "plan" (assoc content "status" "done")) search (activity "search" {"q" "era5"})})
        (is (= [1 2] ((juxt :threads :activities) (c/stats cl)))))

      (testing "an evicted thread's activities go with it"
        (c/open-run cl {:thread-id "r2" :state {}})
        (is (= [1 1 0] ((juxt :threads :evicted :activities) (c/stats cl))))
        (is (= "evicted" (get-in (thrown "evicted" :unknown-thread #(c/get-activity cl (at plan)))
                                 [:data "reason"])))))))
