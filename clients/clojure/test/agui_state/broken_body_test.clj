(ns agui-state.broken-body-test
  "Issue 40 (FINAL CONTRACT, closeStream's `ended`): a handler's body that
  throws inside its run. Under :lifecycle \"repair\" the middleware writes
  closeStream's text, the run's closes and a RUN_ERROR INCOMPLETE_STREAM, ends
  the response cleanly (write-body-to-stream returns, `out` is closed) and
  says the exception once to :warn; under \"pass\", the default, the exception
  reaches the adapter, which breaks the response off, as before. A body that
  closes its stream before it throws (with-open) ended its run at the close:
  the same clean end, the exception said once."
  (:require [agui-state.ring :as r]
            [agui-state.test-support :as s]
            [clojure.data.json :as json]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [ring.core.protocols :as protocols])
  (:import (java.io ByteArrayInputStream ByteArrayOutputStream OutputStream)
           (java.nio.charset StandardCharsets)))

(def ^:private boom "the agent's node raised")

(def ^:private events
  [{"type" "RUN_STARTED" "threadId" "t1" "runId" "r1"}
   {"type" "TEXT_MESSAGE_START" "messageId" "m1" "role" "assistant"}
   {"type" "TEXT_MESSAGE_CONTENT" "messageId" "m1" "delta" "Let me"}])

(defn- handler
  "An agent that writes `events` and throws, its stream closed first when
  `close-first`."
  [close-first]
  (fn [request]
    (slurp (:body request))
    {:status 200
     :headers {"Content-Type" "text/event-stream"}
     :body (reify protocols/StreamableResponseBody
             (write-body-to-stream [_ _ out]
               (let [write (fn [] (doseq [e events]
                                    (.write ^OutputStream out (.getBytes (str "data: " (json/write-str e) "\n\n")
                                                                         StandardCharsets/UTF_8))
                                    (.flush ^OutputStream out))
                             (throw (IllegalStateException. ^String boom)))]
                 (if close-first
                   (try (write) (finally (.close ^OutputStream out)))
                   (write)))))}))

(defn- request []
  {:request-method :post :uri "/agent" :headers {"content-type" "application/json"}
   :body (ByteArrayInputStream. (.getBytes (json/write-str {"threadId" "t1" "runId" "r1" "state" {} "messages" []})
                                           StandardCharsets/UTF_8))})

(defn- answer
  "{:events :thrown :closed :warnings} of one request to `handler` wrapped with `opts`."
  [sc handler opts]
  (let [warnings (atom [])
        app (r/wrap-agui-state handler (merge {:sidecar sc :warn #(swap! warnings conj %) :log (fn [_])} opts))
        response (app (request))
        buf (ByteArrayOutputStream.)
        closed (atom 0)
        out (proxy [OutputStream] []
              (write ([b] (if (bytes? b) (.write buf ^bytes b) (.write buf (int b))))
                ([b off len] (.write buf ^bytes b (int off) (int len))))
              (flush [])
              (close [] (swap! closed inc)))
        thrown (try (protocols/write-body-to-stream (:body response) response out) nil
                    (catch Exception e e))]
    {:events (for [line (str/split-lines (.toString buf "UTF-8"))
                   :when (str/starts-with? line "data: ")]
               (json/read-str (subs line 6)))
     :thrown thrown
     :closed @closed
     :warnings (filter #(str/includes? % boom) @warnings)}))

(deftest a-body-that-throws-inside-its-run
  (with-open [sc (r/sidecar {:path (s/bin) :env {"AGUI_STATE_LOG_LEVEL" "warn"}})]
    (doseq [close-first [false true]]
      (testing (str ":lifecycle \"repair\"" (when close-first ", the stream closed before the throw"))
        (let [{:keys [events thrown closed warnings]} (answer sc (handler close-first) {:lifecycle "repair"})]
          (is (nil? thrown) "the response ended cleanly: nothing rethrown to the adapter")
          (is (pos? closed) "its stream was closed")
          (is (= ["RUN_STARTED" "TEXT_MESSAGE_START" "TEXT_MESSAGE_CONTENT" "TEXT_MESSAGE_END" "RUN_ERROR"]
                 (map #(get % "type") events)))
          (is (= "INCOMPLETE_STREAM" (get (last events) "code")))
          (is (= 1 (count warnings)) "the exception said once")
          (is (str/includes? (first warnings) "IllegalStateException") "with its class and stack trace"))))
    (doseq [opts [{} {:lifecycle "pass"}]]
      (testing (str (pr-str opts) ": the exception reaches the adapter, which breaks the response off")
        (let [{:keys [events thrown warnings]} (answer sc (handler false) opts)]
          (is (= boom (ex-message thrown)))
          (is (= ["RUN_STARTED" "TEXT_MESSAGE_START" "TEXT_MESSAGE_CONTENT"] (map #(get % "type") events)))
          (is (empty? warnings)))))))
