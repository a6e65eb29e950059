(ns agui-state.ring-resume-agent
  "The agent of issue 34's middleware tests, as a Ring app in Jetty
  (test/middleware/clojure-resume.test.ts starts it and drives it with the real
  ResumableHttpAgent through a relay that cuts the connection). Its run is
  test/resume/paced-agent.ts's: state deltas the repair must mend, and a text
  message, with characters outside the BMP. It writes the first 4 events, then
  waits for POST /gate/open before the rest, so that a test can cut the client's
  connection while the run is live.

    RING_AGENT_STORE=redis://127.0.0.1:6379/0 RING_AGENT_LOG_BYTES=1K \\
    clojure -cp data.json.jar:ring-core.jar:ring-jetty-adapter.jar:src:test \\
      -m agui-state.ring-resume-agent

  prints `listening http://127.0.0.1:PORT` and serves:
    POST /agent        the paced agent through wrap-agui-state (resume on; :store from
                       RING_AGENT_STORE when set, else the sidecar's default, memory;
                       RING_AGENT_LOG_BYTES: its --log-bytes;
                       RING_AGENT_ASYNC=1: an async handler, in Jetty's async mode;
                       RING_AGENT_DETACH_GRACE: its --detach-grace;
                       RING_AGENT_SIDECAR, RING_AGENT_SIDECAR_START=1: the
                       component's :sidecar and :sidecar-start, the host's
                       shared sidecar)
    POST /agent-late   the same, but it waits before its first event (its head sent):
                       the opening id block (§16) goes out alone
    POST /agent-now    the same agent without the pause: the uninterrupted run
    POST /agent-raise  the same agent, but it throws after its first 3 events (an app
                       that raised mid-run)
    POST /agent-quiet  the same agent, but after the gate opens it writes all but its
                       RUN_FINISHED and falls silent (until a hang guard): a run whose
                       client left is detached by those writes, then silent
    POST /gate/open    lets every run that waits, and every later one, write the rest
    POST /gate/close   makes later runs wait again
    GET  /paused?n=N   waits until N runs of /agent wrote their first events (default 1)
    GET  /calls        how many times the handler of /agent ran
    GET  /requests?path=P  how many requests for path P reached the server (the
                       middleware's included: a rejoin it answers counts)"
  (:require [agui-state.ring :as agui-ring]
            [clojure.data.json :as json]
            [ring.adapter.jetty :as jetty]
            [ring.core.protocols :as protocols])
  (:import (java.io OutputStream)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent Semaphore TimeUnit)
           (java.util.concurrent.atomic AtomicLong)
           (org.eclipse.jetty.server Server ServerConnector)))

(defn run-events
  "test/resume/paced-agent.ts's runEvents, event for event."
  [thread-id run-id]
  (let [m (str "m-" run-id)]
    [{"type" "RUN_STARTED" "threadId" thread-id "runId" run-id}
     {"type" "STATE_DELTA" "delta" [{"op" "replace" "path" "/toolState" "value" {}}]}
     {"type" "STATE_DELTA" "delta" [{"op" "add" "path" "/toolState/raster-ops/dataset" "value" "era5"}]}
     {"type" "TEXT_MESSAGE_START" "messageId" m "role" "assistant"}
     {"type" "TEXT_MESSAGE_CONTENT" "messageId" m "delta" "Fetching… 🛰"}
     {"type" "STATE_DELTA" "delta" [{"op" "add" "path" "/todos/-" "value" "milk ☕"}]}
     {"type" "TEXT_MESSAGE_CONTENT" "messageId" m "delta" " done."}
     {"type" "TEXT_MESSAGE_END" "messageId" m}
     {"type" "STATE_DELTA" "delta" [{"op" "replace" "path" "/toolState/count" "value" 2}]}
     {"type" "STATE_DELTA" "delta" [{"op" "add" "path" "/todos/-" "value" "bread"}]}
     {"type" "RUN_FINISHED" "threadId" thread-id "runId" run-id}]))

(def ^:private pause 4)
(def ^:private hang-guard-ms 120000)

(defonce ^:private gate (atom (promise)))
(defonce ^:private ^Semaphore paused (Semaphore. 0))
(defonce ^:private ^AtomicLong calls (AtomicLong.))
(defonce ^:private requests (atom {}))   ; path -> requests that reached the server

(defn- write-event [^OutputStream out event]
  (.write out (.getBytes (str "data: " (json/write-str event :escape-unicode false :escape-slash false) "\n\n")
                         StandardCharsets/UTF_8))
  (.flush out))

(defn agent-handler
  "The agent; with `wait?`, it stops after its first `at` events until the gate opens."
  [request wait? at]
  (let [input (json/read-str (slurp (:body request) :encoding "UTF-8"))
        events (run-events (get input "threadId") (get input "runId"))
        open @gate]
    (when wait? (.incrementAndGet calls))
    {:status 200
     :headers {"Content-Type" "text/event-stream" "Cache-Control" "no-cache"}
     :body (reify protocols/StreamableResponseBody
             (write-body-to-stream [_ _ out]
               (with-open [^OutputStream out out]
                 (doseq [[i e] (map-indexed vector events)]
                   (when (and wait? (= i at))
                     (.release paused)
                     (deref open hang-guard-ms nil))
                   (write-event out e)))))}))

(defn quiet-handler
  "The agent's first `pause` events; once the gate opens, the rest but its
  RUN_FINISHED, then nothing until the hang guard."
  [request]
  (let [input (json/read-str (slurp (:body request) :encoding "UTF-8"))
        events (run-events (get input "threadId") (get input "runId"))
        open @gate]
    {:status 200
     :headers {"Content-Type" "text/event-stream" "Cache-Control" "no-cache"}
     :body (reify protocols/StreamableResponseBody
             (write-body-to-stream [_ _ out]
               (with-open [^OutputStream out out]
                 (doseq [e (take pause events)] (write-event out e))
                 (deref open hang-guard-ms nil)
                 (doseq [e (butlast (drop pause events))] (write-event out e))
                 (Thread/sleep hang-guard-ms)
                 (write-event out (last events)))))}))

(defn raising-handler
  "The agent's first 3 events, then a throw: the app failed mid-run. The
  adapter breaks the response off (§16: the run ends cancelled)."
  [request]
  (let [input (json/read-str (slurp (:body request) :encoding "UTF-8"))
        events (take 3 (run-events (get input "threadId") (get input "runId")))]
    {:status 200
     :headers {"Content-Type" "text/event-stream" "Cache-Control" "no-cache"}
     :body (reify protocols/StreamableResponseBody
             (write-body-to-stream [_ _ out]
               (doseq [e events] (write-event out e))
               (throw (IllegalStateException. "the agent failed mid-run"))))}))

(defn- text [status body] {:status status :headers {"Content-Type" "text/plain"} :body (str body)})

(defn router [request]
  (case [(:request-method request) (:uri request)]
    [:post "/agent"] (agent-handler request true pause)
    [:post "/agent-late"] (agent-handler request true 0)
    [:post "/agent-now"] (agent-handler request false pause)
    [:post "/agent-raise"] (raising-handler request)
    [:post "/agent-quiet"] (quiet-handler request)
    [:post "/gate/open"] (do (deliver @gate true) (text 200 "open"))
    [:post "/gate/close"] (do (when (realized? @gate) (reset! gate (promise))) (text 200 "closed"))
    [:get "/paused"] (let [n (or (some->> (:query-string request) (re-find #"n=(\d+)") second Long/parseLong) 1)]
                       (if (.tryAcquire paused (int n) hang-guard-ms TimeUnit/MILLISECONDS)
                         (text 200 "paused")
                         (text 504 "no run reached its pause")))
    [:get "/calls"] (text 200 (.get calls))
    [:get "/requests"] (text 200 (get @requests (some->> (:query-string request) (re-find #"path=([^&]*)") second) 0))
    (text 404 "not found")))

(defn- stamped
  "A line on stderr with the time, in ms, for a test's log."
  [^String line]
  (.println System/err (str (System/currentTimeMillis) " " line)))

(defn- async-router
  "The router as an async Ring handler: it answers from another thread, as an
  async app does."
  ([request] (router request))
  ([request respond raise]
   (future (try (respond (router request)) (catch Throwable t (raise t))))))

(def ^:private async? (= "1" (System/getenv "RING_AGENT_ASYNC")))

(defn- counted
  "The handler, each request counted by its path before anything answers it."
  [handler]
  (fn ([request] (swap! requests update (:uri request) (fnil inc 0)) (handler request))
      ([request respond raise] (swap! requests update (:uri request) (fnil inc 0)) (handler request respond raise))))

(defn app []
  (counted
   (agui-ring/wrap-agui-state (if async? async-router router)
                              {:paths ["/agent" "/agent-late" "/agent-now" "/agent-raise" "/agent-quiet"] :log stamped :warn stamped
                               ;; A sidecar of the app's own: a component, with the flags the test gives.
                               :sidecar (agui-ring/sidecar
                                         (cond-> {}
                                           (System/getenv "RING_AGENT_DETACH_GRACE")
                                           (assoc :detach-grace (System/getenv "RING_AGENT_DETACH_GRACE"))
                                           (System/getenv "RING_AGENT_STORE")
                                           (assoc :store (System/getenv "RING_AGENT_STORE"))
                                           (System/getenv "RING_AGENT_LOG_BYTES")
                                           (assoc :args ["--log-bytes" (System/getenv "RING_AGENT_LOG_BYTES")])
                                           ;; The host's shared sidecar by the options rather than
                                           ;; AGUI_STATE_SIDECAR, which a test may set instead.
                                           (System/getenv "RING_AGENT_SIDECAR")
                                           (assoc :sidecar (System/getenv "RING_AGENT_SIDECAR"))
                                           (System/getenv "RING_AGENT_SIDECAR_START")
                                           (assoc :sidecar-start (= "1" (System/getenv "RING_AGENT_SIDECAR_START")))))})))

(defn -main [& _]
  (let [^Server server (jetty/run-jetty (app) {:host "127.0.0.1" :port 0 :join? false :async? async?})
        port (.getLocalPort ^ServerConnector (first (.getConnectors server)))]
    (println (str "listening http://127.0.0.1:" port))
    (flush)
    (.join server)))
