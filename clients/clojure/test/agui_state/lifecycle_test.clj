(ns agui-state.lifecycle-test
  "The middleware's lifecycle (issue 39 §5): the sidecar is a component
  (agui-state.ring/sidecar, stopped by agui-state.ring/stop), started and
  stopped twice under a system's hand, and wrap-agui-state is a pure wrap-: it
  starts no process and changes no global state, neither a var's root, nor an
  atom or volatile a namespace of the client holds, nor a System property.
  :store or :detach-grace beside a given sidecar is CONFLICTING_OPTIONS, and a
  :lifecycle other than \"repair\" or \"pass\" is INVALID_OPTION (issue 40)."
  (:require [agui-state.client :as c]
            [agui-state.ring :as r]
            [agui-state.ring-agent :as agent]
            [agui-state.test-support :as s]
            [clojure.data.json :as json]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [ring.core.protocols :as protocols])
  (:import (java.io ByteArrayInputStream ByteArrayOutputStream)
           (java.nio.charset StandardCharsets)))

(defn- children
  "The pids of this JVM's child processes that are alive."
  []
  (set (keep (fn [^java.lang.ProcessHandle h] (when (.isAlive h) (.pid h)))
             (iterator-seq (.iterator (.children (java.lang.ProcessHandle/current)))))))

(defn- globals
  "Every var of the client's namespaces (agui-state.client, agui-state.ring and
  below): its root, and what it holds when it is an atom or a volatile; and the
  System properties."
  []
  {:vars (into {} (for [n (all-ns)
                        :let [nm (str (ns-name n))]
                        :when (or (= nm "agui-state.client") (= nm "agui-state.ring")
                                  (str/starts-with? nm "agui-state.ring."))
                        [sym v] (ns-interns n)
                        :let [root (when (.hasRoot ^clojure.lang.Var v) (.getRawRoot ^clojure.lang.Var v))]]
                    [(symbol nm (name sym))
                     [(System/identityHashCode root)
                      (when (or (instance? clojure.lang.IAtom root) (instance? clojure.lang.Volatile root))
                        @root)]]))
   :properties (into {} (System/getProperties))})

(defn- opts [] {:path (s/bin) :env {"AGUI_STATE_LOG_LEVEL" "warn"}})

(defn- input ^bytes [run-id]
  (.getBytes (json/write-str {"threadId" "t1" "runId" run-id "state" {} "messages" []}) StandardCharsets/UTF_8))

(defn- answer
  "The body `app` answers a POST to /agent, as the adapter would write it."
  [app run-id]
  (let [response (app {:request-method :post :uri "/agent" :headers {"content-type" "application/json"}
                       :body (ByteArrayInputStream. (input run-id))})
        out (ByteArrayOutputStream.)]
    (protocols/write-body-to-stream (:body response) response out)
    (.toString out "UTF-8")))

(deftest the-sidecar-is-a-component-started-and-stopped-twice-and-nothing-global-changes
  (let [before (globals)
        kids (children)]
    (testing "wrap-agui-state starts nothing"
      (r/wrap-agui-state agent/router {:own ["/toolState"]})
      (is (empty? (remove kids (children))) "no process")
      (is (= before (globals)) "no global state"))
    (dotimes [round 2]
      (testing (str "round " (inc round) ": started, used, stopped")
        (let [sc (r/sidecar (opts))
              p (c/process (:client sc))
              app (r/wrap-agui-state agent/router {:sidecar sc :own ["/toolState"]})]
          (is (.isAlive p))
          (is (= [(.pid p)] (remove kids (children))) "its process, a child of this JVM")
          (is (str/includes? (answer app (str "r" round)) "\"op\":\"add\",\"path\":\"/toolState\"")
              "a stream repaired through it")
          (is (nil? (r/stop sc)))
          (is (not (.isAlive p)) "stop ended it")
          (is (empty? (remove kids (children))) "no process left")
          (is (nil? (r/stop sc)) "stopping it again is nothing"))))
    (is (= before (globals)) "no var, atom, volatile or System property changed")))

(deftest a-middleware-given-no-sidecar-starts-its-own-at-the-first-request
  (let [kids (children)
        app (r/wrap-agui-state agent/router {:own ["/toolState"]})]
    (is (empty? (remove kids (children))) "none before a request")
    (with-redefs [c/start (let [start c/start] (fn [o] (start (merge o (opts)))))]
      (is (str/includes? (answer app "l1") "\"op\":\"add\",\"path\":\"/toolState\"")))
    (let [started (remove kids (children))]
      (is (= 1 (count started)) "one, its own")
      (is (str/includes? (answer app "l2") "\"op\":\"add\",\"path\":\"/toolState\""))
      (is (= (set started) (set (remove kids (children)))) "the next request uses the same one")
      ;; Ended here so that the run leaves no process: otherwise it ends with the JVM.
      (doseq [pid started] (some-> (java.lang.ProcessHandle/of pid) (.orElse nil) .destroy)))))

(deftest store-options-beside-a-sidecar-conflict
  (with-open [sc (r/sidecar (opts))]
    (doseq [[label o] [[":sidecar and :store" {:sidecar sc :store "memory"}]
                       [":sidecar and :detach-grace" {:sidecar sc :detach-grace 3}]
                       [":client and :store" {:client (:client sc) :store "none"}]]]
      (let [e (try (r/wrap-agui-state agent/router o) nil (catch clojure.lang.ExceptionInfo e e))]
        (is (= "CONFLICTING_OPTIONS" (:code (ex-data e))) label)
        (is (re-find #"sidecar" (str (ex-message e))) label)))
    (is (fn? (r/wrap-agui-state agent/router {:store "memory" :detach-grace 3}))
        "without a sidecar they are the flags of the one it starts")))

(deftest lifecycle-is-repair-or-pass-and-anything-else-is-invalid-option
  ;; Issue 40: said when the app is made, before any request, and without a sidecar.
  (doseq [v [:pass "Repair" "" true 1]]
    (let [e (try (r/wrap-agui-state agent/router {:lifecycle v}) nil (catch clojure.lang.ExceptionInfo e e))]
      (is (= "INVALID_OPTION" (:code (ex-data e))) (pr-str v))
      (is (= :lifecycle (:option (ex-data e))) (pr-str v))
      (is (re-find #":lifecycle is \"repair\" or \"pass\"" (str (ex-message e))) (pr-str v))))
  (doseq [v ["repair" "pass" nil]]
    (is (fn? (r/wrap-agui-state agent/router {:lifecycle v})) (pr-str v))))
