;; B22clj (issue 31), beside the Python and Go middleware's first-stream
;; figures: the time to the first event of the first stream after a Ring app
;; behind agui-state.ring/wrap-agui-state is ready (its sidecar component
;; started, and Jetty listening), against a later stream's on the same server.
;; Each round is a fresh app and a fresh sidecar (stopped between rounds).
;; Beside it, the first stream behind a middleware given no sidecar, which
;; starts its own at the first request (it ends with the JVM). A round 0, not counted, warms the JIT, Jetty and the
;; HTTP client. Times in milliseconds, printed as JSON for bench/clojure-first-stream.ts.
;;
;;   AGUI_STATE_BIN=dist/agui-state clojure -cp <data.json, ring-core, ring-jetty-adapter jars>:clients/clojure/src \
;;     bench/clojure_first_stream.clj <rounds>
(require '[agui-state.ring :as agui-ring]
         '[clojure.data.json :as json]
         '[ring.adapter.jetty :as jetty]
         '[ring.core.protocols :as protocols])
(import '(java.io InputStream OutputStream)
        '(java.net URI)
        '(java.net.http HttpClient HttpRequest HttpRequest$BodyPublishers HttpResponse HttpResponse$BodyHandlers)
        '(java.nio.charset StandardCharsets)
        '(org.eclipse.jetty.server Server ServerConnector))

(defn agent-handler
  "A short run, as a framework writes one: RUN_STARTED at once, then a snapshot
  and RUN_FINISHED, each flushed."
  [_]
  {:status 200
   :headers {"Content-Type" "text/event-stream"}
   :body (reify protocols/StreamableResponseBody
           (write-body-to-stream [_ _ out]
             (with-open [^OutputStream out out]
               (doseq [e ["{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}"
                          "{\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{\"toolState\":{\"n\":1}}}"
                          "{\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}"]]
                 (.write out (.getBytes (str "data: " e "\n\n") StandardCharsets/UTF_8))
                 (.flush out)))))})

(defn serve
  "Jetty on a loopback port: [url stop]."
  [app]
  (let [^Server server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false})]
    [(str "http://127.0.0.1:" (.getLocalPort ^ServerConnector (first (.getConnectors server))) "/")
     #(.stop server)]))

(defn first-event
  "Posts a run on a new connection and returns the milliseconds until its first
  event has been read whole; then reads the rest."
  [^String url]
  (let [t (System/nanoTime)
        ^HttpResponse response (.send (HttpClient/newHttpClient)
                                      (-> (HttpRequest/newBuilder (URI. url))
                                          (.header "Content-Type" "application/json")
                                          (.POST (HttpRequest$BodyPublishers/ofString
                                                  "{\"threadId\":\"t\",\"runId\":\"r\",\"state\":{\"ui\":1}}"))
                                          .build)
                                      (HttpResponse$BodyHandlers/ofInputStream))
        ^InputStream in (.body response)]
    ;; The first block with data: the answer opens with a block of its id alone (protocol/README.md §16).
    (loop [prev -1 block (StringBuilder.)]
      (let [b (.read in)]
        (when (neg? b) (throw (ex-info "the stream ended before its first event" {})))
        (.append block (char b))
        (if (and (= b 10) (= prev 10))
          (when-not (.contains (str block) "data:") (recur -1 (StringBuilder.)))
          (recur b block))))
    (let [ms (/ (- (System/nanoTime) t) 1e6)]
      (.transferTo in (OutputStream/nullOutputStream))
      (.close in)
      ms)))

(let [rounds (Long/parseLong (first *command-line-args*))
      opts {:own ["/toolState"] :log (fn [_]) :warn #(binding [*out* *err*] (println %))}
      out (atom {"first" [] "later" [] "lazy" []})]
  (doseq [k (range (inc rounds))]
    (let [keep! (fn [side ms] (when (pos? k) (swap! out update side conj ms)))]
      ;; The system starts: the sidecar component, then the app on it.
      (let [sidecar (agui-ring/sidecar {})
            [url stop] (serve (agui-ring/wrap-agui-state agent-handler (assoc opts :sidecar sidecar)))]
        (keep! "first" (first-event url))
        (keep! "later" (first-event url))
        (stop)
        (agui-ring/stop sidecar))
      ;; No sidecar given: the middleware starts its own at the first request.
      (let [[url stop] (serve (agui-ring/wrap-agui-state agent-handler opts))]
        (keep! "lazy" (first-event url))
        (stop))))
  (println (json/write-str @out))
  (shutdown-agents)
  (System/exit 0))
