(ns agui-state.process-test
  "The sidecar as a process: killed mid-call, then restart and resync; restart's
  use of :close-timeout-ms; close; the binary from AGUI_STATE_BIN. Each deftest
  starts its own sidecar, since it stops, kills or closes it."
  (:require [agui-state.client :as c]
            [agui-state.test-support :as s :refer [*view* op step! thrown view! witness!]]
            [clojure.test :refer [deftest is testing use-fixtures]]))

(use-fixtures :each s/with-view)

(defn- signal! [sig ^Process p]
  (.waitFor (.start (ProcessBuilder. ^java.util.List ["kill" sig (str (.pid p))]))))

(defn- elapsed-ms [t0] (quot (- (System/nanoTime) t0) 1000000))

(deftest killed-sidecar-then-restart-and-resync
  (with-open [cl (s/start-client)]
    (let [own {"selectedLayer" "merra2", "ui" {"panel" "open"}}
          stored {"raster-ops/dataset" "cerra", "a~b" 1, "new/key~" []}]
      (view! "t1" own)
      (step! "openRun" "t1" (c/open-run cl {:thread-id "t1" :state own :tool-state stored})
             [(op "add" "/toolState" stored)] 1)
      (witness! cl "before the crash" "t1" (assoc own "toolState" stored))

      (testing "a call pending when the sidecar is killed fails with its exit status"
        (let [p (c/process cl)]
          ;; Freeze the sidecar so that a call is certainly pending, then kill it.
          (signal! "-STOP" p)
          (let [pending (future (try (c/get-state cl "t1") :answered
                                     (catch clojure.lang.ExceptionInfo e (ex-data e))))]
            (Thread/sleep 300)
            (is (not (realized? pending)) "a call is pending while the sidecar is stopped")
            (.destroyForcibly p)
            (.waitFor p)
            (let [d (deref pending 10000 :hung)]
              (is (= [:sidecar-exited 137] (when (map? d) [(:kind d) (:exit-status d)])))))))

      (testing "every later call fails the same way, naming the status"
        (let [d (thrown "call after the crash" :sidecar-exited
                        #(c/diff-tool-state cl {:thread-id "t1" :set {"k" 1}}))]
          (is (re-find #"exit status 137" (str (::s/msg d))))))

      (testing "restart: a fresh process, which knows no thread"
        (let [old (c/process cl)]
          (c/restart cl)
          (is (.isAlive (c/process cl)))
          (is (not= (.pid old) (.pid (c/process cl)))))
        (is (= "never opened"
               (get-in (thrown "after restart" :unknown-thread #(c/get-state cl "t1")) [:data "reason"]))))

      (testing "resync: openRun with the client's state and the stored map, then carry on"
        (let [sent (get @*view* "t1")]
          (step! "resync openRun" "t1" (c/open-run cl {:thread-id "t1" :run-id "r3" :state sent :tool-state stored})
                 [(op "add" "/toolState" stored)] 1)
          (witness! cl "resync openRun" "t1" sent))
        (step! "after resync: set" "t1"
               (c/diff-tool-state cl {:thread-id "t1" :set {"raster-ops/bounds" [0 0 10 10]}})
               [(op "add" "/toolState/raster-ops~1bounds" [0 0 10 10])] 2)
        (step! "after resync: set and remove" "t1"
               (c/diff-tool-state cl {:thread-id "t1" :remove ["a~b"] :set {"raster-ops/dataset" "era5"}})
               [(op "remove" "/toolState/a~0b") (op "add" "/toolState/raster-ops~1dataset" "era5")] 3)
        (witness! cl "after resync" "t1"
                  (assoc own "toolState" {"raster-ops/dataset" "era5", "new/key~" [],
                                          "raster-ops/bounds" [0 0 10 10]}))))))

(deftest restart-waits-close-timeout-ms
  (testing "a sidecar that cannot exit: restart waits :close-timeout-ms, not a fixed 1,000 ms"
    ;; A stopped process neither reads its stdin's end nor acts on SIGTERM (it
    ;; stays pending), so only SIGKILL ends it: the client waits close-timeout-ms,
    ;; sends SIGTERM, waits 2 s more, then kills. 3,500 ms is more than a fixed
    ;; 1,000 ms plus those 2 s, so this fails if the option is ignored.
    (with-open [cl (s/start-client {:close-timeout-ms 3500})]
      (c/open-run cl {:thread-id "r" :state {}})
      (let [old (c/process cl)
            _ (signal! "-STOP" old)
            t0 (System/nanoTime)
            _ (c/restart cl)
            ms (elapsed-ms t0)]
        (is (>= ms 3500) (str "restart took " ms " ms"))
        (is (= 137 (.exitValue old)) "the stopped sidecar was killed")
        (is (= {} (:state (do (c/open-run cl {:thread-id "r" :state {}}) (c/get-state cl "r"))))
            "the fresh sidecar answers"))))
  (testing "a healthy sidecar: restart ends it by closing its stdin, however long the timeout"
    (with-open [cl (s/start-client {:close-timeout-ms 60000})]
      (let [old (c/process cl)
            t0 (System/nanoTime)
            _ (c/restart cl)
            ms (elapsed-ms t0)]
        (is (< ms 10000) (str "restart took " ms " ms"))
        (is (= 0 (.exitValue old)) "the old sidecar exited on its own, status 0")
        (is (.isAlive (c/process cl)))))))

(deftest close-and-calls-after-close
  (let [cl (with-open [cl (s/start-client)]
             (c/open-run cl {:thread-id "k" :state {:raster-ops/dataset 1}})
             (is (= {"raster-ops/dataset" 1} (:state (c/get-state cl "k")))
                 "keyword keys keep their full text")
             cl)]
    (is (= 0 (.exitValue (c/process cl))) "with-open: close ends stdin, the sidecar exits 0")
    (is (= 0 (:exit-status (thrown "call after close" :sidecar-exited #(c/get-state cl "k"))))
        "a call after close names exit status 0")))

(deftest binary-from-agui-state-bin
  ;; Without :path, start runs AGUI_STATE_BIN. npm test sets it; a run that does
  ;; not set it has nothing to check here.
  (when-let [env-bin (System/getenv "AGUI_STATE_BIN")]
    (with-open [cl (c/start {:env {"AGUI_STATE_LOG_LEVEL" "warn"} :timeout-ms 30000})]
      (is (string? (:version (c/stats cl))) (str "a sidecar answers from " env-bin)))))
