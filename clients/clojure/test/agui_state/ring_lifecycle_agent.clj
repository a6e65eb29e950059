(ns agui-state.ring-lifecycle-agent
  "The lifecycle table (test/fixtures/lifecycle/cases.json, issue 40) served by
  Ring apps through wrap-agui-state in real Jetty servers, for
  test/middleware/clojure-lifecycle.test.ts, which drives them with the real
  HttpAgent. Each case's `events` go out as SSE (`data: JSON` and a blank line
  each, flushed), then the body ends as its `end` says: \"eof\", the body
  closes its stream; \"reset\", it throws after the last event without closing
  it, as an agent whose node raises does.

    clojure -cp data.json.jar:ring-core.jar:ring-jetty-adapter.jar:src:test \\
      -m agui-state.ring-lifecycle-agent CASES.json

  prints `listening SYNC-URL ASYNC-URL`: one Jetty server with the one-argument
  handler, one with the async (three-argument) one, both on one sidecar
  component (AGUI_STATE_BIN, else PATH). Each serves:
    POST /repair/N?key=K   case N through wrap-agui-state with :lifecycle \"repair\"
    POST /default/N?key=K  the same, :lifecycle not given (pass: the negative control)
    POST /pass/N?key=K     the same with :lifecycle \"pass\" (the negative control)
    GET  /said?key=K       {\"findings\": [...], \"warnings\": [...]}: what the
                           middleware gave :finding and :warn for the request K"
  (:require [agui-state.ring :as agui-ring]
            [clojure.data.json :as json]
            [ring.adapter.jetty :as jetty]
            [ring.core.protocols :as protocols])
  (:import (java.io OutputStream)
           (java.nio.charset StandardCharsets)
           (org.eclipse.jetty.server Server ServerConnector)))

(defn- sse-bytes ^bytes [event]
  (.getBytes (str "data: " (json/write-str event :escape-unicode false :escape-slash false) "\n\n")
             StandardCharsets/UTF_8))

(defn- write-events [^OutputStream out events]
  (doseq [e events]
    (.write out (sse-bytes e))
    (.flush out)))

(defn case-response
  "The response of one case: its events, then its end. The request's body is
  read first, as an agent reads its RunAgentInput (the middleware keeps it:
  the sidecar takes a missing RUN_STARTED's ids from it)."
  [request {:strs [events end]}]
  (slurp (:body request) :encoding "UTF-8")
  {:status 200
   :headers {"Content-Type" "text/event-stream" "Cache-Control" "no-cache"}
   :body (reify protocols/StreamableResponseBody
           (write-body-to-stream [_ _ out]
             (if (= end "reset")
               (do (write-events out events)
                   (throw (IllegalStateException. "the agent's node raised after its last event")))
               (with-open [^OutputStream out out]
                 (write-events out events)))))})

(defonce ^:private said
  ;; key -> {"findings" [...] "warnings" [...]}
  (atom {}))

(defn- text [status body] {:status status :headers {"Content-Type" "text/plain"} :body (str body)})

(defn- query-key [request]
  (some->> (:query-string request) (re-find #"(?:^|&)key=([^&]*)") second))

(defn- route
  "[lifecycle-option case] for a case's path, or nil."
  [cases uri]
  (when-let [[_ mode n] (re-matches #"/(default|repair|pass)/(\d+)" uri)]
    (when-let [c (get cases (parse-long n))]
      [(case mode "default" nil mode) c])))

(defn- through-middleware
  "A handler of the case through a wrap-agui-state of its own, so that the
  findings and warnings of the request `k` are kept apart."
  [s lifecycle c k]
  (let [record (fn [kind x] (swap! said update-in [k kind] (fnil conj []) x))]
    (agui-ring/wrap-agui-state
     (fn
       ([request] (case-response request c))
       ([request respond _raise] (respond (case-response request c))))
     (cond-> {:sidecar s
              :finding #(record "findings" %)
              :warn (fn [line] (record "warnings" line) (.println System/err line))
              :log (fn [_])}
       lifecycle (assoc :lifecycle lifecycle)))))

(defn router
  "The routes above, on the sidecar `s`, for the cases `cases` (a vector)."
  [s cases]
  (let [answer (fn [request]
                 (cond
                   (and (= :get (:request-method request)) (= "/said" (:uri request)))
                   {:status 200 :headers {"Content-Type" "application/json"}
                    :body (json/write-str (get @said (query-key request) {}))}
                   (and (= :post (:request-method request)) (route cases (:uri request)))
                   (let [[lifecycle c] (route cases (:uri request))]
                     [(through-middleware s lifecycle c (query-key request))])
                   :else (text 404 "not found")))]
    (fn
      ([request] (let [r (answer request)] (if (vector? r) ((first r) request) r)))
      ([request respond raise]
       (let [r (answer request)] (if (vector? r) ((first r) request respond raise) (respond r)))))))

(defn- port [^Server server] (.getLocalPort ^ServerConnector (first (.getConnectors server))))

(defn -main [cases-file & _]
  (let [cases (vec (get (json/read-str (slurp cases-file :encoding "UTF-8")) "cases"))
        s (agui-ring/sidecar {})
        app (router s cases)
        sync-server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false})
        async-server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false :async? true})]
    (println (str "listening http://127.0.0.1:" (port sync-server) " http://127.0.0.1:" (port async-server)))
    (flush)
    (.join ^Server sync-server)))
