(ns agui-state.ring-raise-agent
  "A Ring app whose body writes N events and then throws, as an agent whose
  node raises mid-run does, served through wrap-agui-state in a real Jetty
  server for test/middleware/clojure-raise.test.ts, which reads it with the
  real HttpAgent: everything the body wrote before it threw must reach the
  client, repaired, in order, and the response then end as Jetty ends it.

    clojure -cp data.json.jar:ring-core.jar:ring-jetty-adapter.jar:src:test \\
      -m agui-state.ring-raise-agent

  prints `listening SYNC-URL ASYNC-URL`: one Jetty server with the one-argument
  handler, one with the async (three-argument) one, both on one sidecar
  component (AGUI_STATE_BIN, else PATH). Each serves POST /repair?n=N&size=S
  (wrap-agui-state with :lifecycle \"repair\"), /pass?... (:lifecycle \"pass\")
  and /direct?... (no middleware). The events are RUN_STARTED (the request's
  threadId and runId), then in turn a STATE_SNAPSHOT {step, pad}, a STATE_DELTA
  of /step, and a text message's start, content and end, where pad and the
  content are S characters; each is one SSE block, flushed. With &finished=1
  the last of the N is a RUN_FINISHED. GET /stats is the sidecar's stats (its
  open `streams`)."
  (:require [agui-state.client :as agui-client]
            [agui-state.ring :as agui-ring]
            [clojure.data.json :as json]
            [clojure.string :as str]
            [ring.adapter.jetty :as jetty]
            [ring.core.protocols :as protocols])
  (:import (java.io OutputStream)
           (java.nio.charset StandardCharsets)
           (org.eclipse.jetty.server Server ServerConnector)))

(defn events
  "The n events of a run, pad and content of size characters each; with
  finished, the last of them a RUN_FINISHED."
  [thread-id run-id n size finished]
  (let [pad (str/join (repeat size "p"))
        m (fn [i k] (str "m" (- i k)))
        run (into [{"type" "RUN_STARTED" "threadId" thread-id "runId" run-id}]
                  (for [i (range 1 n)]
                    (case (int (mod (dec i) 5))
                      0 {"type" "STATE_SNAPSHOT" "snapshot" {"step" i "pad" pad}}
                      1 {"type" "STATE_DELTA" "delta" [{"op" "add" "path" "/step" "value" i}]}
                      2 {"type" "TEXT_MESSAGE_START" "messageId" (m i 0) "role" "assistant"}
                      3 {"type" "TEXT_MESSAGE_CONTENT" "messageId" (m i 1) "delta" pad}
                      4 {"type" "TEXT_MESSAGE_END" "messageId" (m i 2)})))]
    (cond-> run
      (and finished (> n 1)) (assoc (dec n) {"type" "RUN_FINISHED" "threadId" thread-id "runId" run-id}))))

(defn- query [request k]
  (some->> (:query-string request) (re-find (re-pattern (str "(?:^|&)" k "=([^&]*)"))) second parse-long))

(defn- raising-response
  "The events the query asks for, then a throw, the stream left open."
  [request]
  (let [input (json/read-str (slurp (:body request) :encoding "UTF-8"))
        run (events (get input "threadId") (get input "runId") (query request "n") (query request "size")
                    (= 1 (query request "finished")))]
    {:status 200
     :headers {"Content-Type" "text/event-stream" "Cache-Control" "no-cache"}
     :body (reify protocols/StreamableResponseBody
             (write-body-to-stream [_ _ out]
               (doseq [e run]
                 (.write ^OutputStream out (.getBytes (str "data: " (json/write-str e) "\n\n") StandardCharsets/UTF_8))
                 (.flush ^OutputStream out))
               (throw (IllegalStateException. "the agent's node raised after its last event"))))}))

(def ^:private app
  (fn
    ([request] (raising-response request))
    ([request respond _raise] (respond (raising-response request)))))

(defn router
  "The three routes, the middleware on the sidecar `s`."
  [s]
  (let [through {"/repair" (agui-ring/wrap-agui-state app {:sidecar s :lifecycle "repair" :log (fn [_])})
                 "/pass" (agui-ring/wrap-agui-state app {:sidecar s :lifecycle "pass" :log (fn [_])})
                 "/direct" app}
        stats (fn [] {:status 200 :headers {"Content-Type" "application/json"}
                      :body (json/write-str (agui-client/stats (:client s)))})
        missing {:status 404 :headers {"Content-Type" "text/plain"} :body "not found"}]
    (fn
      ([request] (cond (= "/stats" (:uri request)) (stats)
             :else (if-let [h (through (:uri request))] (h request) missing)))
      ([request respond raise]
       (cond (= "/stats" (:uri request)) (respond (stats))
             :else (if-let [h (through (:uri request))] (h request respond raise) (respond missing)))))))

(defn- port [^Server server] (.getLocalPort ^ServerConnector (first (.getConnectors server))))

(defn -main [& _]
  (let [app (router (agui-ring/sidecar {}))
        sync-server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false})
        async-server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false :async? true})]
    (println (str "listening http://127.0.0.1:" (port sync-server) " http://127.0.0.1:" (port async-server)))
    (flush)
    (.join ^Server sync-server)))
