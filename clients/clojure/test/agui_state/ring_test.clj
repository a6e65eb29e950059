(ns agui-state.ring-test
  "agui-state.ring/wrap-agui-state against the real binary, without a web server:
  the wrapped handler is called as an adapter calls it, and its body written to a
  byte stream. The witness of a repair is `agui-state fix` itself, run on the
  bytes the handler wrote with the same baseline and flags (protocol/README.md
  §14: the stream's output is exactly what fix writes, however it was cut).
  test/middleware/clojure.test.ts drives the same agent through Jetty with the
  real HttpAgent."
  (:require [agui-state.client :as c]
            [agui-state.ring :as r]
            [agui-state.ring-agent :as agent]
            [agui-state.test-support :as s]
            [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [ring.adapter.jetty :as jetty]
            [ring.core.protocols :as protocols])
  (:import (java.io ByteArrayInputStream ByteArrayOutputStream File InputStream IOException OutputStream)
           (java.net URI)
           (java.net.http HttpClient HttpRequest HttpRequest$BodyPublishers HttpResponse
                          HttpResponse$BodyHandlers)
           (java.nio.charset StandardCharsets)
           (org.eclipse.jetty.server Server ServerConnector)))

(def ^:private client-keys {"selectedLayer" "era5" "ui" {"panel" "layers"}})
(def ^:private flags ["--own" "/toolState" "--join-keys"])
(def ^:private opts {:own ["/toolState"] :join-keys true})

(defn- utf8 ^bytes [^String s] (.getBytes s StandardCharsets/UTF_8))

(defn- fix
  "What `agui-state fix --state STATE FLAGS` writes for `raw`."
  [state raw-bytes flags]
  (let [f (doto (File/createTempFile "agui-state-ring" ".json") .deleteOnExit)]
    (spit f (json/write-str state))
    (let [p (.start (ProcessBuilder. ^java.util.List (into [(s/bin) "fix" "--state" (str f)] flags)))
          ;; Fed from another thread: fix writes as it reads, and a long input
          ;; would fill its stdout while this thread still writes its stdin.
          feed (future (with-open [in (.getOutputStream p)] (.write in ^bytes raw-bytes)))
          out (slurp (.getInputStream p) :encoding "UTF-8")]
      @feed
      (.waitFor p)
      out)))

(defn- input [state run-id]
  (utf8 (json/write-str {"threadId" "t1" "runId" run-id "state" state "messages" []})))

(defn- request [uri ^bytes body]
  {:request-method :post :uri uri :headers {"content-type" "application/json"}
   :body (ByteArrayInputStream. body)})

(defn- written
  "The body of `response` as the adapter would write it, as text."
  [response]
  (let [out (ByteArrayOutputStream.)]
    (protocols/write-body-to-stream (:body response) response out)
    (.toString out "UTF-8")))

(defn- raw-sse [run-id] (apply str (map #(str "data: " % "\n\n") (agent/events "t1" run-id))))

(defn- streaming
  "A handler whose SSE body is `text`, written in pieces of `n` bytes with a flush
  after each (n = 1 cuts every character of more than one byte)."
  [^String text n]
  (fn [_]
    {:status 200 :headers {"Content-Type" "text/event-stream; charset=utf-8" "Content-Length" "999"}
     :body (reify protocols/StreamableResponseBody
             (write-body-to-stream [_ _ out]
               (with-open [^OutputStream out out]
                 (let [bs (utf8 text)]
                   (doseq [i (range 0 (alength bs) n)]
                     (.write out bs (int i) (int (min n (- (alength bs) i))))
                     (.flush out))))))}))

(deftest sse-event-boundaries
  (let [cut #(first (#'r/sse-cut % 0 true))]
    (is (= 3 (cut "a\n\nb")) "LF LF")
    (is (= 5 (cut "a\r\n\r\nb")) "CRLF CRLF")
    (is (= 3 (cut "a\r\rb")) "CR CR")
    (is (= 4 (cut "a\r\n\nb")) "CRLF LF")
    (is (= -1 (cut "a\r\nb")) "one CRLF is one line end, not two")
    (is (= -1 (cut "a\n\r")) "a CR at the end waits for its LF")
    (is (= 6 (cut "a\n\nb\n\nc\n")) "the last blank line")
    (is (= 1 (cut "\nx")) "a blank line at the start")
    (testing "resumed where the last scan stopped, mid-line"
      (is (= [-1 2 false] (#'r/sse-cut "ab" 0 true)))
      (is (= [4 4 true] (#'r/sse-cut "ab\n\n" 2 false))))))

(deftest repairs-sse-as-fix-does
  (with-open [cl (s/start-client)]
    (let [app (r/wrap-agui-state agent/router (assoc opts :client cl))]
      (doseq [[label run-id] [["the agent, a character cut by a flush" "r1"]]]
        (testing label
          (let [response (app (request "/agent" (input client-keys run-id)))
                expected (fix client-keys (utf8 (raw-sse run-id)) flags)]
            (is (not-any? #(.equalsIgnoreCase "content-length" (str %)) (keys (:headers response))))
            (is (= expected (written response)))
            (is (str/includes? expected "raster-ops~1dataset") "the unescaped key was mended")
            (is (not (str/includes? expected "STATE_SNAPSHOT")) "snapshots became deltas on /toolState")))))
    (testing "written a byte at a time, with LF, CRLF and CR line ends"
      (doseq [eol ["\n" "\r\n" "\r"]]
        (let [text (str/replace (raw-sse "r2") "\n" eol)
              app (r/wrap-agui-state (streaming text 1) (assoc opts :client cl))
              response (app (request "/x" (input client-keys "r2")))]
          (is (= (fix client-keys (utf8 text) flags) (written response)) (pr-str eol)))))
    (testing "the baseline is the request's RunAgentInput.state: /todos there needs no add"
      (let [state (assoc client-keys "todos" ["eggs"])
            app (r/wrap-agui-state (streaming (raw-sse "r3") 7) (assoc opts :client cl))
            out (written (app (request "/x" (input state "r3"))))]
        (is (= (fix state (utf8 (raw-sse "r3")) flags) out))
        (is (not (str/includes? out "\"path\":\"/todos\"")))))
    (testing "a handler that never flushes is repaired too"
      (let [app (r/wrap-agui-state (streaming (raw-sse "r4") 1000000) (assoc opts :client cl))]
        (is (= (fix client-keys (utf8 (raw-sse "r4")) flags)
               (written (app (request "/x" (input client-keys "r4"))))))))))

(deftest ndjson-and-the-async-arity
  (with-open [cl (s/start-client)]
    (let [text (apply str (map #(str % "\n") (agent/events "t1" "r1")))
          handler (fn handler
                    ([_] {:status 200 :headers {"content-type" "application/x-ndjson"} :body text})
                    ([req respond _] (respond (handler req))))
          app (r/wrap-agui-state handler (assoc opts :client cl :snapshots "delta"))
          expected (fix client-keys (utf8 text) ["--own" "/toolState" "--join-keys" "--snapshots" "delta"])]
      (is (not= text expected))
      (is (= expected (written (app (request "/x" (input client-keys "r1"))))) "a string body")
      (let [p (promise)]
        (app (request "/x" (input client-keys "r1")) #(deliver p %) #(deliver p %))
        (is (= expected (written (deref p 30000 nil))) "respond gets the repaired response")))))

(deftest other-responses-pass-untouched
  (with-open [cl (s/start-client)]
    (let [seen (atom nil)
          json-response {:status 200 :headers {"Content-Type" "application/json" "Content-Length" "2"} :body "{}"}
          warnings (atom [])
          app (r/wrap-agui-state (fn [req]
                                   (reset! seen (slurp (:body req) :encoding "UTF-8"))
                                   (case (:uri req)
                                     "/json" json-response
                                     "/gz" {:status 200 :headers {"Content-Type" "text/event-stream" "Content-Encoding" "gzip"} :body "x"}
                                     ((streaming (raw-sse "r1") 64) req)))
                                 (assoc opts :client cl :paths ["/json" "/gz" "/agent"]
                                        :warn #(swap! warnings conj %)))
          body (input client-keys "r1")]
      (is (identical? json-response (app (request "/json" body))) "not an event stream")
      (is (= (String. body StandardCharsets/UTF_8) @seen) "the handler read the same request body")
      (let [response (app (request "/other" body))]
        (is (= (raw-sse "r1") (written response)) "a path :paths leaves out")
        (is (= "999" (get-in response [:headers "Content-Length"]))))
      (is (= "x" (:body (app (request "/gz" body)))) "a Content-Encoding")
      (is (re-find #"Content-Encoding gzip.*inside" (first @warnings)))
      (is (= (fix client-keys (utf8 (raw-sse "r1")) flags) (written (app (request "/agent" body)))))
      (is (= @seen (String. body StandardCharsets/UTF_8)) "the handler read the same request body"))))

(defn- killing
  "A handler that writes the agent's first `k` events, kills the sidecar behind
  `cl` with SIGKILL, and writes the rest."
  [cl k]
  (fn [req]
    (let [in (json/read-str (slurp (:body req) :encoding "UTF-8"))
          evs (agent/events "t1" (get in "runId"))]
      {:status 200 :headers {"Content-Type" "text/event-stream"}
       :body (reify protocols/StreamableResponseBody
               (write-body-to-stream [_ _ out]
                 (with-open [^OutputStream out out]
                   (doseq [[i e] (map-indexed vector evs)]
                     (when (= i k)
                       (let [p (c/process cl)] (.destroyForcibly p) (.waitFor p)))
                     (.write out (agent/sse-bytes e))
                     (.flush out)))))})))

(deftest fails-open-and-restarts
  (with-open [cl (s/start-client)]
    (let [warnings (atom [])
          app (r/wrap-agui-state (killing cl 3) (assoc opts :client cl :warn #(swap! warnings conj %)))
          events (agent/events "t1" "r1")
          head (apply str (map #(str "data: " % "\n\n") (take 3 events)))
          rest-raw (apply str (map #(str "data: " % "\n\n") (drop 3 events)))
          first-process (c/process cl)]
      (testing "the sidecar killed in the middle of a stream: the rest goes as the server wrote it"
        (is (= (str (fix client-keys (utf8 head) flags) rest-raw)
               (written (app (request "/x" (input client-keys "r1"))))))
        (is (= 1 (count @warnings)))
        (is (re-find #"fixStream failed.*exited.*unrepaired" (str (first @warnings)))))
      (testing "the next request restarts the sidecar and is repaired again"
        (let [app (r/wrap-agui-state (streaming (raw-sse "r2") 5) (assoc opts :client cl))]
          (is (= (fix client-keys (utf8 (raw-sse "r2")) flags)
                 (written (app (request "/x" (input client-keys "r2"))))))
          (is (not (identical? first-process (c/process cl))))
          (is (.isAlive (c/process cl)))))
      (testing "a sidecar that refuses the stream: the response goes as it is"
        (reset! warnings [])
        (let [app (r/wrap-agui-state (streaming (raw-sse "r3") 5)
                                     {:client cl :own ["not-a-pointer"] :warn #(swap! warnings conj %)})]
          (is (= (raw-sse "r3") (written (app (request "/x" (input client-keys "r3"))))))
          (is (re-find #"openStream failed.*-32602" (str (first @warnings)))))))))

(deftest a-client-that-goes-away-closes-the-sidecar-stream
  (with-open [cl (s/start-client)]
    (let [app (r/wrap-agui-state (streaming (raw-sse "r1") 40) (assoc opts :client cl))
          response (app (request "/x" (input client-keys "r1")))
          writes (atom 0)
          broken (proxy [OutputStream] []
                   (write
                     ([_] (when (> (swap! writes inc) 1) (throw (IOException. "Broken pipe"))))
                     ([_ _ _] (when (> (swap! writes inc) 1) (throw (IOException. "Broken pipe"))))))]
      (is (thrown-with-msg? IOException #"Broken pipe"
                            (protocols/write-body-to-stream (:body response) response broken)))
      (is (= 0 (:streams (c/stats cl))) "no stream is left open in the sidecar")
      (let [e (s/thrown "closeStream after the middleware's" :unknown-stream #(c/close-stream cl "s1"))]
        (is (= "closed" (get-in e [:data "reason"])) "closed by the middleware, not by a limit")))))

(defn- endless-event
  "A handler whose SSE body is `head`, then `data: ` and `n` bytes of x written
  64 KiB at a time with a flush after each, without the event's end. It then
  delivers `paused` and waits for `release` before it ends that event and writes
  `last-event`."
  [^String head n ^String last-event paused release]
  (fn [_]
    {:status 200 :headers {"Content-Type" "text/event-stream"}
     :body (reify protocols/StreamableResponseBody
             (write-body-to-stream [_ _ out]
               (with-open [^OutputStream out out]
                 (.write out (utf8 head))
                 (.flush out)
                 (.write out (utf8 "data: "))
                 (let [chunk (byte-array 65536 (byte (int \x)))]
                   (loop [left (long n)]
                     (when (pos? left)
                       (.write out chunk 0 (int (min left 65536)))
                       (.flush out)
                       (recur (- left 65536)))))
                 (deliver paused true)
                 ;; A hang guard, not a pause of its own: the test releases it.
                 (deref release 120000 nil)
                 (.write out (utf8 (str "\n\n" last-event)))
                 (.flush out))))}))

(defn- until
  "Polls `ok?` every 20 ms until it holds or `ms` pass; returns whether it held."
  [ms ok?]
  (let [deadline (+ (System/currentTimeMillis) (long ms))]
    (loop []
      (cond (ok?) true
            (> (System/currentTimeMillis) deadline) false
            :else (do (Thread/sleep 20) (recur))))))

(deftest an-event-that-never-ends-goes-through-unrepaired
  ;; Through Jetty and a real HTTP client, which reads as the bytes arrive: a
  ;; middleware that held the event would send nothing of it before its end.
  (with-open [cl (s/start-client)]
    (let [limit (long r/client-sse-limit)
          events (agent/events "t1" "r1")
          head (apply str (map #(str "data: " % "\n\n") (take 2 events)))
          x-count (+ limit (* 4 65536))
          last-event (str "data: " (last events) "\n\n")
          raw (str head "data: " (apply str (repeat x-count \x)) "\n\n" last-event)
          paused (promise)
          release (promise)
          warnings (atom [])
          app (r/wrap-agui-state (endless-event head x-count last-event paused release)
                                 (assoc opts :client cl :warn #(swap! warnings conj %)))
          ^Server server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false})
          port (.getLocalPort ^ServerConnector (first (.getConnectors server)))
          got (ByteArrayOutputStream.)
          reading (future
                    (let [^HttpResponse response
                          (.send (HttpClient/newHttpClient)
                                 (-> (HttpRequest/newBuilder (URI. (str "http://127.0.0.1:" port "/agent")))
                                     (.header "Content-Type" "application/json")
                                     (.POST (HttpRequest$BodyPublishers/ofByteArray (input client-keys "r1")))
                                     .build)
                                 (HttpResponse$BodyHandlers/ofInputStream))
                          buf (byte-array 65536)]
                      (with-open [^InputStream in (.body response)]
                        (loop []
                          (let [k (.read in buf)]
                            (when (pos? k) (.write got buf 0 k) (recur)))))
                      (.statusCode response)))
          fixed-head (fix client-keys (utf8 head) flags)
          ;; The long event's bytes the client has, once it has the mended head.
          xs-got #(let [text (.toString got "UTF-8")
                        at (.indexOf text "data: xxx")]
                    (if (neg? at) 0 (- (.length text) at 6)))]
      (try
        (is (true? (deref paused 60000 nil)) "the handler wrote the long event and paused")
        (testing "while the handler is paused, the client already has the mended head and the long event"
          (is (until 60000 #(and (> (.size got) limit) (> (long (xs-got)) limit)))
              "more than the limit of the long event's bytes reached the client")
          (let [text (.toString got "UTF-8")]
            (is (str/starts-with? text fixed-head) "the head as fix writes it")
            (is (< -1 (.indexOf text "{\"op\":\"add\",\"path\":\"/todos\",\"value\":[]}")
                   (.indexOf text "{\"op\":\"add\",\"path\":\"/todos/-\",\"value\":\"milk\"}")
                   (.indexOf text "data: xxx"))
                "the append was mended: add /todos [] before it"))
          (is (= 1 (count @warnings)) "the warning came when the limit was passed"))
        (deliver release true)
        (is (= 200 (deref reading 60000 nil)) "the response completed")
        (is (= (fix client-keys (utf8 raw) flags) (.toString got "UTF-8"))
            "the whole body is what fix writes for the whole raw body")
        (is (= 1 (count @warnings)))
        (is (re-find #"^agui-state\.ring: stream s\d+: an event passed 10 MiB without its end \(the client's SSE limit\); the rest of this response goes through unrepaired$"
                     (str (first @warnings))))
        (is (= 0 (:streams (c/stats cl))) "the sidecar's stream was closed")
        (finally
          (deliver release true)
          (.stop server))))))
