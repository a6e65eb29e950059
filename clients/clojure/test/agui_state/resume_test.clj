(ns agui-state.resume-test
  "Resume through agui-state.ring/wrap-agui-state (protocol/README.md §16) against
  the real binary, without a web server: the wrapped handler is called as an
  adapter calls it, its body written to a byte stream that may fail as a
  connection whose client left does. The run log is the sidecar's (its default
  store, memory). test/middleware/clojure-resume.test.ts drives the same through
  Jetty with the real ResumableHttpAgent and a relay that cuts the connection."
  (:require [agui-state.client :as c]
            [agui-state.ring :as r]
            [agui-state.ring-agent :as agent]
            [agui-state.test-support :as s]
            [clojure.data.json :as json]
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
  [state ^String raw]
  (let [f (doto (File/createTempFile "agui-state-resume" ".json") .deleteOnExit)]
    (spit f (json/write-str state))
    (let [p (.start (ProcessBuilder. ^java.util.List (into [(s/bin) "fix" "--state" (str f)] flags)))
          feed (future (with-open [in (.getOutputStream p)] (.write in (utf8 raw))))
          out (slurp (.getInputStream p) :encoding "UTF-8")]
      @feed
      (.waitFor p)
      out)))

(defn- input [thread-id state]
  (utf8 (json/write-str {"threadId" thread-id "runId" "r1" "state" state "messages" []})))

(defn- request
  ([uri body] (request uri body {}))
  ([uri ^bytes body headers]
   {:request-method :post :uri uri :headers (merge {"content-type" "application/json"} headers)
    :body (ByteArrayInputStream. body)}))

(defn- raw-sse [thread-id] (apply str (map #(str "data: " % "\n\n") (agent/events thread-id "r1"))))

(def ^:private opening
  "A resumable response's opening block (§16): the run's id number 0 alone."
  #"^id: [A-Za-z0-9_-]+\.0\.[A-Za-z0-9_-]+\n\n")

(defn- without-ids
  "The text with its opening block and `id:` lines taken out: what fix writes,
  when the ids are all the middleware added (§16)."
  [text]
  (str/replace (str/replace-first text opening "") #"(?m)^id: [^\n]*\n" ""))

(defn- ids [text] (map second (re-seq #"(?m)^id: ([^\n]*)$" text)))

(defn- counting
  "A handler writing `raw` an event at a time, flushing after each; `calls`
  counts its calls."
  [raw calls]
  (fn [_]
    (swap! calls inc)
    {:status 200 :headers {"Content-Type" "text/event-stream"}
     :body (reify protocols/StreamableResponseBody
             (write-body-to-stream [_ _ out]
               (with-open [^OutputStream out out]
                 (doseq [e (str/split raw #"(?<=\n\n)")]
                   (.write out (utf8 e))
                   (.flush out)))))}))

(defn- leaving
  "An OutputStream that takes `n` writes, then fails each one as Jetty's does
  once the client left; `got` holds what it took."
  [^ByteArrayOutputStream got n]
  (let [writes (atom 0)
        take! (fn [f] (if (> (swap! writes inc) n) (throw (IOException. "Broken pipe")) (f)))]
    (proxy [OutputStream] []
      (write
        ([b] (take! #(if (bytes? b) (.write got ^bytes b) (.write got (int b)))))
        ([bs off len] (take! #(.write got ^bytes bs (int off) (int len)))))
      (flush [] nil))))

(defn- written
  "The body of `response` as the adapter writes it, as text."
  [response]
  (let [out (ByteArrayOutputStream.)]
    (protocols/write-body-to-stream (:body response) response out)
    (.toString out "UTF-8")))

(deftest every-event-gets-an-id-and-the-rest-is-fix
  (with-open [cl (s/start-client)]
    (let [calls (atom 0)
          app (r/wrap-agui-state (counting (raw-sse "t1") calls) (assoc opts :client cl))
          out (written (app (request "/agent" (input "t1" client-keys))))
          blocks (remove str/blank? (str/split (str/replace-first out opening "") #"\n\n"))]
      (is (re-find opening out) "the opening block first")
      (is (= (fix client-keys (raw-sse "t1")) (without-ids out)) "with the ids out, exactly what fix writes")
      (is (seq blocks))
      (is (every? #(re-find #"^id: [A-Za-z0-9_-]+\.\d+\.[A-Za-z0-9_-]+\n" %) blocks) "an id first in every event")
      (is (apply distinct? (ids out)))
      (testing ":resume false: no ids, as before"
        (let [app (r/wrap-agui-state (counting (raw-sse "t1") calls) (assoc opts :client cl :resume false))]
          (is (= (fix client-keys (raw-sse "t1")) (written (app (request "/agent" (input "t1" client-keys))))))))
      (testing "a request that names no thread is filed too: it is rejoined by its ids, never reloaded (§16)"
        (let [body (utf8 (json/write-str {"runId" "r1" "state" client-keys}))
              out (written (app (request "/agent" body)))]
          (is (re-find opening out))
          (is (= (fix client-keys (raw-sse "t1")) (without-ids out))))))))

(deftest a-client-that-leaves-is-detached-and-its-rejoin-gets-the-rest
  (with-open [cl (s/start-client)]
    (let [calls (atom 0)
          raw (raw-sse "t2")
          logs (atom [])
          app (r/wrap-agui-state (counting raw calls) (assoc opts :client cl :log #(swap! logs conj %)))
          creds {"authorization" "Bearer alice" "cookie" "s=1"}
          response (app (request "/agent" (input "t2" client-keys) creds))
          got (ByteArrayOutputStream.)]
      (is (= "true" (get-in response [:headers "ag-ui-resumable"])) "the answer announces resume (§16)")
      ;; The third write fails: the client has the opening block and the first
      ;; reply only. The app's body still runs to its end, into the run log, and
      ;; nothing is thrown at it.
      (protocols/write-body-to-stream (:body response) response (leaving got 2))
      (is (= 1 @calls))
      (is (some #(re-find #"^agui-state\.ring: stream s\d+: the client left \(Broken pipe\); the run goes on for 30000 ms for a rejoin$" %) @logs))
      (let [before (.toString got "UTF-8")
            last-id (last (ids before))
            whole (fix client-keys raw)]
        (is (some? last-id) "the client got at least one event")
        (is (str/starts-with? whole (without-ids before)))
        (testing "the rejoin: the same request with Last-Event-ID gets exactly the rest, from the log"
          (let [rejoin (app (request "/agent" (input "t2" client-keys) (assoc creds "last-event-id" last-id)))
                rest (written rejoin)]
            (is (= 200 (:status rejoin)))
            (is (= "text/event-stream" (get-in rejoin [:headers "content-type"])))
            (is (= "true" (get-in rejoin [:headers "ag-ui-resumable"])))
            (is (= whole (str (without-ids before) (without-ids rest))) "no event twice, none missing")
            (is (not-any? #{last-id} (ids rest)))
            (is (= 1 @calls) "the handler was not called again")))
        (testing "a reload: POST <path>/connect gets the run from its start, with the prelude"
          (let [reload (written (app (request "/agent/connect" (input "t2" {}) creds)))]
            (is (str/includes? reload "\"type\":\"STATE_SNAPSHOT\""))
            (is (str/includes? reload "\"type\":\"MESSAGES_SNAPSHOT\""))
            (is (str/includes? reload "\"type\":\"RUN_FINISHED\""))
            (is (= 1 @calls))))
        (testing "another credential, none, another thread, a forged id: 410, one answer, the handler not called"
          ;; The credential is Authorization alone (the sidecar's default): the cookie is not one.
          (let [ask (fn [thread headers] (app (request "/agent" (input thread client-keys) headers)))
                refused [(ask "t2" (assoc creds "authorization" "Bearer mallory" "last-event-id" last-id))
                         (ask "t2" {"cookie" "s=1" "last-event-id" last-id})
                         (ask "t3" (assoc creds "last-event-id" last-id))
                         (ask "t2" (assoc creds "last-event-id" (str (subs last-id 0 (.lastIndexOf ^String last-id ".")) ".AAAAAAAAAAAAAAAA")))
                         (ask "t2" (assoc creds "last-event-id" "nonsense"))]]
            (is (= [410 410 410 410 410] (map :status refused)))
            (is (= 1 (count (set (map :body refused)))))
            (is (= "resume_unknown" (get-in (json/read-str (:body (first refused))) ["error" "code"])))
            (is (= 1 @calls))))
        (testing "a reload of a thread with no run: 204, empty"
          (let [none (app (request "/agent/connect" (input "no-run" {}) creds))]
            (is (= 204 (:status none)))
            (is (= "" (written none)))
            (is (= 1 @calls))))))))

(deftest a-client-cut-after-the-opening-block-rejoins-from-its-id
  ;; §16: the opening block is the first write, before the app's first event;
  ;; a client that has only it rejoins from its id (number 0) and gets every event.
  (with-open [cl (s/start-client)]
    (let [calls (atom 0)
          raw (raw-sse "t4")
          app (r/wrap-agui-state (counting raw calls) (assoc opts :client cl))
          creds {"authorization" "Bearer alice"}
          response (app (request "/agent" (input "t4" client-keys) creds))
          got (ByteArrayOutputStream.)]
      (protocols/write-body-to-stream (:body response) response (leaving got 1))
      (let [before (.toString got "UTF-8")
            id (first (ids before))]
        (is (re-matches opening before) "the first write is the opening block alone")
        (testing "another nonce with number 0 is refused"
          (is (= 410 (:status (app (request "/agent" (input "t4" client-keys)
                                            (assoc creds "last-event-id" (str (subs id 0 (dec (count id))) (if (str/ends-with? id "A") "B" "A")))))))))
        (let [rejoin (app (request "/agent" (input "t4" client-keys) (assoc creds "last-event-id" id)))
              rest (written rejoin)]
          (is (= 200 (:status rejoin)))
          (is (not (re-find opening rest)) "a rejoin's answer has no opening block of its own")
          (is (= (fix client-keys raw) (without-ids rest)) "every event, from the first")
          (is (= 1 @calls)))))))

(deftest without-resume-a-client-that-leaves-stops-the-app
  (with-open [cl (s/start-client)]
    (let [calls (atom 0)
          app (r/wrap-agui-state (counting (raw-sse "t1") calls) (assoc opts :client cl :resume false))
          response (app (request "/agent" (input "t1" client-keys)))]
      (is (thrown-with-msg? IOException #"Broken pipe"
                            (protocols/write-body-to-stream (:body response) response
                                                            (leaving (ByteArrayOutputStream.) 1))))
      (is (= 0 (:streams (c/stats cl))) "the sidecar's stream was closed")
      (testing "and a Last-Event-ID request is the app's: it is not answered from a log"
        (is (= (fix client-keys (raw-sse "t1"))
               (written (app (request "/agent" (input "t1" client-keys) {"last-event-id" "x"})))))
        (is (= 2 @calls))))))

(deftest a-detached-run-nobody-rejoins-is-cancelled-after-the-grace
  (with-open [cl (s/start-client {:args ["--detach-grace" "0.2"]})]
    (let [logs (atom [])
          release (promise)
          stopped (promise)
          raw (raw-sse "t4")
          handler (fn [_]
                    {:status 200 :headers {"Content-Type" "text/event-stream"}
                     :body (reify protocols/StreamableResponseBody
                             (write-body-to-stream [_ _ out]
                               (let [[head & more] (str/split raw #"(?<=\n\n)")]
                                 (try (.write ^OutputStream out (utf8 head))
                                      (.flush ^OutputStream out)
                                      (.write ^OutputStream out (utf8 (first more)))
                                      (.flush ^OutputStream out)
                                      ;; A hang guard, not a pause: the test releases it.
                                      (deref release 60000 nil)
                                      (doseq [e (rest more)] (.write ^OutputStream out (utf8 e)) (.flush ^OutputStream out))
                                      (deliver stopped :finished)
                                      (catch IOException e (deliver stopped (.getMessage e)))))))})
          app (r/wrap-agui-state handler (assoc opts :client cl :log #(swap! logs conj %)))
          response (app (request "/agent" (input "t4" client-keys)))
          writing (future (protocols/write-body-to-stream (:body response) response
                                                          (leaving (ByteArrayOutputStream.) 1)))
          cancelled? #(some (fn [l] (re-find #"nobody rejoined within the grace period; the app's response is cancelled" l)) @logs)]
      ;; The silent app learns nothing until it writes: the grace check calls the sidecar meanwhile.
      (is (loop [n 0] (cond (cancelled?) true (> n 3000) false :else (do (Thread/sleep 20) (recur (inc n)))))
          "the grace check found the run cancelled while the app was silent")
      (deliver release true)
      (is (= "the client went away, and nobody rejoined the run within the grace period" (deref stopped 60000 nil))
          "the app's next write threw")
      (deref writing 60000 nil)
      (is (= 0 (:streams (c/stats cl)))))))

(defn- silent-detached
  "A run of `thread-id` through wrap-agui-state on `cl` whose client leaves at
  once and whose app then writes two events and stays silent until `release`:
  the stream is detached, and its grace checks call the sidecar. Returns the
  writing future; `logs` gets the middleware's lines."
  [cl thread-id logs release]
  (let [handler (fn [_]
                  {:status 200 :headers {"Content-Type" "text/event-stream"}
                   :body (reify protocols/StreamableResponseBody
                           (write-body-to-stream [_ _ out]
                             (try (doseq [e (take 2 (str/split (raw-sse thread-id) #"(?<=\n\n)"))]
                                    (.write ^OutputStream out (utf8 e))
                                    (.flush ^OutputStream out))
                                  ;; A hang guard, not a pause: the test releases it.
                                  (deref release 60000 nil)
                                  (.write ^OutputStream out (utf8 "data: {}\n\n"))
                                  (catch IOException _ nil))))})
        app (r/wrap-agui-state handler (assoc opts :client cl :log #(swap! logs conj %)))
        response (app (request "/agent" (input thread-id client-keys)))]
    (future (protocols/write-body-to-stream (:body response) response (leaving (ByteArrayOutputStream.) 0)))))

(defn- logged? [logs re] (some #(re-find re %) @logs))

(defn- within
  "Whether (ok?) comes true within `ms`: a hang guard, never an assertion on time."
  [ms ok?]
  (loop [n 0] (cond (ok?) true (> n (quot (long ms) 20)) false :else (do (Thread/sleep 20) (recur (inc n))))))

(deftest a-hung-grace-check-stalls-no-other-stream
  ;; Two sidecars. The first is stopped (SIGSTOP) while its stream is detached: that
  ;; stream's grace check hangs, for up to its client's 60 s. The second stream's
  ;; checks must go on meanwhile, and learn that nobody rejoined it: on one shared
  ;; thread they would wait behind the hung call.
  (with-open [hung (s/start-client {:args ["--detach-grace" "0.2"] :timeout-ms 60000})
              cl (s/start-client {:args ["--detach-grace" "0.2"]})]
    (let [release (promise)
          [hung-logs logs] [(atom []) (atom [])]
          pid (.pid (c/process hung))
          signal (fn [sig] (.waitFor (.start (ProcessBuilder. ^java.util.List ["kill" sig (str pid)]))))
          a (silent-detached hung "h1" hung-logs release)]
      (try
        (is (within 20000 #(logged? hung-logs #"the client left")) "the first stream was detached")
        (signal "-STOP")
        ;; Its next check (every 50 ms once the app is silent) is then in flight, and hangs.
        (Thread/sleep 500)
        (let [b (silent-detached cl "h2" logs release)]
          (is (within 20000 #(logged? logs #"nobody rejoined within the grace period; the app's response is cancelled"))
              "the second stream's grace check ran while the first one's hung")
          (is (not (logged? hung-logs #"cancelled")) "the first stream's check still hangs")
          (deliver release true)
          (deref b 60000 nil))
        (finally
          (deliver release true)
          (.destroyForcibly (c/process hung))
          (signal "-CONT")
          (deref a 60000 nil))))))

(deftest failing-open-without-a-sidecar
  ;; A client whose sidecar cannot be started again once it dies.
  (with-open [cl (s/start-client)]
    (let [doomed (assoc-in cl [:opts :path] "/nonexistent/agui-state")
          calls (atom 0)
          warnings (atom [])
          app (r/wrap-agui-state (counting (raw-sse "t5") calls)
                                 (assoc opts :client doomed :warn #(swap! warnings conj %) :log (fn [_])))
          response (app (request "/agent" (input "t5" client-keys)))
          got (ByteArrayOutputStream.)]
      (protocols/write-body-to-stream (:body response) response (leaving got 1))
      (let [last-id (last (ids (.toString got "UTF-8")))
            p (c/process cl)]
        (is (some? last-id))
        (.destroyForcibly p)
        (.waitFor p)
        (testing "a request that cannot be classed (the sidecar is gone for good) goes to the app, with one line"
          (let [rejoin (app (request "/agent" (input "t5" client-keys) {"last-event-id" last-id}))]
            (is (= (raw-sse "t5") (written rejoin)))
            (is (= 2 @calls))
            (is (some #(re-find #"^agui-state\.ring: /agent: classifyRequest failed \(.*\); the request goes to the app$" %)
                      @warnings))))
        (testing "a stream whose sidecar is gone still completes, as the app wrote it"
          (is (= (raw-sse "t5") (written (app (request "/agent" (input "t5" client-keys))))))
          (is (= 3 @calls)))
        (is (every? #(re-find #"classifyRequest failed" %) @warnings) "one line for each request")))))

(deftest a-rejoin-the-sidecar-cannot-answer-gets-an-empty-410-or-204
  ;; A body past classifyRequest's bodyBytes (at most half the sidecar's
  ;; --max-message-bytes) is left out of rejoinStream, which then answers
  ;; without it. One within bodyBytes that JSON escapes past the message limit
  ;; fails rejoinStream (-32003, not -32007): the middleware fails open with one
  ;; line (§16), never calling the app.
  (with-open [cl (s/start-client {:args ["--max-message-bytes" "4096"]})]
    (let [calls (atom 0)
          warnings (atom [])
          app (r/wrap-agui-state (counting (raw-sse "t7") calls)
                                 (assoc opts :client cl :warn #(swap! warnings conj %) :log (fn [_])))
          big (utf8 (json/write-str {"threadId" "t7" "runId" "r1" "state" {"pad" (apply str (repeat 8000 "x"))}}))
          ;; 1,900 bytes, each escaped as \u0001 (6 bytes) in the call's JSON.
          escaped (utf8 (str "{\"threadId\":\"t7\",\"pad\":\"" (apply str (repeat 1900 (char 1))) "\"}"))
          rejoins [["/agent" {"last-event-id" "AAAAAAAAAAAA.1.AAAAAAAAAAA"} 410]
                   ["/agent/connect" {"authorization" "Bearer alice"} 204]]]
      (testing "a body past bodyBytes: left out, and the sidecar answers"
        (doseq [[uri headers status] rejoins]
          (testing uri
            (is (= status (:status (app (request uri big headers))))))))
      (is (empty? @warnings) (pr-str @warnings))
      (testing "a call past the message limit"
        (doseq [[uri headers status] rejoins]
          (testing uri
            (let [answer (app (request uri escaped headers))]
              (is (= status (:status answer)))
              (is (= "" (written answer)))
              (is (= {} (:headers answer)))))))
      (is (= 0 @calls))
      (is (= 2 (count @warnings)))
      (is (every? #(re-find #"^agui-state\.ring: /agent(/connect)?: rejoinStream failed \(.*maxMessageBytes.*\); answered (410|204) with an empty body$" %)
                  @warnings)
          (pr-str @warnings)))))

(deftest a-rejoin-of-a-run-that-breaks-off-is-broken-off-too
  (with-open [cl (s/start-client)]
    (let [events (str/split (raw-sse "t6") #"(?<=\n\n)")
          release (promise)
          handler (fn [_]
                    {:status 200 :headers {"Content-Type" "text/event-stream"}
                     :body (reify protocols/StreamableResponseBody
                             (write-body-to-stream [_ _ out]
                               (let [^OutputStream out out]
                                 (doseq [e (take 2 events)] (.write out (utf8 e)) (.flush out))
                                 ;; A hang guard, not a pause: the test releases it.
                                 (deref release 60000 nil)
                                 (.write out (utf8 (nth events 2)))
                                 (.flush out)
                                 (throw (IllegalStateException. "the app failed mid-run")))))})
          app (r/wrap-agui-state handler (assoc opts :client cl :log (fn [_])))
          response (app (request "/agent" (input "t6" client-keys)))
          got (ByteArrayOutputStream.)
          running (future (try (protocols/write-body-to-stream (:body response) response (leaving got 2))
                               (catch IllegalStateException e (.getMessage e))))]
      ;; The client took the opening block and the first event; the next write failed, so the run is detached.
      (is (loop [n 0] (cond (seq (ids (str/replace-first (.toString got "UTF-8") opening ""))) true (> n 3000) false
                            :else (do (Thread/sleep 20) (recur (inc n))))))
      ;; The rejoin through Jetty and a real HTTP client: the body's throw must
      ;; reach the client as a broken response, not as a clean end.
      (let [last-id (last (ids (str/replace-first (.toString got "UTF-8") opening "")))
            ^Server server (jetty/run-jetty app {:host "127.0.0.1" :port 0 :join? false})
            port (.getLocalPort ^ServerConnector (first (.getConnectors server)))
            out (ByteArrayOutputStream.)
            reading (future
                      (let [^HttpResponse response
                            (.send (HttpClient/newHttpClient)
                                   (-> (HttpRequest/newBuilder (URI. (str "http://127.0.0.1:" port "/agent")))
                                       (.header "Content-Type" "application/json")
                                       (.header "Last-Event-ID" last-id)
                                       (.POST (HttpRequest$BodyPublishers/ofByteArray (input "t6" client-keys)))
                                       .build)
                                   (HttpResponse$BodyHandlers/ofInputStream))
                            buf (byte-array 4096)]
                        (try (with-open [^InputStream in (.body response)]
                               (loop []
                                 (let [k (.read in buf)]
                                   (when (pos? k) (.write out buf 0 k) (recur)))))
                             [(.statusCode response) :ended]
                             (catch IOException _ [(.statusCode response) :broken]))))]
        (try
          (deliver release true)
          (is (= "the app failed mid-run" (deref running 60000 nil)) "the app's failure reached the adapter")
          (is (= [200 :broken] (deref reading 60000 nil))
              "the rejoin's answer breaks off: it never looks finished")
          (let [text (.toString out "UTF-8")]
            (is (= 2 (count (ids text))) "the two events after the id, the last the app wrote")
            (is (not (str/includes? text "RUN_FINISHED"))))
          (finally (.stop server)))))))
