(ns agui-state.socket
  "The shared sidecar's transport (protocol/README.md §2, \"One sidecar per
  host\"): a connection to `agui-state serve --listen ADDRESS`, which every
  worker of a host shares, instead of a process of the client's own. The
  address is the :sidecar option, else AGUI_STATE_SIDECAR: `unix:PATH` or
  `tcp:HOST:PORT` (HOST a loopback address). In start mode (:sidecar-start,
  else AGUI_STATE_SIDECAR_START=1) a client that finds nobody there starts the
  sidecar itself, detached, and connects once it answers. agui-state.client
  speaks JSON-RPC over the streams this gives, as over a child's stdio."
  (:require [clojure.java.io :as io]
            [clojure.string :as str])
  (:import (java.io File InputStream IOException OutputStream)
           (java.net InetSocketAddress SocketTimeoutException StandardProtocolFamily UnixDomainSocketAddress)
           (java.nio ByteBuffer)
           (java.nio.channels Selector SelectionKey SocketChannel)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent TimeUnit)))

(set! *warn-on-reflection* true)

;;; The address

(def max-socket-path-bytes
  "The longest socket path every Unix takes (sun_path: 108 bytes on Linux, 104
  on macOS and the BSDs, the terminating NUL included), as the sidecar holds it."
  103)

(defn- bad [^String text problem]
  (throw (ex-info (str "agui-state: the sidecar address " (pr-str text) " is not one: " problem)
                  {:type :agui-state/error, :kind :invalid-argument, :param :sidecar, :value text})))

(defn- loopback? [^String host]
  (or (= host "localhost") (= host "::1") (boolean (re-matches #"(?i)(::ffff:)?127(\.\d{1,3}){3}" host))))

(defn parse-address
  "{:kind :unix :path} or {:kind :tcp :host :port} (and :text, as given) from
  `unix:PATH` or `tcp:HOST:PORT`, read as the sidecar reads --listen, port 0
  aside (a client connects to a port, it does not pick one); ex-info :kind
  :invalid-argument saying what is wrong otherwise."
  [text]
  (when-not (string? text) (bad (str text) "expected a string, unix:PATH or tcp:127.0.0.1:PORT"))
  (let [^String text text]
    (cond
      (str/starts-with? text "unix:")
      (let [path (subs text 5)
            bytes (alength (.getBytes path StandardCharsets/UTF_8))]
        (cond (= "" path) (bad text "unix: needs a path, such as unix:/run/agui-state/sidecar.sock")
              (str/includes? path "\u0000") (bad text "a socket path cannot hold a NUL character")
              (> bytes max-socket-path-bytes)
              (bad text (str "the socket path is " bytes " bytes, over the " max-socket-path-bytes
                             " a Unix socket's name can hold; pick a shorter one"))
              :else {:kind :unix :path path :text text}))

      (str/starts-with? text "tcp:")
      (let [[_ v6 host port] (re-matches #"(?:\[([0-9A-Fa-f:.]+)\]|([^:\[\]\s]+)):(\d{1,5})" (subs text 4))
            host (or v6 host)
            port (some-> port parse-long)]
        (cond (or (nil? port) (> (long port) 65535) (zero? (long port)))
              (bad text "expected tcp:HOST:PORT with a port from 1 to 65535")
              ;; The sidecar serves every thread's state and run: it never listens beyond the host.
              (not (loopback? host))
              (bad text (str host " is not a loopback address; the sidecar listens on this host only"
                             " (use unix:PATH, or tcp:127.0.0.1:PORT)"))
              :else {:kind :tcp :host host :port port :text text}))

      :else (bad text "expected unix:PATH or tcp:HOST:PORT"))))

(def ^:private getenv
  "System/getenv, a var so that the tests of the settings can stand in for the environment."
  (fn [^String k] (System/getenv k)))

(defn settings
  "The shared sidecar a client's options name, or nil for a sidecar of its own:
  {:address (parse-address's) :start? bool}. :sidecar wins over
  AGUI_STATE_SIDECAR, :sidecar-start (true or false) over
  AGUI_STATE_SIDECAR_START (\"1\"). A bad address throws here, when the client
  or the middleware is made; so does :sidecar-start true with no address."
  [{:keys [sidecar sidecar-start]}]
  (let [text (if (some? sidecar) sidecar (not-empty (getenv "AGUI_STATE_SIDECAR")))
        start? (if (some? sidecar-start) (boolean sidecar-start) (= "1" (getenv "AGUI_STATE_SIDECAR_START")))]
    (cond text {:address (parse-address text) :start? start?}
          (true? sidecar-start)
          (throw (ex-info (str "agui-state: :sidecar-start needs the address of the shared sidecar:"
                               " :sidecar \"unix:PATH\", or AGUI_STATE_SIDECAR")
                          {:type :agui-state/error, :kind :invalid-argument, :param :sidecar-start}))
          :else nil)))

(defn check-flags
  "Throws ex-info (:code \"CONFLICTING_OPTIONS\") when `opts` give flags of a
  sidecar the client starts (:store, :detach-grace, :args) and `settings`
  name an address with no start mode (protocol/README.md §2, \"One sidecar per
  host\"): no sidecar is started here, so they would reach none, and the one
  at the address keeps the flags it was started with. Said when the client or
  the middleware is made, as a bad address is."
  [settings opts]
  (let [given (cond-> []
                (some? (:store opts)) (conj ":store")
                (some? (:detach-grace opts)) (conj ":detach-grace")
                (seq (:args opts)) (conj (str ":args " (pr-str (vec (map str (:args opts)))))))
        one? (= 1 (count given))]
    (when (and settings (not (:start? settings)) (seq given))
      (throw (ex-info (str "agui-state: " (str/join " and " given) (if one? " gives" " give")
                           " the flags of a sidecar this client starts, but with an address ("
                           (:text (:address settings)) ") and no start mode no sidecar is started here; drop "
                           (if one? "it" "them") ", or set start mode (:sidecar-start true, or"
                           " AGUI_STATE_SIDECAR_START=1)")
                      {:type :agui-state/error, :kind :invalid-argument, :code "CONFLICTING_OPTIONS"
                       :options (vec (filter #(some? (get opts %)) [:store :detach-grace :args]))})))))

;;; The connection

(defn- channel-streams
  "An InputStream and an OutputStream on `ch`, used by one reader thread and
  one writer at a time. Not Channels/newInputStream: on a SocketChannel in
  blocking mode its reads and writes take the channel's one blocking lock, so
  a read that waits for a reply would hold every write back (JDK 17)."
  [^SocketChannel ch]
  {:in (proxy [InputStream] []
         (read
           ([] (let [b (byte-array 1)]
                 (loop [] (case (.read ch (ByteBuffer/wrap b))
                            -1 -1, 0 (recur), (bit-and 0xff (aget b 0))))))
           ([bs] (.read ^InputStream this ^bytes bs 0 (alength ^bytes bs)))
           ([bs off len] (if (zero? (long len))
                           0
                           (loop [] (let [n (.read ch (ByteBuffer/wrap ^bytes bs (int off) (int len)))]
                                      (if (zero? n) (recur) n))))))
         (close [] (.close ch)))
   :out (proxy [OutputStream] []
          (write
            ([b] (if (bytes? b)
                   (.write ^OutputStream this ^bytes b 0 (alength ^bytes b))
                   (.write ^OutputStream this (byte-array [(unchecked-byte b)]) 0 1)))
            ([bs off len] (let [buf (ByteBuffer/wrap ^bytes bs (int off) (int len))]
                            (while (.hasRemaining buf) (.write ch buf)))))
          (close [] (.close ch)))})

(def probe-wait-ms
  "How long a new connection waits for the answer to its probe: a sidecar
  answers stats in well under a millisecond, so one that took the connection
  and says nothing for this long is hung (stopped, say), and waiting longer
  would not help."
  5000)

(def ^:private probe-line
  "The one request a new connection carries before it counts as made: id 0,
  which none of the client's own calls has (they count from 1, an AtomicLong's
  incrementAndGet in agui-state.client/call)."
  (.getBytes "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"stats\"}\n" StandardCharsets/UTF_8))

(defn- probe!
  "Asks one stats on the new connection `ch` and reads its one-line answer,
  which is dropped: the client's reader, made after this, never sees it
  (nothing else is asked yet, so nothing else can follow it). A sidecar being
  killed still accepts connections until its socket closes (protocol/README.md
  §2, \"One sidecar per host\"): a connection counts as made only once the
  sidecar has answered on it. Throws an IOException when the connection closes
  first (nobody there), a SocketTimeoutException when probe-wait-ms pass
  without the answer (a hung sidecar). A selector bounds the wait: a blocking
  SocketChannel's reads heed no socket timeout."
  [^SocketChannel ch]
  (let [closed "the connection closed before the sidecar answered"]
    (try
      (let [out (ByteBuffer/wrap probe-line)]
        (while (.hasRemaining out) (.write ch out)))
      (.configureBlocking ch false)
      (with-open [sel (Selector/open)]  ; closing it deregisters ch, which may then block again
        (.register ch sel SelectionKey/OP_READ)
        (let [buf (ByteBuffer/allocate 4096)
              deadline (+ (System/nanoTime) (* 1000000 (long probe-wait-ms)))]
          (loop []
            (let [left (quot (- deadline (System/nanoTime)) 1000000)]
              (when (<= left 0)
                (throw (SocketTimeoutException. (str "the sidecar took the connection and did not answer on it"
                                                     " within " probe-wait-ms " ms"))))
              (.select sel left)
              (.clear (.selectedKeys sel))
              (.clear buf)
              (let [n (.read ch buf)]
                (cond (neg? n) (throw (IOException. closed))
                      (and (pos? n) (= 10 (.get buf (dec n)))) nil
                      :else (recur)))))))
      (.configureBlocking ch true)
      (catch SocketTimeoutException e (throw e))
      ;; A reset or a broken pipe is the same end as EOF: the sidecar went before it answered.
      (catch IOException e
        (throw (if (= closed (.getMessage e)) e (IOException. (str closed " (" (.getMessage e) ")") e)))))))

(defn- try-connect
  "A SocketChannel connected to `address` once the sidecar answered on it
  (probe!), or the IOException that says nobody answers; a
  SocketTimeoutException says a sidecar took the connection and hangs."
  [{:keys [kind path host port]}]
  (let [[ch at] (if (= kind :unix)
                  [(SocketChannel/open StandardProtocolFamily/UNIX) (UnixDomainSocketAddress/of ^String path)]
                  [(SocketChannel/open) (InetSocketAddress. ^String host (int port))])
        ^SocketChannel ch ch]
    (try (.connect ch at) (probe! ch) ch
         (catch IOException e (.close ch) e))))

(def start-wait-ms
  "How long a client in start mode waits for the sidecar it started to answer
  (a Node process takes well under a second; several workers starting at once
  on a busy host, longer) before it gives up as for a sidecar that died."
  10000)

(def exit-idle-ms
  "The --exit-idle of a sidecar a client starts: it ends a minute after its
  last worker's connection closed (protocol/README.md §2)."
  60000)

(defn- setsid
  "The setsid program, when the host has one: the sidecar then runs in a
  session of its own, so that a signal to the worker's process group (a
  terminal's Ctrl-C, a process manager stopping the worker) does not reach it."
  []
  (some (fn [dir] (let [f (io/file dir "setsid")] (when (.canExecute f) (str f))))
        (concat (some-> (System/getenv "PATH") (str/split #":")) ["/usr/bin" "/bin"])))

(defn- command
  "The sidecar a client starts: `binary serve --listen ADDRESS --exit-idle
  60000`, then `args` (the client's last, so that one given there holds)."
  [binary address args]
  (into [(str binary) "serve" "--listen" (:text address) "--exit-idle" (str exit-idle-ms)] (map str args)))

(defn- shell-line
  "`cmd` as a shell takes it, for a message that shows the command to run."
  [cmd]
  (str/join " " (map #(if (re-matches #"[\w@%+=:,./-]+" %) % (str "'" (str/replace % "'" "'\\''") "'")) cmd)))

(defn- spawn!
  "Starts `cmd` (command's), detached: its own session, stdin, stdout and
  stderr on /dev/null, so that it outlives the JVM, which neither waits for it
  nor ends it. Returns its Process."
  ^Process [cmd env]
  (let [cmd (concat (some-> (setsid) vector) cmd)
        null (File. "/dev/null")
        pb (doto (ProcessBuilder. ^java.util.List (vec cmd))
             (.redirectInput null)
             (.redirectOutput java.lang.ProcessBuilder$Redirect/DISCARD)
             (.redirectError java.lang.ProcessBuilder$Redirect/DISCARD))]
    (doseq [[k v] env] (.put (.environment pb) (if (keyword? k) (name k) (str k)) (str v)))
    (.start pb)))

(defn- unreachable [address ^Exception cause why]
  (ex-info (str "agui-state: no sidecar answers at " (:text address) " (" (.getMessage cause) ")" why)
           {:type :agui-state/error, :kind :sidecar-unreachable, :address (:text address)}
           cause))

(defn- hung
  "A sidecar that took the connection and did not answer the probe: it is not
  replaced (it may serve other workers, and is not this client's to end), and
  the client fails open as for a call it does not answer (§14)."
  [address ^Exception cause]
  (ex-info (str "agui-state: at " (:text address) ", " (.getMessage cause))
           {:type :agui-state/error, :kind :sidecar-unreachable, :address (:text address), :hung true}
           cause))

(def ^:private refused
  "serve --listen's exit status for a command line it refuses (a bad flag, a
  path that is not a socket; src/cli/exit.ts): every start would meet it."
  2)

(def ^:private served-already
  "serve --listen's exit status when a live sidecar serves the socket already:
  another start won, and the client connects to it."
  3)

(defn- started
  "Spawns the sidecar and connects once it answers, at most start-wait-ms. A
  start that lost to another worker's (exit 3, \"a sidecar is serving there
  already\") or ended (exit 0) waits for the one that serves; one whose
  command line was refused (exit 2) ends the wait at once, as does any other
  failure: starting again would meet the same."
  [address binary args env]
  (let [cmd (command binary address args)
        p (spawn! cmd env)
        deadline (+ (System/nanoTime) (* 1000000 (long start-wait-ms)))]
    (loop []
      (let [r (try-connect address)
            status (when-not (.isAlive p) (.exitValue p))]
        (cond
          (instance? SocketChannel r) r
          (instance? SocketTimeoutException r) (throw (hung address r))
          (= refused status)
          (throw (unreachable address r (str "; the sidecar started there refused its command line (exit 2): "
                                             (shell-line cmd))))
          (and status (not (#{0 served-already} status)))
          (throw (unreachable address r (str "; the sidecar started there exited with status " status
                                             " (run `" (shell-line cmd) "` to see why)")))
          (> (System/nanoTime) deadline)
          (throw (unreachable address r (str "; the sidecar started there did not answer within "
                                             start-wait-ms " ms")))
          :else (do (.waitFor p 50 TimeUnit/MILLISECONDS) (recur)))))))

(defn open
  "Connects to the sidecar at `address` ({:address :start?} from settings): in
  start mode, starting it first when nobody answers (the binary, its extra
  flags and environment as a spawned sidecar's). A connection counts once the
  sidecar answered on it (probe!). Returns {:in :out :channel}; throws ex-info
  :kind :sidecar-unreachable when nobody answers (or, in start mode, when the
  one it started does not), and with :hung true when a sidecar took the
  connection and did not answer on it within probe-wait-ms."
  [{:keys [address start?]} binary args env]
  (let [r (try-connect address)]
    (cond (instance? SocketChannel r) (assoc (channel-streams r) :channel r)
          (instance? SocketTimeoutException r) (throw (hung address r))
          start? (let [ch (started address binary args env)] (assoc (channel-streams ch) :channel ch))
          :else (throw (unreachable address r (str "; start one with `agui-state serve --listen " (:text address)
                                                   "`, or let the first worker start it (:sidecar-start true,"
                                                   " or AGUI_STATE_SIDECAR_START=1)"))))))
