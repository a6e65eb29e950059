(ns agui-state.ring-agent
  "The agent of issue 24's tests, as a Ring app, and a Jetty server for it
  (test/middleware/clojure.test.ts starts one JVM of it and drives it with the
  real HttpAgent). The agent makes three mistakes upstream servers have shipped:
  an `add /todos/-` before /todos exists, an unescaped key
  (/toolState/raster-ops/dataset for the key \"raster-ops/dataset\"), and a
  STATE_SNAPSHOT after every write, which wipes the client's own keys. It writes
  event by event with a flush after each, and one character (U+2615, three bytes
  in UTF-8) is cut in two by a flush. Its output depends only on the request's
  threadId and runId, so /raw answers the same request with the bytes the
  middleware received.

    clojure -cp data.json.jar:ring-core.jar:ring-jetty-adapter.jar:src:test \\
      -m agui-state.ring-agent

  prints `listening http://127.0.0.1:PORT` and serves:
    POST /agent        the agent through wrap-agui-state {:own [\"/toolState\"] :join-keys true}
    POST /agent-gated  the same, but it stops after its first snapshot until POST /gate/open
    POST /raw          the agent without the middleware (left out by :paths)
    POST /agent-paced  through the middleware: paced-events, one every 20 ms
    GET  /gate/reached?n=N  waits until N /agent-gated streams stopped (default 1), then
                       answers the sidecar's pid
    POST /gate/open    lets every stopped stream go on
    GET  /sidecar-pid  the pid of the middleware's sidecar, 0 if none runs (it starts none)
  The sidecar is found as a deployment finds it: AGUI_STATE_BIN, else PATH. It
  is a component (agui-state.ring/sidecar) started in -main, before the server
  listens, so that it runs before the first request."
  (:require [agui-state.client :as client]
            [agui-state.ring :as agui-ring]
            [clojure.data.json :as json]
            [ring.adapter.jetty :as jetty]
            [ring.core.protocols :as protocols])
  (:import (java.io OutputStream)
           (java.util.concurrent Semaphore TimeUnit)
           (java.nio.charset StandardCharsets)
           (org.eclipse.jetty.server Server ServerConnector)))

(defn events
  "The agent's events for one run, as JSON text."
  [thread-id run-id]
  (let [search {"query" "café ☕", "run" run-id}]
    (mapv #(json/write-str % :escape-unicode false :escape-slash false)
          [{"type" "RUN_STARTED" "threadId" thread-id "runId" run-id}
           {"type" "STATE_DELTA" "delta" [{"op" "add" "path" "/todos/-" "value" "milk"}]}
           {"type" "STATE_SNAPSHOT" "snapshot" {"toolState" {"search" search}}}
           {"type" "STATE_DELTA" "delta" [{"op" "add" "path" "/toolState/raster-ops/dataset" "value" "era5"}]}
           {"type" "STATE_SNAPSHOT" "snapshot" {"toolState" {"search" search "raster-ops/dataset" "era5"}}}
           {"type" "RUN_FINISHED" "threadId" thread-id "runId" run-id}])))

(defn sse-bytes
  "One event framed as SSE, in UTF-8."
  ^bytes [^String event]
  (.getBytes (str "data: " event "\n\n") StandardCharsets/UTF_8))

(defn- write-event
  "Writes one event and flushes; an event holding U+2615 is flushed in the
  middle of it too, as a server that writes in fixed-size buffers would."
  [^OutputStream out ^String event]
  (let [bs (sse-bytes event)
        cut (let [i (.indexOf event "☕")]
              (when (>= i 0) (+ (count (.getBytes (str "data: " (subs event 0 i)) StandardCharsets/UTF_8)) 1)))]
    (if cut
      (do (.write out bs 0 (int cut)) (.flush out)
          (.write out bs (int cut) (- (alength bs) (int cut))))
      (.write out bs))
    (.flush out)))

(defonce ^:private gate
  ;; Each stopped stream releases one permit of `parked`; all wait on `open`.
  (atom {:parked (Semaphore. 0) :open (promise)}))

(def ^:private hang-guard-ms 120000)

(defn agent-handler
  "The agent. `stop-after` (an event index) makes it wait there for /gate/open."
  ([request] (agent-handler request nil))
  ([request stop-after]
   (let [input (json/read-str (slurp (:body request) :encoding "UTF-8"))
         evs (events (get input "threadId") (get input "runId"))
         {:keys [^Semaphore parked open]} @gate]
     {:status 200
      :headers {"Content-Type" "text/event-stream" "Cache-Control" "no-cache"}
      :body (reify protocols/StreamableResponseBody
              (write-body-to-stream [_ _ out]
                (with-open [^OutputStream out out]
                  (doseq [[i e] (map-indexed vector evs)]
                    (write-event out e)
                    (when (= i stop-after)
                      (.release parked)
                      (deref open hang-guard-ms nil))))))})))

(defn paced-events
  "100 events that need no repair, for a stream written one every 20 ms: a
  RUN_STARTED, a text message of 97 parts (its content the numbers 0 to 96,
  each with a space), a RUN_FINISHED."
  [thread-id run-id]
  (let [m (str "m-" run-id)]
    (mapv #(json/write-str % :escape-slash false)
          (concat [{"type" "RUN_STARTED" "threadId" thread-id "runId" run-id}
                   {"type" "TEXT_MESSAGE_START" "messageId" m "role" "assistant"}]
                  (for [i (range 96)] {"type" "TEXT_MESSAGE_CONTENT" "messageId" m "delta" (str i " ")})
                  [{"type" "TEXT_MESSAGE_END" "messageId" m}
                   {"type" "RUN_FINISHED" "threadId" thread-id "runId" run-id}]))))

(defn- paced-handler [request]
  (let [input (json/read-str (slurp (:body request) :encoding "UTF-8"))]
    {:status 200
     :headers {"Content-Type" "text/event-stream" "Cache-Control" "no-cache"}
     :body (reify protocols/StreamableResponseBody
             (write-body-to-stream [_ _ out]
               (with-open [^OutputStream out out]
                 (doseq [e (paced-events (get input "threadId") (get input "runId"))]
                   (.write out (sse-bytes e))
                   (.flush out)
                   (Thread/sleep 20)))))}))

(defn- text [status body] {:status status :headers {"Content-Type" "text/plain"} :body (str body)})

(defonce ^:private running
  ;; The sidecar -main started, for /sidecar-pid.
  (atom nil))

(defn- sidecar-pid []
  (let [c (:client @running)]
    (if (and c (.isAlive (client/process c))) (.pid (client/process c)) 0)))

(defn router [request]
  (case [(:request-method request) (:uri request)]
    [:post "/agent"] (agent-handler request)
    [:post "/agent-gated"] (agent-handler request 2)
    [:post "/agent-paced"] (paced-handler request)
    [:post "/raw"] (agent-handler request)
    [:get "/gate/reached"] (let [n (or (some->> (:query-string request) (re-find #"n=(\d+)") second
                                                 Long/parseLong)
                                         1)]
                             (if (.tryAcquire ^Semaphore (:parked @gate) (int n) hang-guard-ms TimeUnit/MILLISECONDS)
                               (text 200 (sidecar-pid))
                               (text 504 "the gated streams never reached their gate")))
    [:post "/gate/open"] (let [{:keys [open]} @gate]
                           (swap! gate assoc :open (promise))
                           (deliver open true)
                           (text 200 "open"))
    [:get "/sidecar-pid"] (text 200 (sidecar-pid))
    (text 404 "not found")))

(defn app
  "The router behind wrap-agui-state, on the sidecar `s`."
  [s]
  (agui-ring/wrap-agui-state router {:sidecar s :own ["/toolState"] :join-keys true
                                     :paths ["/agent" "/agent-gated" "/agent-paced"]}))

(defn -main [& _]
  (let [s (reset! running (agui-ring/sidecar {}))
        ^Server server (jetty/run-jetty (app s) {:host "127.0.0.1" :port 0 :join? false})
        port (.getLocalPort ^ServerConnector (first (.getConnectors server)))]
    (println (str "listening http://127.0.0.1:" port))
    (flush)
    (.join server)))
