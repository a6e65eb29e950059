;; B25's Ring server (bench/big-state.ts): Jetty on a loopback port answering
;; every POST, once it has read the request body, with the run in the file
;; given (bench/big-state-run.ts: SSE, ~6 STATE_SNAPSHOTs of a ~1 MB state),
;; each event written and flushed on its own; /plain as it is, /mw through
;; agui-state.ring/wrap-agui-state with :own the server's members, on a
;; sidecar component. It prints "listening on PORT" and serves until killed.
;;
;;   AGUI_STATE_BIN=dist/agui-state clojure -cp <data.json, ring-core, ring-jetty-adapter jars>:clients/clojure/src \
;;     bench/big_state_server.clj <run file> <own,own,...>
(require '[agui-state.ring :as agui-ring]
         '[clojure.string :as str]
         '[ring.adapter.jetty :as jetty]
         '[ring.core.protocols :as protocols])
(import '(java.io InputStream OutputStream)
        '(java.nio.charset StandardCharsets)
        '(java.nio.file Files Paths)
        '(org.eclipse.jetty.server Server ServerConnector))

(let [[file own] *command-line-args*
      text (String. (Files/readAllBytes (Paths/get file (into-array String []))) StandardCharsets/UTF_8)
      events (mapv #(.getBytes (str % "\n\n") StandardCharsets/UTF_8) (remove str/blank? (str/split text #"\n\n")))
      agent (fn [request]
              (.transferTo ^InputStream (:body request) (OutputStream/nullOutputStream))
              {:status 200
               :headers {"Content-Type" "text/event-stream"}
               :body (reify protocols/StreamableResponseBody
                       (write-body-to-stream [_ _ out]
                         (with-open [^OutputStream out out]
                           (doseq [^bytes e events]
                             (.write out e)
                             (.flush out)))))})
      sidecar (agui-ring/sidecar {})
      mw (agui-ring/wrap-agui-state agent {:sidecar sidecar :own (str/split own #",") :log (fn [_]) :warn #(binding [*out* *err*] (println %))})
      app (fn [request] (if (str/starts-with? (:uri request) "/mw") (mw request) (agent request)))
      ^Server server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false})]
  (println (str "listening on " (.getLocalPort ^ServerConnector (first (.getConnectors server)))))
  (flush)
  (.join server))
