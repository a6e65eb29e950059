(ns agui-state.project-test
  "The client as a project: a wrapper for every method of the protocol, a deps.edn
  that a user's tools.deps can resolve to what the tests ran with, and the README's
  examples (a run, activities), which run as they stand."
  (:require [agui-state.client :as c]
            [agui-state.test-support :as s]
            [clojure.data.json :as json]
            [clojure.edn :as edn]
            [clojure.java.io :as io]
            [clojure.test :refer [deftest is testing]])
  (:import (java.io File)
           (java.net JarURLConnection)))

(defn- wrapper-name
  "openRun -> open-run; rpc.discover -> discover (the rpc. prefix only marks a
  method of JSON-RPC itself)."
  [^String method]
  (if (= method "rpc.discover")
    "discover"
    (.toLowerCase (.replaceAll method "([a-z0-9])([A-Z])" "$1-$2"))))

(deftest a-wrapper-for-every-method
  (let [doc (some-> (s/repo-file "protocol/openrpc.json") slurp json/read-str)
        methods (map #(get % "name") (get doc "methods"))]
    (is (seq methods) "protocol/openrpc.json lists the methods")
    (doseq [m methods
            :let [v (ns-resolve 'agui-state.client (symbol (wrapper-name m)))]]
      (is (and (var? v) (fn? @v) (not (:private (meta v))) (string? (:doc (meta v))))
          (str m ": a public, documented agui-state.client/" (wrapper-name m))))))

(defn- jar-version
  "The version in the file name of the jar `resource` was loaded from: Debian's
  /usr/share/java/data.json.jar links to data.json-2.4.0.jar, and tools.deps
  loads ~/.m2/.../data.json-2.4.0.jar."
  [resource artifact]
  (let [conn (.openConnection (io/resource resource))]
    (when (instance? JarURLConnection conn)
      (let [^File jar (.getCanonicalFile (io/file (.getJarFileURL ^JarURLConnection conn)))]
        (second (re-matches (re-pattern (str "\\Q" artifact "\\E-(.+)\\.jar")) (.getName jar)))))))

(deftest deps-edn
  (let [deps (edn/read-string (slurp (io/file s/client-dir "deps.edn")))]
    (testing ":paths hold the sources"
      (is (= ["src"] (:paths deps)))
      (doseq [p (:paths deps)]
        (is (.isFile (io/file s/client-dir p "agui_state" "client.clj")) p)))
    (testing "the versions are the ones the tests run with"
      (is (= (jar-version "clojure/data/json.clj" "data.json")
             (get-in deps [:deps 'org.clojure/data.json :mvn/version]))
          "data.json: the jar on this classpath")
      (is (= (clojure-version) (get-in deps [:deps 'org.clojure/clojure :mvn/version])))
      (doseq [[lib resource artifact] [['ring/ring-core "ring/core/protocols.clj" "ring-core"]
                                       ['ring/ring-jetty-adapter "ring/adapter/jetty.clj" "ring-jetty-adapter"]]]
        (is (= (jar-version resource artifact)
               (get-in deps [:aliases :test :extra-deps lib :mvn/version]))
            (str lib ": the jar on this classpath"))))
    (testing "the :test alias runs this runner"
      (let [{:keys [extra-paths main-opts]} (get-in deps [:aliases :test])]
        (is (= ["test"] extra-paths))
        (is (= ["-m" "agui-state.test-runner"] main-opts))
        (is (.isFile (io/file s/client-dir "test" "agui_state" "test_runner.clj")))))))

(defn- clojure-blocks [md] (map second (re-seq #"(?s)```clojure\n(.*?)```" md)))

(defn- load-in-fresh-ns
  "Evaluates `code` as a user's file would be, in a namespace of its own."
  [code]
  (let [ns (create-ns (gensym "readme-example-"))]
    (binding [*ns* ns]
      (refer-clojure)
      (load-string code))
    ns))

(defn- run-readme-section
  "Runs the first clojure block of the README's section `heading` as it stands, in
  a namespace of its own, and returns {:printed (what the second block says it
  prints) :out (what it printed) :ns}, both read as EDN vectors."
  [heading]
  (let [md (slurp (io/file s/client-dir "README.md"))
        section (second (re-find (re-pattern (str "(?s)\\n## \\Q" heading "\\E\\n(.*?)\\n## ")) md))
        [code printed] (clojure-blocks section)
        start c/start
        ;; The example starts the sidecar the way a deployment does, from
        ;; AGUI_STATE_BIN or PATH; the test hands it this run's binary instead.
        [out ns] (with-redefs [c/start (fn [& _] (start {:path (s/bin) :timeout-ms 30000
                                                         :env {"AGUI_STATE_LOG_LEVEL" "warn"}}))]
                   (let [ns (atom nil)
                         out (with-out-str (reset! ns (load-in-fresh-ns code)))]
                     [out @ns]))]
    (is (string? code) (str heading ": the section has its example"))
    {:printed (edn/read-string (str "[" printed "]")) :out (edn/read-string (str "[" out "]")) :ns ns}))

(deftest the-readme-example-runs
  (let [{events :out printed :printed ns :ns} (run-readme-section "A run")
        client-state {"selectedLayer" "era5"}
        state-events (filter #(#{"STATE_DELTA" "STATE_SNAPSHOT"} (get % "type")) events)
        replayed (s/replay client-state state-events)]
    (is (= printed events) "it prints what the README says it prints")
    (is (= ["RUN_STARTED" "STATE_DELTA" "STATE_DELTA" "RUN_FINISHED"] (mapv #(get % "type") events)))
    (is (= {"selectedLayer" "era5"
            "toolState" {"raster-ops/dataset" "era5" "raster-ops/bounds" [0 0 10 10]}}
           replayed)
        "the events replay strictly onto the client's state")
    (is (= (get replayed "toolState") (get @@(ns-resolve ns 'tool-store) "t1"))
        "the client now holds the server's stored tool map")))

(deftest the-readme-activity-example-runs
  (let [{:keys [out printed]} (run-readme-section "Activities")
        events (pop out)
        {:keys [activity-type content]} (peek out)
        replayed (s/replay-activities {} events)]
    (is (= printed out) "it prints what the README says it prints")
    (is (= ["ACTIVITY_SNAPSHOT" "ACTIVITY_DELTA" "ACTIVITY_DELTA"] (mapv #(get % "type") events)))
    (is (= {"plan-1" {"activityType" "plan-done"
                      "content" {"steps" [{"title" "search" "done" true}] "notes" ["3 found"]}}}
           replayed)
        "the events replay strictly onto the client's activities")
    (is (= {"plan-1" {"activityType" activity-type "content" content}} replayed)
        "the replay equals the getActivity it printed last")))
