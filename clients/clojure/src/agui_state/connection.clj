(ns agui-state.connection
  "The line agui-state.client talks over: the stdin and stdout of a sidecar
  process of the client's own, or a connection to the host's shared sidecar
  (agui-state.socket, protocol/README.md §2, \"One sidecar per host\"). Either
  way one reader thread hands each reply to the caller waiting on its id, and
  the end of the input (the process exited, the connection closed) fails every
  call pending on it. A connection is a map, a new one for each start or
  restart, compared with identical?."
  (:require [agui-state.socket :as socket]
            [clojure.data.json :as json]
            [clojure.string :as str])
  (:import (java.io BufferedReader BufferedWriter InputStream InputStreamReader IOException
                    OutputStream OutputStreamWriter)
           (java.nio.channels SocketChannel)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent TimeUnit)))

(set! *warn-on-reflection* true)

(defn- resolve-path [{:keys [path]}]
  (or path (System/getenv "AGUI_STATE_BIN") "agui-state"))

(defn- env-name [k] (if (keyword? k) (subs (str k) 1) (str k)))

(defn- reader-loop [conn]
  (let [{:keys [^BufferedReader reader status ended]} conn]
    (try
      (loop []
        (when-let [line (.readLine reader)]
          (when-not (str/blank? line)
            (let [msg (try (json/read-str line)
                           (catch Exception e
                             (binding [*out* *err*]
                               (println "agui-state client: unreadable line:" (.getMessage e)))
                             nil))
                  id (when (map? msg) (get msg "id"))]
              (when-let [p (and id (get (:pending @status) id))]
                (swap! status update :pending dissoc id)
                (deliver p msg))))
          (recur)))
      (catch IOException _ nil))
    ;; The input ended: the process is gone or going, or the connection closed.
    ;; Record how, and fail every pending call, atomically with respect to new
    ;; registrations.
    (let [how (ended)
          [old _] (swap-vals! status assoc :exit how :pending {})]
      (doseq [p (vals (:pending old))] (deliver p {:agui-state/exited how})))))

(defn- process-ended
  "How the process ended, once its stdout did: {:exit-status n}."
  [^Process process]
  (fn []
    (when-not (.waitFor process 5 TimeUnit/SECONDS)
      (.destroyForcibly process)
      (.waitFor process))
    {:exit-status (.exitValue process)}))

(defn- spawned
  "A process of the client's own, on its stdin and stdout; its stderr is the JVM's."
  [opts]
  (let [cmd (into [(resolve-path opts)] (map str (:args opts)))
        pb (doto (ProcessBuilder. ^java.util.List cmd)
             (.redirectError java.lang.ProcessBuilder$Redirect/INHERIT))
        _ (doseq [[k v] (:env opts)] (.put (.environment pb) (env-name k) (str v)))
        process (.start pb)]
    {:process process :in (.getInputStream process) :out (.getOutputStream process)
     :ended (process-ended process)}))

(defn- shared
  "A connection to the shared sidecar `settings` names (agui-state.socket/settings)."
  [settings opts]
  (let [{:keys [^SocketChannel channel] :as c}
        (socket/open settings (resolve-path opts) (:args opts) (:env opts))
        address (:text (:address settings))]
    (assoc c :address address
           :ended (fn [] (try (.close channel) (catch IOException _ nil)) {:address address}))))

(defn open
  "A connection for the client options `opts`: to the shared sidecar they name
  (agui-state.socket/settings), else to a process started from :path, :args
  and :env. Throws what starting or connecting throws."
  [opts]
  (let [settings (socket/settings opts)
        {:keys [^InputStream in ^OutputStream out] :as c}
        (if settings (shared settings opts) (spawned opts))
        conn (assoc (dissoc c :in :out)
                    :writer (BufferedWriter. (OutputStreamWriter. out StandardCharsets/UTF_8))
                    :reader (BufferedReader. (InputStreamReader. in StandardCharsets/UTF_8))
                    :status (atom {:pending {} :exit nil}))
        t (doto (Thread. ^Runnable #(reader-loop conn) "agui-state-reader")
            (.setDaemon true)
            (.start))]
    (assoc conn :thread t)))

(defn close
  "Ends the connection: the process's stdin closed, then it is waited for
  (destroyed past `timeout-ms`), and its exit status returned; or the socket
  closed (the shared sidecar releases the streams it opened, and goes on), and
  nil."
  [conn timeout-ms]
  (let [{:keys [^Process process ^BufferedWriter writer ^Thread thread channel]} conn]
    (locking writer (try (.close writer) (catch IOException _ nil)))
    (if channel
      (do (.close ^SocketChannel channel)
          (.join thread 10000)
          nil)
      (do (when-not (.waitFor process timeout-ms TimeUnit/MILLISECONDS)
            (.destroy process)
            (when-not (.waitFor process 2 TimeUnit/SECONDS)
              (.destroyForcibly process)
              (.waitFor process)))
          (.join thread 10000)
          (.exitValue process)))))

(defn describe
  "\"pid 1234\", or the shared sidecar's address: which sidecar, for a log line."
  [{:keys [^Process process address]}]
  (if process (str "pid " (.pid process)) address))

(defn alive?
  "Whether the sidecar may still answer: its process runs, or the connection is open."
  [{:keys [^Process process ^SocketChannel channel status]}]
  (if process
    (.isAlive process)
    (and (.isOpen channel) (nil? (:exit @status)))))

(defn abort!
  "Ends the connection at once, for a sidecar that hangs: the process killed
  (SIGKILL, which a stopped process obeys too), waited for a little; or the
  socket closed, since the shared sidecar is not one client's to end."
  [{:keys [^Process process ^SocketChannel channel]}]
  (if process
    (do (.destroyForcibly process) (.waitFor process 5 TimeUnit/SECONDS))
    (try (.close channel) (catch IOException _ nil)))
  nil)
