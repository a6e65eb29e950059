(ns agui-state.scenarios-test
  "The scenarios of an agent server, on one shared sidecar: namespace mode over two
  runs, model-style applyOps and every error kind, diffState on a large vector,
  and concurrent callers. Each deftest opens its own threads, so they pass in any
  order (clojure.test does not promise one)."
  (:require [agui-state.client :as c]
            [agui-state.test-support :as s :refer [*client* *view* op step! thrown view! witness!]]
            [clojure.test :refer [deftest is testing use-fixtures]]))

(use-fixtures :once s/with-client)
(use-fixtures :each s/with-view)

(deftest namespace-mode-over-two-runs
  (let [own {"selectedLayer" "era5", "ui" {"panel" "open"}}
        ts1 {"raster-ops/dataset" "era5", "a~b" 1, "key with spaces" {"x" [1 2]}, "Zed" true}
        stored {"raster-ops/dataset" "cerra", "a~b" 1, "new/key~" []}]
    (testing "run 1: openRun adds the empty namespace map"
      (let [r (c/open-run *client* {:thread-id "t1" :run-id "r1" :state own :tool-state {}})]
        (view! "t1" own)
        (is (= ["t1" "r1"] [(:thread-id r) (:run-id r)]))
        (step! "run 1 openRun" "t1" r [(op "add" "/toolState" {})] 1)
        (witness! *client* "run 1 openRun" "t1" (assoc own "toolState" {}))))

    (testing "set: keys with / and ~ are escaped, one op per key, in key order"
      (let [r (c/diff-tool-state *client* {:thread-id "t1" :set ts1})]
        (step! "set" "t1" r
               [(op "add" "/toolState/Zed" true) (op "add" "/toolState/a~0b" 1)
                (op "add" "/toolState/key with spaces" {"x" [1 2]})
                (op "add" "/toolState/raster-ops~1dataset" "era5")] 2))
      (witness! *client* "set" "t1" (assoc own "toolState" ts1)))

    (testing "an equal rewrite (1.0 = 1) moves nothing"
      (let [r (c/diff-tool-state *client* {:thread-id "t1"
                                           :set {"raster-ops/dataset" "era5", "a~b" 1.0,
                                                 "key with spaces" {"x" [1 2]}}})]
        (step! "equal rewrite" "t1" r [] 2))
      (witness! *client* "equal rewrite" "t1" (assoc own "toolState" ts1)))

    (testing "remove: a key that was never there is no op"
      (let [r (c/diff-tool-state *client* {:thread-id "t1" :remove ["Zed" "never-there"]})]
        (step! "remove" "t1" r [(op "remove" "/toolState/Zed")] 3))
      (witness! *client* "remove" "t1" (assoc own "toolState" (dissoc ts1 "Zed"))))

    (testing "the full-map form"
      (let [r (c/diff-tool-state *client* {:thread-id "t1" :tool-state stored})]
        (step! "full-map form" "t1" r
               [(op "remove" "/toolState/key with spaces") (op "add" "/toolState/new~1key~0" [])
                (op "add" "/toolState/raster-ops~1dataset" "cerra")] 4))
      (witness! *client* "full-map form" "t1" (assoc own "toolState" stored)))

    ;; Run 2: the client sends its state (its own keys changed by the user
    ;; meanwhile); the server sends its stored map.
    (testing "run 2: one add of the whole stored map, the client's own keys untouched"
      (let [sent (assoc (get @*view* "t1") "selectedLayer" "merra2")
            _ (view! "t1" sent)
            r (c/open-run *client* {:thread-id "t1" :run-id "r2" :state sent :tool-state stored})]
        (step! "run 2 openRun" "t1" r [(op "add" "/toolState" stored)] 5)
        (is (= (set (keys stored)) (set (keys (get-in r [:delta 0 "value"])))))
        (witness! *client* "run 2 openRun" "t1" (assoc sent "toolState" stored))
        (is (= {"selectedLayer" "merra2", "ui" {"panel" "open"}}
               (dissoc (get @*view* "t1") "toolState")))))))

(def m1 {"title" "plan" "todos" ["milk"] "owner" "ana" "meta/data" {"a~b" {"c/d" 1}}})

(defn- open-m1!
  "Thread `tid` holding m1 at version 2, made by model-style ops; checks each step."
  [tid]
  (let [r (c/open-run *client* {:thread-id tid :state {"title" "plan"}})]
    (step! "plain openRun" tid r [] 1)
    (view! tid {"title" "plan"}))
  (let [r (c/apply-ops *client* {:thread-id tid
                                 :ops [{:op "add" :path "/todos/-" :value "milk"}
                                       {:op "replace" :path "/owner" :value "ana"}
                                       {:op "remove" :path "/gone"}
                                       {:op "add" :path ["meta/data"] :value {"a~b" {"c/d" 1}}}]})]
    (step! "applyOps" tid r [(op "add" "/todos" []) (op "add" "/todos/-" "milk")
                             (op "add" "/owner" "ana") (op "add" "/meta~1data" {"a~b" {"c/d" 1}})] 2)
    (is (= [[2 {"op" "remove" "path" "/gone"} "PATH_NOT_FOUND"]]
           (mapv (juxt #(get % "index") #(get % "op") #(get % "code")) (:skipped r)))
        "applyOps: the remove of a missing key is skipped and reported"))
  (witness! *client* "applyOps" tid m1))

(deftest model-style-apply-ops
  (open-m1! "m1"))

(deftest atomic-apply-ops-and-if-version
  (open-m1! "m2")
  (testing "an atomic batch with a failing op changes nothing"
    (let [d (thrown "atomic failure" :patch-failed
                    #(c/apply-ops *client* {:thread-id "m2" :atomic true
                                            :ops [{:op "add" :path "/x" :value 1} {:op "remove" :path "/gone"}]}))]
      (is (= [-32002 "PATH_NOT_FOUND" 1] [(:code d) (get-in d [:data "code"]) (get-in d [:data "index"])])))
    (witness! *client* "atomic failure" "m2" m1)
    (is (= 2 (:version (c/get-state *client* "m2")))))
  (testing "an ifVersion mismatch changes nothing"
    (let [d (thrown "ifVersion mismatch" :version-conflict
                    #(c/apply-ops *client* {:thread-id "m2" :if-version 1
                                            :ops [{:op "add" :path "/x" :value 1}]}))]
      (is (= [-32004 1 2] [(:code d) (get-in d [:data "expected"]) (get-in d [:data "actual"])])))
    (witness! *client* "ifVersion mismatch" "m2" m1))
  (testing "an ifVersion match applies"
    (let [r (c/apply-ops *client* {:thread-id "m2" :if-version 2 :atomic true
                                   :ops [{:op "add" :path "/todos/-" :value "eggs"}]})]
      (step! "ifVersion match" "m2" r [(op "add" "/todos/-" "eggs")] 3))
    (witness! *client* "ifVersion match" "m2" (update m1 "todos" conj "eggs"))))

(deftest error-kinds
  (open-m1! "m3")
  (let [d (thrown "unknown thread" :unknown-thread #(c/get-state *client* "nope"))]
    (is (= {"code" "UNKNOWN_THREAD" "threadId" "nope" "reason" "never opened"} (:data d))))
  (thrown "unknown thread (applyOps)" :unknown-thread #(c/apply-ops *client* {:thread-id "nope" :ops []}))
  (let [d (thrown "diffToolState outside namespace mode" :invalid-params
                  #(c/diff-tool-state *client* {:thread-id "m3" :set {"k" 1}}))]
    (is (= "NOT_NAMESPACE_MODE" (get-in d [:data "reason"]))))
  (let [d (thrown "unknown method" :rpc-error #(c/call *client* "noSuchMethod" {}))]
    (is (= -32601 (:code d))))
  (witness! *client* "the errors changed nothing" "m3" m1))

(deftest normalize-and-close-thread
  (let [r (c/normalize *client* {:ops [{:op "add" :path "/todos/-" :value 1}] :state {}})]
    (is (= [(op "add" "/todos" []) (op "add" "/todos/-" 1)] (:delta r)))
    (is (= {"todos" [1]} (:state r))))
  (open-m1! "m4")
  (is (= [true false] [(:closed (c/close-thread *client* "m4")) (:closed (c/close-thread *client* {:thread-id "m4"}))]))
  (is (= "closed" (get-in (thrown "closed thread" :unknown-thread #(c/get-state *client* "m4")) [:data "reason"]))))

(deftest diff-state-on-a-large-vector
  (let [items (vec (range 1000))]
    (c/open-run *client* {:thread-id "d1" :state {"items" items}})
    (view! "d1" {"items" items})
    (let [r (c/diff-state *client* {:thread-id "d1" :path "/items" :value (into [-1] items)})]
      (step! "diffState prepend to 1000 elements" "d1" r [(op "add" "/items/0" -1)] 2))
    (witness! *client* "diffState prepend" "d1" {"items" (into [-1] items)})
    (let [r (c/diff-state *client* {:thread-id "d1" :value {"items" (into [-2 -1] items)}})]
      (step! "diffState at the root" "d1" r [(op "add" "/items/0" -2)] 3))
    (witness! *client* "diffState at the root" "d1" {"items" (into [-2 -1] items)})))

(deftest concurrent-callers
  (let [per-thread (doall (for [i (range 8)]
                            (future
                              (let [tid (str "c" i)]
                                (c/open-run *client* {:thread-id tid :tool-state {}})
                                (dotimes [j 5] (c/diff-tool-state *client* {:thread-id tid :set {(str "k/" j) [i j]}}))
                                (c/get-state *client* tid)))))
        _ (c/open-run *client* {:thread-id "shared" :state {"log" []}})
        shared (doall (for [i (range 32)]
                        (future (c/apply-ops *client* {:thread-id "shared"
                                                       :ops [{:op "add" :path "/log/-" :value i}]}))))]
    (doseq [[i f] (map-indexed vector per-thread)]
      (is (= {:version 6 :state {"toolState" (into {} (for [j (range 5)] [(str "k/" j) [i j]]))}} @f)
          (str "concurrent thread c" i ": its own state")))
    (doseq [[i f] (map-indexed vector shared)]
      (is (= [(op "add" "/log/-" i)] (:delta @f)) (str "concurrent append " i ": its own delta")))
    (is (= (set (range 2 34)) (set (map (comp :version deref) shared))) "32 appends, 32 distinct versions")
    (is (= (vec (range 32)) (vec (sort (get-in (c/get-state *client* "shared") [:state "log"]))))
        "every append landed")))
