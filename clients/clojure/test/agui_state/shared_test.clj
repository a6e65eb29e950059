(ns agui-state.shared-test
  "The host's shared sidecar (protocol/README.md §2, \"One sidecar per host\"):
  the address read from :sidecar or AGUI_STATE_SIDECAR and refused when made,
  clients sharing `serve --listen` over a Unix socket and loopback TCP, a
  connection that breaks failing its calls as a sidecar that exited, start mode
  starting one detached sidecar for clients that start at once, and the Ring
  middleware going on through a new connection when the shared sidecar is
  killed mid-stream. Every sidecar a test starts, or makes a client start, is
  killed at its end. test/middleware/clojure-shared.test.ts runs the same
  across Jetty processes with the real client."
  (:require [agui-state.client :as c]
            [agui-state.ring :as r]
            [agui-state.ring-agent :as agent]
            [agui-state.socket :as socket]
            [agui-state.test-support :as s]
            [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [ring.core.protocols :as protocols])
  (:import (java.io BufferedReader ByteArrayInputStream ByteArrayOutputStream File InputStreamReader
                    OutputStream)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)))

;;; Sidecars serving an address

(defn- temp-dir
  "A fresh directory under the system's temp dir (short: a socket path holds 103 bytes)."
  ^File []
  (.toFile (Files/createTempDirectory "agui-shared-" (make-array FileAttribute 0))))

(defn- proc-text
  "A /proc file's text, \"\" once the process is gone."
  [& parts]
  (try (String. (Files/readAllBytes (.toPath ^File (apply io/file "/proc" parts))) StandardCharsets/UTF_8)
       (catch java.io.IOException _ "")))

(defn- serving
  "The pids of the processes running `serve --listen address`, from /proc."
  [address]
  (doall
   (for [^File d (.listFiles (io/file "/proc"))
         :when (re-matches #"\d+" (.getName d))
         :let [argv (str/split (proc-text (.getName d) "cmdline") #"\u0000")]
         :when (some #(= ["--listen" address] %) (partition 2 1 argv))]
     (Long/parseLong (.getName d)))))

(defn- settled
  "The pids serving `address` once the starts that lost have exited (each a
  process starting up, then exit 3): at most one left, or after 10 s, a hang
  guard, whatever is left."
  [address]
  (loop [n 0]
    (let [pids (serving address)]
      (if (or (<= (count pids) 1) (>= n 200)) pids (do (Thread/sleep 50) (recur (inc n)))))))

(defn- gone?
  "Whether process `pid` has exited: no /proc entry, or a zombie. Not an empty
  cmdline: a process's memory goes before its files as it exits, so for a
  moment it has no cmdline and still accepts connections on its socket."
  [pid]
  (let [stat (proc-text (str pid) "stat")]
    (or (= "" stat) (= "Z" (first (str/split (subs stat (+ 2 (.lastIndexOf stat ")"))) #" "))))))

(defn- kill-all!
  "SIGKILL to every sidecar serving `address`; waits (10 s at most, a hang
  guard) until each has exited."
  [address]
  (let [pids (serving address)]
    (doseq [pid pids]
      (.waitFor (.start (ProcessBuilder. ^java.util.List ["kill" "-9" (str pid)]))))
    (loop [n 0] (when (and (not-every? gone? pids) (< n 200)) (Thread/sleep 50) (recur (inc n))))))

(defn- serve!
  "`agui-state serve --listen address`, started by the test; returns [process
  address], the address as it says it listens (a TCP port 0 resolved)."
  [address]
  (let [p (.start (doto (ProcessBuilder. ^java.util.List [(s/bin) "serve" "--listen" address])
                    (.redirectError java.lang.ProcessBuilder$Redirect/DISCARD)))
        line (.readLine (BufferedReader. (InputStreamReader. (.getInputStream p) StandardCharsets/UTF_8)))]
    [p (second (re-matches #"listening on (.*)" (str line)))]))

(defn- session-of
  "The session id of process `pid` (/proc/PID/stat's sixth field)."
  [pid]
  (let [stat (proc-text (str pid) "stat")]
    (Long/parseLong (nth (str/split (subs stat (+ 2 (.lastIndexOf stat ")"))) #" ") 3))))

(defn- shared-client [address & {:as more}]
  (s/start-client (merge {:sidecar address :timeout-ms 10000} more)))

;;; The address

(deftest the-address-is-checked-when-the-client-or-the-middleware-is-made
  (doseq [[bad why] [["unix:" #"needs a path"]
                     [(str "unix:/" (apply str (repeat 120 "a"))) #"over the 103"]
                     ["unix:/tmp/a\u0000b" #"NUL"]
                     ["tcp:10.1.2.3:4000" #"not a loopback address"]
                     ["tcp:127.0.0.1:0" #"port from 1 to 65535"]
                     ["tcp:127.0.0.1:70000" #"port from 1 to 65535"]
                     ["tcp:127.0.0.1" #"tcp:HOST:PORT"]
                     ["/run/agui.sock" #"expected unix:PATH or tcp:HOST:PORT"]]]
    (testing (pr-str bad)
      (let [d (s/thrown "start" :invalid-argument #(c/start {:path (s/bin) :sidecar bad}))]
        (is (re-find why (str (::s/msg d))) (::s/msg d))
        (is (str/includes? (str (::s/msg d)) (pr-str bad)) "the message quotes the address"))
      (s/thrown "wrap-agui-state" :invalid-argument #(r/wrap-agui-state identity {:sidecar bad}))
      (s/thrown "agui-state.ring/sidecar" :invalid-argument #(r/sidecar {:sidecar bad}))))
  (testing "good addresses, read as the sidecar reads --listen"
    (is (= {:kind :unix :path "/run/a.sock" :text "unix:/run/a.sock"} (socket/parse-address "unix:/run/a.sock")))
    (is (= [:tcp "::1" 9] ((juxt :kind :host :port) (socket/parse-address "tcp:[::1]:9"))))
    (is (= [:tcp "localhost" 80] ((juxt :kind :host :port) (socket/parse-address "tcp:localhost:80")))))
  (testing ":sidecar-start true with no address, and the sidecar's options beside a client"
    (s/thrown "start without an address" :invalid-argument #(c/start {:path (s/bin) :sidecar-start true}))
    (with-open [cl (s/start-client)]
      (let [e (try (r/wrap-agui-state identity {:client cl :sidecar "unix:/tmp/x.sock"}) nil
                   (catch clojure.lang.ExceptionInfo e (ex-data e)))]
        (is (= {:code "CONFLICTING_OPTIONS" :options [:sidecar]} e))))))

(deftest the-option-wins-over-the-environment
  (let [env (fn [m] (fn [k] (get m k)))
        read (fn [opts m] (with-redefs [socket/getenv (env m)]
                            (some-> (socket/settings opts) (update :address :path))))]
    (is (nil? (read {} {})) "neither: a sidecar of the client's own")
    (is (nil? (read {} {"AGUI_STATE_SIDECAR" ""})) "an empty variable is none")
    (is (= {:address "/e.sock" :start? false} (read {} {"AGUI_STATE_SIDECAR" "unix:/e.sock"})))
    (is (= {:address "/o.sock" :start? false} (read {:sidecar "unix:/o.sock"} {"AGUI_STATE_SIDECAR" "unix:/e.sock"})))
    (is (= {:address "/e.sock" :start? true}
           (read {} {"AGUI_STATE_SIDECAR" "unix:/e.sock" "AGUI_STATE_SIDECAR_START" "1"})))
    (is (= {:address "/e.sock" :start? false}
           (read {:sidecar-start false} {"AGUI_STATE_SIDECAR" "unix:/e.sock" "AGUI_STATE_SIDECAR_START" "1"})))
    (is (= {:address "/e.sock" :start? true} (read {:sidecar-start true} {"AGUI_STATE_SIDECAR" "unix:/e.sock"})))
    (is (thrown? clojure.lang.ExceptionInfo (read {} {"AGUI_STATE_SIDECAR" "tcp:8.8.8.8:53"}))
        "a bad address in the environment is said when the client is made too")))

;;; Clients on one sidecar

(deftest clients-share-one-sidecar-over-a-unix-socket-and-loopback-tcp
  (let [dir (temp-dir)
        [^Process p address] (serve! (str "unix:" dir "/s.sock"))]
    (try
      (with-open [a (shared-client address)
                  b (shared-client address)]
        (is (and (c/shared? a) (nil? (c/process a)) (= address (c/describe a))))
        (testing "a thread opened on one connection is the other's"
          (c/open-run a {:thread-id "t1" :state {"selectedLayer" "era5"}})
          (is (= {"selectedLayer" "era5"} (:state (c/get-state b "t1")))))
        (testing "a stream is the connection's that opened it: closing it releases the stream"
          (let [id (:stream-id (c/open-stream a {:framing "sse"}))]
            (is (= "" (:text (c/fix-stream b {:stream-id id :text "data: {\"type\":\"RUN_STA"}))))
            (.close a)
            ;; The sidecar learns of the close as its read of the connection ends: poll with
            ;; empty parts (which change nothing) until it has, 5 s at most (a hang guard).
            (loop [n 0]
              (when (and (< n 100) (try (c/fix-stream b {:stream-id id :text ""}) true
                                        (catch clojure.lang.ExceptionInfo _ false)))
                (Thread/sleep 50)
                (recur (inc n))))
            (is (= "closed" (get-in (s/thrown "after close" :unknown-stream
                                              #(c/fix-stream b {:stream-id id :text "RTED\"}\n\n"}))
                                    [:data "reason"])))))
        (is (.isAlive p) "closing a client leaves the shared sidecar running"))
      (finally (.destroyForcibly p) (.waitFor p))))
  (let [[^Process p address] (serve! "tcp:127.0.0.1:0")]
    (try
      (is (re-matches #"tcp:127\.0\.0\.1:\d+" (str address)))
      (with-open [a (shared-client address)]
        (c/open-run a {:thread-id "t2" :state {"on" "tcp"}})
        (is (= {"on" "tcp"} (:state (c/get-state a "t2"))))
        (is (pos? (long (:requests (c/stats a))))))
      (finally (.destroyForcibly p) (.waitFor p)))))

(deftest a-broken-connection-fails-its-calls-as-a-sidecar-that-exited
  (let [address (str "unix:" (temp-dir) "/s.sock")
        [^Process p] (serve! address)]
    (try
      (with-open [cl (shared-client address)]
        (c/open-run cl {:thread-id "t1" :state {}})
        (.waitFor (.start (ProcessBuilder. ^java.util.List ["kill" "-STOP" (str (.pid p))])))
        (let [pending (future (try (c/get-state cl "t1") (catch clojure.lang.ExceptionInfo e (ex-data e))))]
          (Thread/sleep 300)
          (is (not (realized? pending)) "a call is pending while the sidecar is stopped")
          (.destroyForcibly p)
          (.waitFor p)
          (is (= [:sidecar-exited address] ((juxt :kind :address) (deref pending 10000 :hung)))))
        (is (not (c/alive? cl)))
        (is (re-find #"the connection to the sidecar at unix:.* closed \(during stats\)"
                     (str (::s/msg (s/thrown "later" :sidecar-exited #(c/stats cl))))))
        (testing "without start mode, nobody answers a restart: it throws, and the client stays broken"
          (is (re-find #"no sidecar answers at .*AGUI_STATE_SIDECAR_START=1"
                       (str (::s/msg (s/thrown "restart" :sidecar-unreachable #(c/restart cl))))))
          (s/thrown "still" :sidecar-exited #(c/stats cl)))
        (testing "once a sidecar serves there again, restart connects to it; the thread went with the old one"
          (let [[^Process q] (serve! address)]
            (try (c/restart cl)
                 (is (c/alive? cl))
                 (is (= "never opened" (get-in (s/thrown "after" :unknown-thread #(c/get-state cl "t1"))
                                               [:data "reason"])))
                 (finally (.destroyForcibly q) (.waitFor q))))))
      (finally (.destroyForcibly p)))))

(deftest start-mode-starts-one-detached-sidecar-for-clients-that-start-at-once
  (let [address (str "unix:" (temp-dir) "/s.sock")]
    (try
      (let [starts (doall (for [_ (range 4)] (future (shared-client address :sidecar-start true))))
            clients (mapv deref starts)]
        (try
          (let [[pid :as pids] (settled address)]
            (is (= 1 (count pids)) "one sidecar serves; the other starts exited (3)")
            (is (not= (session-of pid) (session-of (.pid (java.lang.ProcessHandle/current))))
                "it runs in a session of its own, so that the JVM's signals do not reach it")
            (c/open-run (first clients) {:thread-id "t1" :state {"n" 1}})
            (is (= [{"n" 1} {"n" 1} {"n" 1}] (map #(:state (c/get-state % "t1")) (rest clients))))
            (run! #(.close ^java.io.Closeable %) clients)
            (is (= [pid] (serving address)) "it outlives the clients that started it")
            (testing "killed, it is started again by the next restart in start mode"
              (with-open [cl (shared-client address :sidecar-start true)]
                (kill-all! address)
                (s/thrown "after the kill" :sidecar-exited #(c/stats cl))
                (c/restart cl)
                (is (= 1 (count (settled address))))
                (is (not= [pid] (serving address)))
                (is (map? (c/stats cl))))))
          (finally (run! #(.close ^java.io.Closeable %) clients))))
      (finally (kill-all! address))))
  (testing "over loopback TCP too: two clients starting at once, one sidecar on the port"
    (let [port (with-open [s (java.net.ServerSocket. 0 1 (java.net.InetAddress/getLoopbackAddress))] (.getLocalPort s))
          address (str "tcp:127.0.0.1:" port)]
      (try
        (let [clients (mapv deref (doall (for [_ (range 2)] (future (shared-client address :sidecar-start true)))))]
          (try (is (= 1 (count (settled address))))
               (c/open-run (first clients) {:thread-id "t1" :state {"n" 2}})
               (is (= {"n" 2} (:state (c/get-state (second clients) "t1"))))
               (finally (run! #(.close ^java.io.Closeable %) clients))))
        (finally (kill-all! address)))))
  (testing "a start that fails says so at once, with its exit status"
    (let [address (str "unix:" (temp-dir) "/s.sock")
          d (s/thrown "start" :sidecar-unreachable
                      #(c/start {:path "/bin/false" :sidecar address :sidecar-start true}))]
      (is (re-find #"exited with status 1" (str (::s/msg d))) (::s/msg d)))))

;;; The middleware

(defn- fix
  "What `agui-state fix --state STATE FLAGS` writes for `raw`."
  [state ^bytes raw flags]
  (let [f (doto (File/createTempFile "agui-state-shared" ".json") .deleteOnExit)]
    (spit f (json/write-str state))
    (let [p (.start (ProcessBuilder. ^java.util.List (into [(s/bin) "fix" "--state" (str f)] flags)))
          feed (future (with-open [in (.getOutputStream p)] (.write in raw)))
          out (slurp (.getInputStream p) :encoding "UTF-8")]
      @feed
      (.waitFor p)
      out)))

(deftest the-middleware-goes-on-through-a-new-connection-when-the-shared-sidecar-dies
  (let [address (str "unix:" (temp-dir) "/s.sock")
        state {"selectedLayer" "era5"}
        events (agent/events "t1" "r1")
        raw (apply str (map #(str "data: " % "\n\n") events))
        warnings (atom [])
        ;; Two middleware on one shared sidecar, as two workers have; the first request starts it
        ;; (the binary from AGUI_STATE_BIN, as the runner sets it).
        mount #(r/wrap-agui-state %1 {:sidecar address :sidecar-start true :own ["/toolState"] :join-keys true
                                      :resume false :warn (partial swap! warnings conj) :log (constantly nil)})
        handler (fn [kill-at]
                  (fn [_]
                    {:status 200 :headers {"Content-Type" "text/event-stream"}
                     :body (reify protocols/StreamableResponseBody
                             (write-body-to-stream [_ _ out]
                               (with-open [^OutputStream out out]
                                 (doseq [[i e] (map-indexed vector events)]
                                   (when (= i kill-at) (kill-all! address))
                                   (.write out (agent/sse-bytes e))
                                   (.flush out)))))}))
        request #(hash-map :request-method :post :uri "/agent" :headers {"content-type" "application/json"}
                           :body (ByteArrayInputStream. (.getBytes (json/write-str {"threadId" "t1" "runId" "r1"
                                                                                    "state" state "messages" []})
                                                                   StandardCharsets/UTF_8)))
        written (fn [response] (let [o (ByteArrayOutputStream.)]
                                 (protocols/write-body-to-stream (:body response) response o)
                                 (.toString o "UTF-8")))
        expected (fix state (.getBytes raw StandardCharsets/UTF_8) ["--own" "/toolState" "--join-keys"])]
    (try
      (let [a (mount (handler 3)) b (mount (handler nil))]
        (is (= expected (written (b (request)))) "repaired through the shared sidecar")
        (is (= 1 (count (serving address))))
        (is (= expected (written (a (request)))) "killed mid-stream: the rest repaired as fix repairs the whole")
        (is (= 1 (count @warnings)) (pr-str @warnings))
        (is (re-matches (re-pattern (str "agui-state\\.ring: the sidecar \\(" address "\\) was lost during fixStream"
                                         " on stream s\\d+ \\(the connection closed\\); connected again \\("
                                         address "\\), stream s\\d+ resumes with its mirror rebuilt from the"
                                         " \\d+ bytes answered for"))
                        (str (first @warnings))))
        (is (= 1 (count (settled address))) "one sidecar started again")
        (is (= expected (written (b (request)))) "the other worker's next stream: repaired again"))
      (finally (kill-all! address)))))
