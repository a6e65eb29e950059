(ns agui-state.ring-replay-agent
  "Recorded answers of a real framework (test/fixtures/frameworks/<framework>/*.json)
  replayed by Ring apps through wrap-agui-state in real Jetty servers, for
  test/frameworks/langgraph-clojure.test.ts, which drives them with the real
  HttpAgent.

    clojure -cp data.json.jar:ring-core.jar:ring-jetty-adapter.jar:src:test \\
      -m agui-state.ring-replay-agent test/fixtures/frameworks/langgraph

  prints `listening SYNC-URL ASYNC-URL`: one Jetty server with the one-argument
  handler, one with the async (three-argument) one, both on one sidecar
  component (AGUI_STATE_BIN, else PATH). A POST to a fixture's path goes
  through a wrap-agui-state of its own (:own the fixture's own) to the replay
  handler, which answers the run whose request.runId is the request's runId
  (404 for any other): the recorded status and content type, then the recorded
  body, one flushed write per SSE event, as the framework's server sent them.
  Each warning of the middleware is a line `WARN ...` on stderr."
  (:require [agui-state.ring :as agui-ring]
            [clojure.data.json :as json]
            [clojure.java.io :as io]
            [ring.adapter.jetty :as jetty]
            [ring.core.protocols :as protocols])
  (:import (java.io OutputStream)
           (java.nio.charset StandardCharsets)
           (org.eclipse.jetty.server Server ServerConnector)))

(defn- writes
  "The recorded body's writes: each SSE event with its blank line."
  [^String body]
  (remove empty? (.split body "(?<=\n\n)")))

(defn- replay
  "The framework's server, as recorded, for the fixture `f`."
  [f request]
  (let [run-id (get (json/read-str (slurp (:body request) :encoding "UTF-8")) "runId")
        run (first (filter #(= run-id (get-in % ["request" "runId"])) (get f "runs")))]
    (if-not run
      {:status 404 :headers {"Content-Type" "text/plain"} :body (str "no recorded run " run-id)}
      {:status (get run "status")
       :headers {"Content-Type" (get run "contentType") "Cache-Control" "no-cache"}
       :body (reify protocols/StreamableResponseBody
               (write-body-to-stream [_ _ out]
                 (with-open [^OutputStream out out]
                   (doseq [^String w (writes (get run "body"))]
                     (.write out (.getBytes w StandardCharsets/UTF_8))
                     (.flush out)))))})))

(defn router
  "Each fixture's path through its own wrap-agui-state, on the sidecar `s`."
  [s fixtures]
  (let [routes (into {} (for [f fixtures]
                          [(get f "path")
                           (agui-ring/wrap-agui-state
                            (fn
                              ([request] (replay f request))
                              ([request respond _raise] (respond (replay f request))))
                            {:sidecar s
                             :own (get f "own")
                             :warn (fn [line] (.println System/err (str "WARN " line)))
                             :log (fn [_])})]))
        missing {:status 404 :headers {"Content-Type" "text/plain"} :body "not found"}]
    (fn
      ([request] (if-let [h (routes (:uri request))] (h request) missing))
      ([request respond raise]
       (if-let [h (routes (:uri request))] (h request respond raise) (respond missing))))))

(defn- port [^Server server] (.getLocalPort ^ServerConnector (first (.getConnectors server))))

(defn -main [dir & _]
  (let [files (sort-by #(.getName ^java.io.File %)
                       (filter #(.endsWith (.getName ^java.io.File %) ".json") (.listFiles (io/file dir))))
        fixtures (mapv #(json/read-str (slurp % :encoding "UTF-8")) files)
        s (agui-ring/sidecar {})
        app (router s fixtures)
        sync-server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false})
        async-server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false :async? true})]
    (println (str "listening http://127.0.0.1:" (port sync-server) " http://127.0.0.1:" (port async-server)))
    (flush)
    (.join ^Server sync-server)))
