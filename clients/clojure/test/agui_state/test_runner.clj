(ns agui-state.test-runner
  "Runs the client's clojure.test namespaces against the real binary and exits
  non-zero on any failure or error, for scripts and CI:

    clojure -cp /usr/share/java/data.json.jar:/usr/share/java/ring-core.jar:/usr/share/java/ring-jetty-adapter.jar:clients/clojure/src:clients/clojure/test \\
      -m agui-state.test-runner [BINARY]

  The binary is the argument, else AGUI_STATE_BIN, else the repository's
  dist/agui-state (agui-state.test-support/bin)."
  (:require [clojure.test :as t]))

(def test-namespaces
  '[agui-state.scenarios-test agui-state.process-test agui-state.api-test agui-state.activity-test
    agui-state.project-test agui-state.numbers-test agui-state.ring-test
    agui-state.resume-test agui-state.resume-edge-test agui-state.lifecycle-test
    agui-state.stream-edge-test agui-state.upload-test agui-state.broken-body-test
    agui-state.shared-test agui-state.shared-start-test agui-state.shared-probe-test])

(defn -main [& [binary]]
  ;; A system property rather than an atom: test-support reads it whether the
  ;; tests run from here or from a REPL that set it.
  (when binary (System/setProperty "agui-state.bin" binary))
  (let [{:keys [test fail error] :or {test 0 fail 0 error 0}}
        (try (apply require test-namespaces)
             (apply t/run-tests test-namespaces)
             (catch Throwable e
               ;; A namespace that does not load counts as an error, not as zero tests.
               (println "ERROR loading the test namespaces:" (pr-str e))
               {:error 1}))]
    ;; Futures keep agent threads alive for a minute: end them, then exit with the verdict.
    (shutdown-agents)
    (System/exit (if (and (pos? test) (zero? fail) (zero? error)) 0 1))))
