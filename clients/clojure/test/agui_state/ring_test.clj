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

(defn- without-ids
  "`text` with its opening block and `id:` lines taken out. Resume is on by
  default, so the body starts with an id alone and each event the middleware
  repairs carries an id (protocol/README.md §16); the rest is exactly what fix
  writes. agui-state.resume-test holds the ids themselves."
  [text]
  (str/replace (str/replace-first text #"^id: [A-Za-z0-9_-]+\.0\.[A-Za-z0-9_-]+\n\n" "")
               #"(?m)^id: [^\n]*\n" ""))

(defn- written
  "The body of `response` as the adapter would write it, as text, less the ids."
  [response]
  (let [out (ByteArrayOutputStream.)]
    (protocols/write-body-to-stream (:body response) response out)
    (without-ids (.toString out "UTF-8"))))

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

;; Issue 32: every op the repair sends rewritten or leaves out is reported with its
;; outcome, each on its own: :finding gets every finding, in order, the very ones
;; the sidecar gives for the same response fed at once on a stream of its own.
(deftest each-finding-is-handed-to-finding
  (with-open [cl (s/start-client)]
    (let [found (atom [])
          raw (raw-sse "f1")
          app (r/wrap-agui-state (streaming raw 7)
                                 (assoc opts :client cl :finding #(swap! found conj %) :log (fn [_])))
          out (written (app (request "/x" (input client-keys "f1"))))
          {:keys [stream-id]} (c/open-stream cl {:state client-keys :own ["/toolState"] :join-keys true
                                                 :framing "sse"})
          whole (c/fix-stream cl {:stream-id stream-id :text raw})
          closed (c/close-stream cl stream-id)
          expected (into (vec (:findings whole)) (:findings closed))]
      (is (= (fix client-keys (utf8 raw) flags) out))
      (is (some #(= "mended" (get % "outcome")) expected) (pr-str expected))
      (is (every? #(contains? #{"passed" "mended" "discarded" "kept"} (get % "outcome")) expected))
      (is (= expected @found)))))

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

(deftest the-async-arity-gives-the-adapters-thread-back
  (with-open [cl (s/start-client)]
    (let [in (java.io.PipedInputStream.)
          feed (java.io.PipedOutputStream. in)
          handler (fn ([_] nil)
                    ([req respond _] (respond {:status 200 :headers {"Content-Type" "text/plain"}
                                               :body (slurp (:body req) :encoding "UTF-8")})))
          app (r/wrap-agui-state handler {:client cl})
          answer (promise)
          ;; The request's body has not come yet: reading it, and asking the sidecar
          ;; what the request is, must not hold the adapter's thread.
          call (future (app {:request-method :post :uri "/agent" :headers {"content-type" "application/json"} :body in}
                            #(deliver answer %) #(deliver answer %))
                       :returned)]
      (is (= :returned (deref call 20000 :blocked)) "the async arity returned before the body came")
      (is (not (realized? answer)))
      (.write feed (utf8 "{\"threadId\":\"t1\"}"))
      (.close feed)
      (is (= "{\"threadId\":\"t1\"}" (:body (deref answer 20000 nil))) "then the handler got the body whole"))))

(deftest other-responses-pass-untouched
  (with-open [cl (s/start-client)]
    (let [seen (atom nil)
          json-response {:status 200 :headers {"Content-Type" "application/json" "Content-Length" "2"} :body "{}"}
          warnings (atom [])
          app (r/wrap-agui-state (fn [req]
                                   (reset! seen (some-> (:body req) (slurp :encoding "UTF-8")))
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
      (is (re-find #"content-encoded \(gzip\).*inside the compression middleware" (first @warnings)))
      (is (= (fix client-keys (utf8 (raw-sse "r1")) flags) (written (app (request "/agent" body)))))
      (is (= @seen (String. body StandardCharsets/UTF_8)) "the handler read the same request body")
      (testing "a request without a body stream has an empty body, not one left out: no baseline warning"
        (is (= (fix {} (utf8 (raw-sse "r1")) flags)
               (written (app {:request-method :get :uri "/agent" :headers {}}))))
        (is (= 1 (count @warnings)) (pr-str @warnings))))))

(defn- kill! [cl]
  (let [p (c/process cl)] (.destroyForcibly p) (.waitFor p)))

(defn- killing
  "A handler whose SSE body is `text`'s events, written one by one with a flush
  after each, that kills the sidecar behind `cl` with SIGKILL before each event
  whose index is in `at`, and at the end, before the body closes, if `at` holds
  the number of events."
  [cl ^String text at]
  (fn [_]
    (let [evs (mapv #(str % "\n\n") (str/split text #"\n\n"))]
      {:status 200 :headers {"Content-Type" "text/event-stream"}
       :body (reify protocols/StreamableResponseBody
               (write-body-to-stream [_ _ out]
                 (with-open [^OutputStream out out]
                   (doseq [[i e] (map-indexed vector evs)]
                     (when (contains? at i) (kill! cl))
                     (.write out (utf8 e))
                     (.flush out))
                   (when (contains? at (count evs)) (kill! cl)))))})))

(defn- sse-events
  "The events of an SSE text as fix writes it (LF, one data line an event)."
  [^String text]
  (for [block (str/split text #"\n\n") :when (str/starts-with? block "data: ")]
    (json/read-str (subs block 6))))

(defn- client-state
  "What the browser client holds after `text`, from `state`: its state events
  replayed by the strict RFC 6902 applier, which throws on any op that does
  not fit (the client would warn and drop the delta)."
  [state text]
  (s/replay state (filter #(#{"STATE_DELTA" "STATE_SNAPSHOT"} (get % "type")) (sse-events text))))

(deftest a-sidecar-killed-mid-stream-is-restarted-and-the-rest-repaired
  (with-open [cl (s/start-client)]
    (let [raw (raw-sse "r1")
          events (str/split raw #"\n\n")
          head (apply str (map #(str % "\n\n") (take 3 events)))
          expected (fix client-keys (utf8 raw) flags)
          restart-line #"^agui-state\.ring: the sidecar \(pid (\d+)\) was lost during (\w+) on stream s\d+ \(exit status 137\); restarted \(pid (\d+)\), stream s\d+ resumes with its mirror rebuilt from the (\d+) bytes answered for$"
          run (fn [at opts]
                (let [warnings (atom [])
                      logged (atom [])
                      before (c/process cl)
                      app (r/wrap-agui-state (killing cl raw at)
                                             (merge opts {:client cl :warn #(swap! warnings conj %)
                                                          :log #(swap! logged conj %)}))
                      out (written (app (request "/x" (input client-keys "r1"))))]
                  {:out out :warnings @warnings :logged @logged :before before}))]
      (testing "killed after the first snapshot: the rest of the response is repaired, exactly as fix repairs the whole"
        (let [{:keys [out warnings logged ^Process before]} (run #{3} opts)
              [line old-pid what new-pid replayed] (re-find restart-line (str (first warnings)))]
          (is (= expected out))
          (is (= ["1 mended" "3 kept" "1 mended" "3 kept"] (map #(second (re-find #"^agui-state\.ring: stream s\d+: (.*)$" %)) logged))
              "each part's findings logged by outcome: the append and the key mended, the client's keys kept")
          (is (= (assoc client-keys "todos" ["milk"]
                        "toolState" {"search" {"query" "café ☕" "run" "r1"} "raster-ops/dataset" "era5"})
                 (client-state client-keys out))
              "every delta applies (the strict applier), and the client's keys are kept")
          (is (= 1 (count warnings)) (pr-str warnings))
          (is line (str (first warnings)))
          (is (= [(str (.pid before)) "fixStream" (str (.pid (c/process cl)))] [old-pid what new-pid]))
          (is (= (alength (utf8 head)) (Long/parseLong (or replayed "0")))
              "it replayed exactly what the old stream answered for")
          (is (not (identical? before (c/process cl))))
          (is (.isAlive (c/process cl)))))
      (testing "killed after the last event, before the end: closeStream finds it gone, and the output is fix's"
        (let [{:keys [out warnings]} (run #{(count events)} opts)]
          (is (= expected out))
          (is (= [["closeStream"]] (map #(rest (re-find #"during (\w+) on" %)) warnings)))))
      (testing "killed while the sidecar holds an event without its end: the unanswered tail goes again to the new sidecar"
        (let [text (str/replace raw #"\n\n$" "")
              warnings (atom [])
              handler (fn [_]
                        {:status 200 :headers {"Content-Type" "text/event-stream"}
                         :body (reify protocols/StreamableResponseBody
                                 (write-body-to-stream [_ _ out]
                                   (with-open [^OutputStream out out]
                                     (.write out (utf8 text))
                                     (.flush out)
                                     (kill! cl))))})
              app (r/wrap-agui-state handler (assoc opts :client cl :warn #(swap! warnings conj %)))
              out (written (app (request "/x" (input client-keys "r1"))))]
          (is (= (fix client-keys (utf8 text) flags) out))
          ;; Each write goes to fixStream as it comes: the kill is found by closeStream.
          (is (re-find #"during closeStream" (str (first @warnings))))
          (is (= 1 (count @warnings)))))
      (testing "a sidecar that keeps dying: restarted :restarts times, then the rest goes as written, with one warning"
        (let [{:keys [out warnings]} (run #{2 3 4} (assoc opts :restarts 2))
              repaired (fix client-keys (utf8 (apply str (map #(str % "\n\n") (take 4 events)))) flags)]
          (is (= 3 (count warnings)) (pr-str warnings))
          (is (every? #(re-find restart-line %) (take 2 warnings)))
          (is (re-find #"^agui-state\.ring: fixStream failed on stream s\d+: agui-state sidecar exited .*; not restarted again: it was restarted 2 times in this response; the rest of this response goes out unrepaired$"
                       (str (last warnings))))
          (is (= (str repaired (apply str (map #(str % "\n\n") (drop 4 events)))) out)
              "repaired up to the third death, then as the server wrote it")))
      (testing "past :replay-limit, the new stream starts from the request's state and the first event: under :own the next snapshot is one add of /toolState, and the client's keys stand"
        (let [{:keys [out warnings logged]} (run #{3} (assoc opts :replay-limit 100))
              after (subs out (count (fix client-keys (utf8 head) flags)))
              state (client-state client-keys out)]
          (is (str/starts-with? out (fix client-keys (utf8 head) flags)))
          (is (= 1 (count warnings)) (pr-str warnings))
          (is (re-find #"restarted \(pid \d+\), stream s\d+ resumes from the request's state and the response's first event \(more than the replay limit, 100 bytes, were answered for\)$"
                       (str (first warnings))))
          (is (str/includes? after "{\"op\":\"add\",\"path\":\"/toolState\",\"value\":{\"search\":")
              "the snapshot went as one add of the namespace")
          (is (not (str/includes? after "STATE_SNAPSHOT")))
          (is (not-any? #(re-find #"passed" %) logged)
              "fed the run's RUN_STARTED first, the new stream reads the rest as one run: no FIRST_EVENT")
          (is (= (merge client-keys {"todos" ["milk"]
                                     "toolState" {"search" {"query" "café ☕" "run" "r1"} "raster-ops/dataset" "era5"}})
                 (select-keys state (concat (keys client-keys) ["todos" "toolState"])))
              "every delta applies (the strict applier), the client's keys stand, toolState is the server's")))
      (testing "the next request is repaired by the new sidecar"
        (let [app (r/wrap-agui-state (streaming (raw-sse "r2") 5) (assoc opts :client cl))]
          (is (= (fix client-keys (utf8 (raw-sse "r2")) flags)
                 (written (app (request "/x" (input client-keys "r2"))))))))
      (testing "a sidecar that refuses the stream: the response goes as it is"
        (let [warnings (atom [])
              app (r/wrap-agui-state (streaming (raw-sse "r3") 5)
                                     {:client cl :own ["not-a-pointer"] :warn #(swap! warnings conj %)})]
          (is (= (raw-sse "r3") (written (app (request "/x" (input client-keys "r3"))))))
          (is (re-find #"openStream failed.*-32602" (str (first @warnings)))))))))

(deftest streams-sharing-a-killed-sidecar-all-recover
  ;; Two responses on one sidecar, both past their first snapshot when it dies.
  ;; Stream ids start again at s1 in the new process, so b (s2 in the old one),
  ;; resuming first, gets s1 there: a (s1 in the old one), resuming while b is
  ;; still open, would land in b's stream if its calls followed the restart. Each
  ;; stream's calls are pinned to the process it was opened on (client/pinned):
  ;; a finds its sidecar gone, and resumes in a stream of its own.
  (with-open [cl (s/start-client)]
    (let [parked {"a" (promise) "b" (promise)}
          gates {"a" {3 (promise)} "b" {3 (promise) 4 (promise)}}
          b-parked-again (promise)
          warnings (atom [])
          handler (fn [req]
                    (let [in (json/read-str (slurp (:body req) :encoding "UTF-8"))
                          run-id (get in "runId")
                          evs (agent/events "t1" run-id)]
                      {:status 200 :headers {"Content-Type" "text/event-stream"}
                       :body (reify protocols/StreamableResponseBody
                               (write-body-to-stream [_ _ out]
                                 (with-open [^OutputStream out out]
                                   (doseq [[i e] (map-indexed vector evs)]
                                     (when-let [gate (get-in gates [run-id i])]
                                       (deliver (if (= i 3) (parked run-id) b-parked-again) true)
                                       (deref gate 60000 nil))
                                     (.write out (agent/sse-bytes e))
                                     (.flush out)))))}))
          app (r/wrap-agui-state handler (assoc opts :client cl :warn #(swap! warnings conj %)))
          before (c/process cl)
          ;; a opens first (s1), and b once a has stopped (s2).
          a (future (written (app (request "/x" (input client-keys "a")))))
          _ (is (true? (deref (parked "a") 60000 nil)) "a reached its fourth event")
          b (future (written (app (request "/x" (input client-keys "b")))))]
      (is (true? (deref (parked "b") 60000 nil)) "b reached its fourth event")
      (kill! cl)
      (deliver (get-in gates ["b" 3]) true)
      (is (true? (deref b-parked-again 60000 nil)) "b resumed on the new sidecar and stopped again")
      (deliver (get-in gates ["a" 3]) true)
      (let [a-out (deref a 60000 nil)]
        (deliver (get-in gates ["b" 4]) true)
        (doseq [[run-id out] [["a" a-out] ["b" (deref b 60000 nil)]]]
          (let [expected (fix client-keys (utf8 (raw-sse run-id)) flags)]
            (is (str/includes? out (str "\"run\":\"" run-id "\"")) "its own events")
            (is (not (str/includes? out (str "\"run\":\"" (if (= run-id "a") "b" "a") "\""))) "not the other's")
            (is (= expected out) run-id))))
      (is (= 2 (count @warnings)) (pr-str @warnings))
      (is (= #{"s1" "s2"} (set (map #(second (re-find #"during fixStream on stream (s\d+) " %)) @warnings)))
          "each stream resumed, in a stream of its own")
      (is (= 1 (count (distinct (map #(second (re-find #"restarted \(pid (\d+)\)" %)) @warnings))))
          "one new sidecar for both")
      (is (not (identical? before (c/process cl)))))))

(deftest a-client-that-goes-away-closes-the-sidecar-stream
  ;; Without resume: with it, the run goes on detached (agui-state.resume-test).
  (with-open [cl (s/start-client)]
    (let [app (r/wrap-agui-state (streaming (raw-sse "r1") 40) (assoc opts :client cl :resume false))
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

(def ^:private client-sse-limit
  "UTF-16 code units of one event past which @ag-ui/client fails the run, and
  the sidecar passes the event and the rest on unread (protocol/README.md §13
  SSE_BUFFER_LIMIT, §14): the sidecar's rule, which the middleware only obeys."
  (* 10 1024 1024))

(deftest an-event-that-never-ends-goes-through-unrepaired
  ;; Through Jetty and a real HTTP client, which reads as the bytes arrive: a
  ;; middleware that held the event would send nothing of it before its end.
  ;; The sidecar passes it on itself (fixStream's pending drops to 0): the
  ;; middleware holds no more than it is told to.
  (with-open [cl (s/start-client)]
    (let [limit (long client-sse-limit)
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
          (let [text (without-ids (.toString got "UTF-8"))]
            (is (str/starts-with? text fixed-head) "the head as fix writes it")
            (is (< -1 (.indexOf text "{\"op\":\"add\",\"path\":\"/todos\",\"value\":[]}")
                   (.indexOf text "{\"op\":\"add\",\"path\":\"/todos/-\",\"value\":\"milk\"}")
                   (.indexOf text "data: xxx"))
                "the append was mended: add /todos [] before it"))
          (is (empty? @warnings) "the middleware has nothing to say: the sidecar passed it"))
        (deliver release true)
        (is (= 200 (deref reading 60000 nil)) "the response completed")
        (is (= (fix client-keys (utf8 raw) flags) (without-ids (.toString got "UTF-8")))
            "the whole body is what fix writes for the whole raw body")
        (is (empty? @warnings))
        (is (= 0 (:streams (c/stats cl))) "the sidecar's stream was closed")
        (finally
          (deliver release true)
          (.stop server))))))
