(ns agui-state.shared-probe-test
  "A connection to the shared sidecar counts as made once the sidecar has
  answered a request on it (protocol/README.md §2, \"One sidecar per host\"): a
  sidecar being killed still accepts connections until its socket closes.
  Stand-ins for such a sidecar are Unix sockets this JVM listens on: one that
  accepts and closes each connection unanswered (a sidecar on its way out),
  and one that accepts and never answers (a hung sidecar). The client must not
  hand back either connection as made."
  (:require [agui-state.client :as c]
            [agui-state.ring :as r]
            [agui-state.socket :as socket]
            [agui-state.test-support :as s]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [ring.core.protocols :as protocols])
  (:import (java.io ByteArrayInputStream ByteArrayOutputStream File IOException OutputStream)
           (java.net StandardProtocolFamily UnixDomainSocketAddress)
           (java.nio.channels ServerSocketChannel SocketChannel)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)))

(defn- socket-path
  "A path for a socket in a fresh directory (short: a socket path holds 103 bytes)."
  ^String []
  (str (.toFile (Files/createTempDirectory "agui-probe-" (make-array FileAttribute 0))) "/s.sock"))

(defn- listen
  "A Unix ServerSocketChannel on `path`, whose accepted connections a daemon
  thread hands to `take` (a function of the SocketChannel) until it closes."
  ^ServerSocketChannel [^String path take]
  (let [server (doto (ServerSocketChannel/open StandardProtocolFamily/UNIX)
                 (.bind (UnixDomainSocketAddress/of path)))]
    (doto (Thread. ^Runnable (fn [] (try (loop [] (take (.accept server)) (recur))
                                         (catch IOException _ nil))))
      (.setDaemon true)
      (.start))
    server))

(defn- stop!
  "Closes the listener and what `held` holds, and removes the socket file."
  [^ServerSocketChannel server held ^String path]
  (.close server)
  (run! #(.close ^SocketChannel %) @held)
  (io/delete-file path true))

(defn- serving
  "The pids of the processes running `serve --listen address`, from /proc."
  [address]
  (doall (for [^File d (.listFiles (io/file "/proc"))
               :when (re-matches #"\d+" (.getName d))
               :let [argv (try (str/split (slurp (io/file d "cmdline")) #"\u0000") (catch IOException _ []))]
               :when (some #(= ["--listen" address] %) (partition 2 1 argv))]
           (.getName d))))

(deftest a-connection-closed-before-the-answer-is-nobody-there
  (testing "without start mode: the client fails as for nobody at the address, not with a dead connection"
    (let [path (socket-path)
          server (listen path #(.close ^SocketChannel %))]
      (try
        (let [d (s/thrown "start" :sidecar-unreachable #(c/start {:path (s/bin) :sidecar (str "unix:" path)}))]
          (is (re-find #"no sidecar answers at unix:.*the connection closed before the sidecar answered"
                       (str (::s/msg d)))
              (::s/msg d))
          (is (not (:hung d))))
        (finally (stop! server (atom []) path)))))
  (testing "in start mode: a sidecar on its way out (its last connection closed unanswered) is nobody; one is started"
    (let [path (socket-path)
          address (str "unix:" path)
          held (atom [])
          server (listen path (fn [^SocketChannel ch] (swap! held conj ch)))
          ;; The listener goes first, then the connection it took: by the time the client reads the end
          ;; of it, nobody accepts at the address, as when a killed sidecar's socket closes.
          dying (future (loop [] (if (seq @held) (stop! server held path) (do (Thread/sleep 10) (recur)))))]
      (try
        (with-open [^java.io.Closeable cl (c/start {:path (s/bin) :sidecar address :sidecar-start true
                                                    :timeout-ms 10000})]
          (is (= 1 (count @held)) "the dying one took the first connection")
          (is (map? (c/stats cl)) "the connection handed back is a live one")
          (is (= 1 (count (serving address)))))
        (finally
          (future-cancel dying)
          (doseq [pid (serving address)] (.waitFor (.start (ProcessBuilder. ^java.util.List (vector "kill" "-9" pid)))))
          (io/delete-file path true))))))

(def ^:private stream
  "An event stream the handler writes, which a middleware that fails open passes as it is."
  (str "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t1\",\"runId\":\"r1\"}\n\n"
       "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t1\",\"runId\":\"r1\"}\n\n"))

(deftest a-sidecar-that-takes-the-connection-and-never-answers-is-hung
  (let [path (socket-path)
        address (str "unix:" path)
        held (atom [])
        server (listen path (fn [^SocketChannel ch] (swap! held conj ch)))]
    (try
      (testing "the client: :sidecar-unreachable, :hung; in start mode too, and no sidecar is started beside it"
        (doseq [start? [false true]]
          (let [d (s/thrown "start" :sidecar-unreachable
                            #(c/start {:path (s/bin) :sidecar address :sidecar-start start?}))]
            (is (:hung d) (pr-str d))
            (is (= (str "agui-state: at " address ", the sidecar took the connection and did not answer on it within "
                        socket/probe-wait-ms " ms")
                   (::s/msg d)))))
        (is (= 2 (count @held)) "each start took a connection there")
        (is (empty? (serving address))))
      (testing "the middleware fails open: the response goes as the handler wrote it"
        (let [warnings (atom [])
              app (r/wrap-agui-state
                   (fn [_] {:status 200 :headers {"Content-Type" "text/event-stream"}
                            :body (reify protocols/StreamableResponseBody
                                    (write-body-to-stream [_ _ out]
                                      (with-open [^OutputStream out out]
                                        (.write out (.getBytes ^String stream StandardCharsets/UTF_8)))))})
                   {:sidecar address :resume false :warn (partial swap! warnings conj) :log (constantly nil)})
              response (app {:request-method :post :uri "/agent" :headers {"content-type" "application/json"}
                             :body (ByteArrayInputStream. (.getBytes "{}" StandardCharsets/UTF_8))})
              out (ByteArrayOutputStream.)]
          (protocols/write-body-to-stream (:body response) response out)
          (is (= stream (.toString out "UTF-8")))
          (is (some #(str/includes? % "did not answer on it") @warnings) (pr-str @warnings))))
      (finally (stop! server held path)))))
