(ns agui-state.api-test
  "The params rules (nil as JSON null for :value, nil as \"not given\" elsewhere, a
  collection where the protocol has an array) and the wrappers beyond the run:
  escapePointer, parsePointer, stats, rpc.discover."
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
      (is (= #{:threads :state-bytes :requests :uptime-ms :limits :version :evicted :activities
               :streams :streams-evicted :runs :run-bytes :runs-evicted :reads}
             (set (keys fresh))))
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

;;; Issue 22 §5: a param the protocol documents as an array refuses a string, a map
;;; or a scalar in the client, naming the function and the param, before anything
;;; is sent.

(def ^:private sequence-params
  "Each wrapper's params that the protocol documents as arrays: [function, protocol
  method, param key, a pointer string allowed too?, the other params of a call]."
  [[c/diff-tool-state "diffToolState" :remove false {:thread-id "t"}]
   [c/apply-ops "applyOps" :ops false {:thread-id "t"}]
   [c/normalize "normalize" :ops false {}]
   [c/diff-state "diffState" :path true {:thread-id "t" :value 1}]
   [c/get-state "getState" :path true {:thread-id "t"}]
   [c/apply-activity-ops "applyActivityOps" :ops false {:thread-id "t" :message-id "m"}]
   [c/escape-pointer "escapePointer" :path false {}]
   [c/open-stream "openStream" :own false {}]
   [c/classify-request "classifyRequest" :headers false {:method "POST" :path "/agent"}]
   [c/classify-request "classifyRequest" :paths false {:method "POST" :path "/agent" :headers []}]])

(defn- array-params
  "[method param] for every param of protocol/openrpc.json whose schema admits an array."
  [doc]
  (let [schemas (get-in doc ["components" "schemas"])
        types (fn types [s]
                (cond (get s "$ref") (types (get schemas (last (.split ^String (get s "$ref") "/"))))
                      (get s "anyOf") (into #{} (mapcat types) (get s "anyOf"))
                      :else #{(get s "type")}))]
    (set (for [m (get doc "methods") p (get m "params") :when ((types (get p "schema")) "array")]
           [(get m "name") (get p "name")]))))

(defn- fn-name
  "The name of the client's public function f."
  [f]
  (some (fn [[sym v]] (when (= @v f) (str sym))) (ns-publics 'agui-state.client)))

(deftest sequence-params-refuse-strings-maps-and-scalars
  (when-let [doc (protocol-doc)]
    (is (= (array-params doc) (set (for [[_ method k] sequence-params] [method (#'c/camel k)])))
        "the table above is every array param of the protocol"))
  (let [before (:requests (c/stats *client*))]
    (doseq [[f method k pointer others] sequence-params
            [wrong described] [["plain" "a string"] [{"op" "add" "path" "/x" "value" 1} "a map"]
                               [7 "java.lang.Long"] [:kw "clojure.lang.Keyword"]]
            :when (not (and pointer (string? wrong)))
            as-key [k (#'c/camel k)]]         ; a kebab keyword, and the protocol's string key
      (let [label (str method " " (pr-str as-key) " " (pr-str wrong))
            d (thrown label :invalid-argument #(f *client* (assoc others as-key wrong)))
            msg ^String (::s/msg d)]
        (is (= [(fn-name f) as-key (class wrong)] [(:function d) (:param d) (:value-class d)]) label)
        (is (.startsWith msg (str "agui-state " (fn-name f) ": " (pr-str as-key) " must be ")) label)
        (is (.endsWith msg (str ", not " described)) label)))
    (is (= (inc before) (:requests (c/stats *client*))) "the refused calls sent nothing")))

(deftest the-issue-cases-change-nothing-and-collections-work
  ;; A string where a collection is meant, and one op where the ops are meant: refused, and
  ;; the thread is as it was; a vector, a set, a list or a lazy seq does what was meant.
  (let [tool-map {"p" 1 "a" 2 "plain" 3}]
    (view! "ic" {})
    (step! "open" "ic" (c/open-run *client* {:thread-id "ic" :state {} :tool-state tool-map})
           [(op "add" "/toolState" tool-map)] 1)
    (thrown "remove a string" :invalid-argument #(c/diff-tool-state *client* {:thread-id "ic" :remove "plain"}))
    (thrown "one op as ops" :invalid-argument
            #(c/apply-ops *client* {:thread-id "ic" :ops {:op "add" :path "/x" :value 1}}))
    (thrown "a pointer for escape-pointer" :invalid-argument #(c/escape-pointer *client* "a/b"))
    (thrown "a map as a path" :invalid-argument #(c/get-state *client* {:thread-id "ic" :path {"toolState" "p"}}))
    (witness! *client* "the refused calls changed nothing" "ic" {"toolState" tool-map})
    (step! "remove a set" "ic" (c/diff-tool-state *client* {:thread-id "ic" :remove #{"plain"}})
           [(op "remove" "/toolState/plain")] 2)
    (step! "ops as a lazy seq" "ic" (c/apply-ops *client* {:thread-id "ic" :ops (map identity [{:op "add" :path "/x" :value 1}])})
           [(op "add" "/x" 1)] 3)
    (witness! *client* "after the collections" "ic" {"toolState" {"p" 1 "a" 2} "x" 1})
    (is (= 1 (:state (c/get-state *client* {:thread-id "ic" :path (list "toolState" "p")})))
        (:state (c/get-state *client* {:thread-id "ic" :path "/toolState/p"})))
    (is (= {:pointer "/a~1b/0"} (c/escape-pointer *client* (list "a/b" 0))))))
