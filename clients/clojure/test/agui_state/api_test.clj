(ns agui-state.api-test
  "The params rules (nil as JSON null for :value, nil as \"not given\" elsewhere) and
  the wrappers beyond the run: escapePointer, parsePointer, stats, rpc.discover."
  (:require [agui-state.client :as c]
            [agui-state.test-support :as s :refer [*client* op step! thrown view! witness!]]
            [clojure.data.json :as json]
            [clojure.test :refer [deftest is testing use-fixtures]]))

(use-fixtures :once s/with-client)
(use-fixtures :each s/with-view)

(defn- protocol-doc
  "protocol/openrpc.json, string keys, or nil when the tests run outside the repository."
  []
  (some-> (s/repo-file "protocol/openrpc.json") slurp json/read-str))

(deftest diff-state-sends-nil-as-null
  (let [before {"a" 1 "b" [1 2] "c" {"d" true}}]
    (c/open-run *client* {:thread-id "n1" :state before})
    (view! "n1" before)
    (testing "at a member: the sidecar holds null, and the key is still there"
      (step! "value nil at /a" "n1" (c/diff-state *client* {:thread-id "n1" :path "/a" :value nil})
             [(op "replace" "/a" nil)] 2)
      (witness! *client* "value nil at /a" "n1" (assoc before "a" nil))
      (is (= {:version 2 :state nil} (c/get-state *client* {:thread-id "n1" :path "/a"}))))
    (testing "in an array, with a string param key, and ifVersion nil still left out"
      (step! "value nil at /b/0" "n1"
             (c/diff-state *client* {"threadId" "n1" :path ["b" 0] "value" nil :if-version nil})
             [(op "replace" "/b/0" nil)] 3)
      (witness! *client* "value nil at /b/0" "n1" {"a" nil "b" [nil 2] "c" {"d" true}}))
    (testing "inside the value, nil was always null"
      (step! "nil inside a map" "n1"
             (c/diff-state *client* {:thread-id "n1" :value {"a" nil "b" [nil 2] "c" nil}})
             [(op "replace" "/c" nil)] 4)
      (witness! *client* "nil inside a map" "n1" {"a" nil "b" [nil 2] "c" nil}))
    (testing "null where the protocol forbids it is the sidecar's answer, not a missing param"
      (let [d (thrown "null at the root" :invalid-params #(c/diff-state *client* {:thread-id "n1" :value nil}))]
        (is (= ["/value" "ROOT_NOT_OBJECT"] [(get-in d [:data "field"]) (get-in d [:data "reason"])]))))
    (testing "no :value key at all: nothing is sent, and the sidecar says it is missing"
      (let [d (thrown "no value" :invalid-params #(c/diff-state *client* {:thread-id "n1" :path "/a"}))]
        (is (= ["/value" "MISSING"] [(get-in d [:data "field"]) (get-in d [:data "reason"])]))))
    (witness! *client* "the refused calls changed nothing" "n1" {"a" nil "b" [nil 2] "c" nil})))

(deftest nil-params-are-left-out
  ;; ifVersion null, runId null or snapshot null would each be -32602: nil means "not given".
  (let [r (c/open-run *client* {:thread-id "o1" :run-id nil :state {"x" 1} :snapshot nil :if-version nil})]
    (is (= {:thread-id "o1" :version 1 :delta [] :events []} r) "no :run-id in the result either"))
  (is (= {:version 1 :state {"x" 1}} (c/get-state *client* {:thread-id "o1" :path nil}))))

(deftest escape-and-parse-pointer
  (testing "escapePointer: / and ~ escaped, integers in decimal, [] the root"
    (is (= {:pointer "/a~1b/~0x/0/"} (c/escape-pointer *client* ["a/b" "~x" 0 ""])))
    (is (= {:pointer "/key with spaces"} (c/escape-pointer *client* {:path ["key with spaces"]})))
    (is (= {:pointer ""} (c/escape-pointer *client* []))))
  (testing "parsePointer: raw string segments, no index conversion"
    (is (= {:path ["a/b" "~x" "0" ""]} (c/parse-pointer *client* "/a~1b/~0x/0/")))
    (is (= {:path []} (c/parse-pointer *client* {:pointer ""}))))
  (testing "a round trip, and the test applier's parser agrees with the sidecar's"
    (doseq [segs [["raster-ops/dataset"] ["a~b" "~1" "/~0"] ["" ""] ["meta/data" "a~b" "c/d"]]]
      (let [{:keys [pointer]} (c/escape-pointer *client* segs)]
        (is (= {:path segs} (c/parse-pointer *client* pointer)) (pr-str segs))
        (is (= segs (s/parse-ptr pointer)) pointer))))
  (testing "errors"
    (let [d (thrown "negative segment" :invalid-params #(c/escape-pointer *client* [-1]))]
      (is (= ["/path/0" "INVALID_VALUE"] [(get-in d [:data "field"]) (get-in d [:data "reason"])])))
    (let [d (thrown "not a pointer" :invalid-params #(c/parse-pointer *client* "nope"))]
      (is (= ["/pointer" "INVALID_POINTER"] [(get-in d [:data "field"]) (get-in d [:data "reason"])])))))

(defn- kebab [^String s] (keyword (.toLowerCase (.replaceAll s "([a-z0-9])([A-Z])" "$1-$2"))))

(deftest stats-counts-threads-requests-and-evictions
  ;; Its own sidecar, so that every count is known: one thread at most.
  (with-open [cl (s/start-client {:args ["--max-threads" "1"]})]
    (let [fresh (c/stats cl)]
      (is (= [0 0 1 0 0] ((juxt :threads :state-bytes :requests :evicted :activities) fresh)))
      (is (= 1 (get-in fresh [:limits "maxThreads"])) "limits keep the protocol's names")
      (is (= 10000 (get-in fresh [:limits "maxOps"])))
      (is (and (integer? (:uptime-ms fresh)) (<= 0 (:uptime-ms fresh))))
      (when-let [pkg (s/repo-file "package.json")]
        (is (= (get (json/read-str (slurp pkg)) "version") (:version fresh)) "the program's version"))
      (is (= #{:threads :state-bytes :requests :uptime-ms :limits :version :evicted :activities} (set (keys fresh))))
      (when-let [doc (protocol-doc)]
        (is (= (set (map kebab (keys (get-in doc ["components" "schemas" "StatsResult" "properties"]))))
               (set (keys fresh)))
            "exactly StatsResult's members, as keywords")))
    (c/open-run cl {:thread-id "a" :state {"k" "v"}})
    (c/open-run cl {:thread-id "b" :state {"k" "v"}})
    (let [after (c/stats cl)]
      (is (= [1 4 1] ((juxt :threads :requests :evicted) after)) "opening b evicted a")
      (is (pos? (:state-bytes after))))
    (is (= "evicted" (get-in (thrown "evicted thread" :unknown-thread #(c/get-state cl "a")) [:data "reason"])))))

(deftest discover-returns-the-protocol
  (let [d (c/discover *client*)]
    (is (string? (:openrpc d)))
    (is (= "rpc.discover" (some #{"rpc.discover"} (map #(get % "name") (:methods d)))))
    (when-let [doc (protocol-doc)]
      (is (= (mapv #(get % "name") (get doc "methods")) (mapv #(get % "name") (:methods d)))
          "the methods of protocol/openrpc.json, in order"))))
