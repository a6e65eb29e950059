(ns agui-state.client
  "Client for the agui-state sidecar: JSON-RPC 2.0 over the child's stdin/stdout,
  or over a connection to the host's shared sidecar (agui-state.socket), one
  JSON message per line.

  Keys. Params are Clojure maps; their top-level keys may be kebab-case keywords
  (:thread-id -> \"threadId\", :tool-state -> \"toolState\", :if-version ->
  \"ifVersion\") or strings, which are sent as they are. A nil param means \"not
  given\" and is left out, except :value (diffState), which is JSON data: nil sends
  null there, as Python's None and Go's nil do. Everything below the top level
  (state, tool-state maps, ops, values) is sent as data, nil as null: string keys
  as they are, keyword keys by their full text (:raster-ops/dataset ->
  \"raster-ops/dataset\", never just \"dataset\").
  Results: only the result map's own keys become kebab-case keywords
  (:version :delta :events :skipped :state :thread-id :run-id ...). Everything
  inside them keeps the JSON's string keys exactly, so state keys such as
  \"raster-ops/dataset\", \"a~b\" or \"key with spaces\" round-trip unchanged and the
  events can be forwarded as they are. Error :data keeps string keys too.

  Collections. :remove, :ops and a :path of segments take any collection (vector,
  list, set, lazy seq); a string (where a pointer is not also allowed), a map or a
  scalar there throws ex-info :kind :invalid-argument, naming the function and the
  param, before anything is sent.

  Thread safety: one client may be shared by any number of threads. Writes are
  serialized by a lock; a reader thread hands each response to the caller waiting
  on its id, so replies may arrive in any order."
  (:require [agui-state.connection :as connection]
            [agui-state.socket :as socket]
            [clojure.data.json :as json]
            [clojure.string :as str])
  (:import (java.io BufferedWriter Closeable IOException)
           (java.util.concurrent.atomic AtomicLong)))

(set! *warn-on-reflection* true)

;;; Keys

(defn- spelled
  "f, remembering what it gave for each key. Every call spells its params' names and
  its result's keys: with the regular expressions run anew each time, that cost more
  than encoding the request (docs/benchmarks.md, B18c). The keys are the protocol's
  names, a few dozen; past 4096 (a sidecar that makes keys up) they are no longer kept."
  [f]
  (let [seen (java.util.concurrent.ConcurrentHashMap.)]
    (fn [k]
      (or (when (some? k) (.get seen k))
          (let [v (f k)]
            (when (and (some? k) (some? v) (< (.size seen) 4096)) (.put seen k v))
            v)))))

(def ^:private camel
  (spelled (fn [k]
             (if (keyword? k)
               (let [[head & more] (str/split (name k) #"-")]
                 (apply str head (map str/capitalize more)))
               k))))

(def ^:private kebab-keyword
  (spelled (fn [^String s]
             (keyword (str/lower-case (str/replace s #"([a-z0-9])([A-Z])" "$1-$2"))))))

(defn- json-key [k]
  (cond (keyword? k) (subs (str k) 1)   ; full text: :a/b -> "a/b"
        (nil? k) (throw (IllegalArgumentException. "JSON object keys may not be nil"))
        :else (str k)))

(def ^:private data-params
  "Params that are JSON data themselves, where nil is the value null rather than
  \"not given\". Only diffState's value: every other param whose schema admits null
  (openRun's and normalize's state) has a better meaning when left out."
  #{"value"})

(defn- wire-params [params]
  (into {} (for [[k v] params
                 :let [wire (camel k)]
                 :when (or (some? v) (contains? data-params wire))]
             [wire v])))

(defn- result-keys [r]
  (if (map? r) (into {} (for [[k v] r] [(kebab-keyword k) v])) r))

;;; Errors

(def ^:private kinds
  {-32001 :unknown-thread, -32002 :patch-failed, -32003 :limit-exceeded,
   -32004 :version-conflict, -32005 :unknown-activity, -32006 :unknown-stream,
   -32007 :resume-unknown, -32008 :unknown-read, -32602 :invalid-params})

(defn- rpc-error [method {:strs [code message data]}]
  (ex-info (str "agui-state " method ": " message " (" code ")")
           {:type :agui-state/error, :code code, :message message, :data data,
            :kind (get kinds code :rpc-error), :method method}))

(defn- exited-error
  "The sidecar is gone: its process exited (`ended` {:exit-status}), or the
  connection to the shared sidecar closed ({:address}), which is the same to
  the caller: what lived there (threads it opened, streams) is to be opened
  again. Either way :kind :sidecar-exited."
  [method {:keys [exit-status address]}]
  (ex-info (str (if address
                  (str "agui-state: the connection to the sidecar at " address " closed")
                  (str "agui-state sidecar exited with exit status " exit-status))
                (when method (str " (during " method ")"))
                "; call (restart client), then openRun each thread with its state")
           (cond-> {:type :agui-state/error, :kind :sidecar-exited, :exit-status exit-status,
                    :method method}
             address (assoc :address address))))

;;; The client

(defn- close-timeout-ms [opts] (:close-timeout-ms opts 5000))

(defrecord Client [conn opts ^AtomicLong ids]
  Closeable
  (close [_] (connection/close @conn (close-timeout-ms opts))))

(defn check-sidecar
  "Throws, as start would, when the options (or AGUI_STATE_SIDECAR) name a bad
  address for the shared sidecar, or :sidecar-start true names none, or when
  they give a started sidecar's flags (:args; a middleware's :store and
  :detach-grace) with an address and no start mode (socket/check-flags); for a
  middleware that starts its client later. Returns opts."
  [opts] (socket/check-flags (socket/settings opts) opts) opts)

(defn start
  "Starts the sidecar, or connects to the shared one, and returns a client
  (java.io.Closeable: use with-open). Options: :path (else env AGUI_STATE_BIN,
  else agui-state on PATH), :args (extra command-line args), :env (extra
  environment), :timeout-ms (per call; default none), :close-timeout-ms (how
  long close waits before destroying; 5000).
  The host's shared sidecar (protocol/README.md §2): :sidecar \"unix:PATH\" or
  \"tcp:127.0.0.1:PORT\" (else env AGUI_STATE_SIDECAR) connects to it instead
  of starting a process; :sidecar-start true (else AGUI_STATE_SIDECAR_START=1)
  starts it there, detached, when nobody answers (`serve --listen ADDRESS
  --exit-idle 60000`, and :args). A bad address throws :kind
  :invalid-argument, and so do :args with an address and no start mode (:code
  \"CONFLICTING_OPTIONS\": no sidecar is started for them); nobody answering,
  a start the sidecar refuses (exit 2), or one that took the connection and did
  not answer (hung; :hung true), :kind :sidecar-unreachable. Closing the
  client closes its connection, which releases its streams; the sidecar goes on."
  ([] (start {}))
  ([opts]
   (check-sidecar opts)                 ; a bad address is said here, before anything starts
   (->Client (atom (connection/open opts)) opts (AtomicLong.))))

(defn process
  "The java.lang.Process currently behind the client; nil when it is connected
  to a shared sidecar."
  ^Process [client] (:process @(:conn client)))

(defn connection
  "The connection behind the client now (to a process, or to the shared
  sidecar), a value to compare with identical?: a new one after each restart."
  [client] @(:conn client))

(defn shared?
  "Whether the client is connected to a shared sidecar rather than a process of its own."
  [client] (some? (:channel (connection client))))

(defn describe
  "The sidecar behind the client, for a log line: \"pid 1234\", or the shared
  sidecar's address."
  [client] (connection/describe (connection client)))

(defn alive?
  "Whether the sidecar behind the client may still answer: its process runs, or
  its connection is open."
  [client] (connection/alive? (connection client)))

(defn abort!
  "Ends the connection behind the client at once, for a sidecar that hangs: its
  process killed (SIGKILL, which a stopped process obeys too), or the socket
  closed (the shared sidecar is not one client's to end). Every call pending on
  it, and every later one, fails :sidecar-exited."
  [client] (connection/abort! (connection client)))

(defn pinned
  "A view of client bound to the process (or connection) behind it now: its
  calls go to that one only, and once it is gone they throw :kind
  :sidecar-exited, even after a restart of client has started another. Streams
  and threads live in one process, and their ids start again in a new one; a
  connection to the shared sidecar releases its streams when it closes
  (protocol/README.md §2, §14): a stream's calls made through the view never
  reach another stream of the same id. The view shares client's request ids;
  do not restart or close it (restart or close client)."
  [client]
  (->Client (atom @(:conn client)) (:opts client) (:ids client)))

(defn restart
  "Ends the current process (if it still runs: as close does, waiting up to
  :close-timeout-ms for it to exit once its stdin ends) and starts a fresh one;
  connected to a shared sidecar, closes the connection and connects again
  (starting the sidecar in start mode when nobody answers). Threads live in
  the process: openRun each thread again with its state afterwards."
  [client]
  (locking (:conn client)               ; two restarts at once start one process each, in turn
    (connection/close @(:conn client) (close-timeout-ms (:opts client)))
    (reset! (:conn client) (connection/open (:opts client))))
  client)

(defn call
  "Sends one request and waits for its response, at most `timeout-ms` (default
  the client's :timeout-ms; nil waits for ever). Returns the result with its
  top-level keys as kebab-case keywords; throws ex-info (see the namespace doc)."
  ([client method params] (call client method params (:timeout-ms (:opts client))))
  ([client method params timeout-ms]
   (let [conn @(:conn client)
         {:keys [^BufferedWriter writer status]} conn
         id (.incrementAndGet ^AtomicLong (:ids client))
         line (json/write-str {"jsonrpc" "2.0" "id" id "method" method
                               "params" (wire-params params)}
                              :key-fn json-key :escape-slash false)
         p (promise)
         st (swap! status (fn [s] (if (:exit s) s (assoc-in s [:pending id] p))))]
     (when-let [exit (:exit st)] (throw (exited-error method exit)))
     (try
       (locking writer (.write writer ^String line) (.write writer "\n") (.flush writer))
       (catch IOException _ nil))          ; the reader reports the exit to p
     (let [msg (if timeout-ms (deref p timeout-ms ::timeout) @p)]
       (cond
         (= msg ::timeout)
         (do (swap! status update :pending dissoc id)
             (throw (ex-info (str "agui-state " method ": no response in " timeout-ms " ms")
                             {:type :agui-state/error, :kind :timeout, :method method
                              :timeout-ms timeout-ms})))
         (contains? msg :agui-state/exited) (throw (exited-error method (:agui-state/exited msg)))
         (contains? msg "error") (throw (rpc-error method (get msg "error")))
         :else (result-keys (get msg "result")))))))

(defn- thread-params [p] (if (string? p) {:thread-id p} p))

;;; Arguments

(defn- kind-of [v]
  (cond (string? v) "a string" (map? v) "a map" :else (.getName (class v))))

(defn- check-colls
  "Throws, before anything is sent, when a param that the protocol documents as an
  array (protocol/openrpc.json) is given a map (one op where :ops are meant, which
  would go as an object), a string (where a pointer is not also allowed) or
  anything else that is not a collection. The ex-info names the function and the
  param as the caller wrote it; its data has :kind :invalid-argument. `specs` maps
  each such param's protocol name to what it holds, and to :pointer when a pointer
  string is allowed too (PointerOrPath). nil (not given) is left to the sidecar."
  [fn-name params specs]
  (doseq [[k v] params
          :let [[items pointer] (get specs (camel k))]
          :when (and items (some? v)
                     (not (and pointer (string? v)))
                     (or (map? v) (not (instance? java.util.Collection v))))]
    (throw (ex-info (str "agui-state " fn-name ": " (pr-str k) " must be "
                         (when pointer "a pointer string or ") "a collection of " items
                         ", not " (kind-of v))
                    {:type :agui-state/error, :kind :invalid-argument, :function fn-name,
                     :param k, :value-class (class v)})))
  params)

(def ^:private ops-spec {"ops" ["ops (maps)"]})
(def ^:private path-spec {"path" ["segments (strings or integers)" :pointer]})

;;; One wrapper per method of protocol/openrpc.json (protocol/README.md §6, §10).
;;; Each takes the params map and returns the result map (see the namespace doc).

(defn open-run
  "{:thread-id :run-id :state :namespace :tool-state :snapshot :if-version}"
  [client params] (call client "openRun" params))

(defn diff-tool-state
  "{:thread-id, :tool-state (whole map) | :set (map) and/or :remove (keys), :if-version}"
  [client params]
  (call client "diffToolState" (check-colls "diff-tool-state" params {"remove" ["keys (strings)"]})))

(defn apply-ops
  "{:thread-id :ops :atomic :if-version}; ops are maps such as
  {:op \"add\" :path \"/todos/-\" :value \"milk\"}, :path a pointer or a vector of raw segments."
  [client params] (call client "applyOps" (check-colls "apply-ops" params ops-spec)))

(defn normalize
  "{:ops :state}: pure, touches no thread."
  [client params] (call client "normalize" (check-colls "normalize" params ops-spec)))

(defn diff-state
  "{:thread-id :value :path :if-version}; :value is required, and nil sends null."
  [client params] (call client "diffState" (check-colls "diff-state" params path-spec)))

(defn get-state
  "{:thread-id :path}, or just the thread id. Returns {:version :state}."
  [client params] (call client "getState" (check-colls "get-state" (thread-params params) path-spec)))

(defn activity-snapshot
  "{:thread-id :message-id :activity-type :content :replace :if-version}: creates the
  activity or replaces its type and content. Returns {:version :events}, one
  ACTIVITY_SNAPSHOT."
  [client params] (call client "activitySnapshot" params))

(defn apply-activity-ops
  "{:thread-id :message-id :ops :activity-type :atomic :if-version}: applyOps on the
  activity's content. Returns {:version :delta :skipped :events}."
  [client params] (call client "applyActivityOps" (check-colls "apply-activity-ops" params ops-spec)))

(defn diff-activity
  "{:thread-id :message-id :content :activity-type :if-version}: sets the content,
  creating the activity if needed. Returns {:version :delta :events}."
  [client params] (call client "diffActivity" params))

(defn get-activity
  "{:thread-id :message-id}. Returns {:version :activity-type :content}."
  [client params] (call client "getActivity" params))

(defn close-thread
  "{:thread-id}, or just the thread id. Returns {:closed bool}."
  [client params] (call client "closeThread" (thread-params params)))

(defn escape-pointer
  "{:path [segments]}, or just the vector of segments (strings, or non-negative
  integers written in decimal). Returns {:pointer \"/a~1b/0\"}."
  [client params]
  (call client "escapePointer"
        (check-colls "escape-pointer" (if (map? params) params {:path params})
                     {"path" ["segments (strings or integers)"]})))

(defn parse-pointer
  "{:pointer \"/a~1b/0\"}, or just the pointer. Returns {:path [\"a/b\" \"0\"]}: raw
  string segments, no index conversion."
  [client params]
  (call client "parsePointer" (if (map? params) params {:pointer params})))

;;; Stream methods (protocol/README.md §14): the repair `agui-state fix` does, fed
;;; part by part. agui-state.ring/wrap-agui-state is built on them.

(defn- wire-resume
  "openStream's :resume with its own keys spelled as the protocol names them
  (:thread-id -> \"threadId\"), since below the top level keys go as they are;
  :headers and :messages stay data."
  [params]
  (if (map? (:resume params))
    (update params :resume wire-params)
    params))

(defn open-stream
  "{:request :response :own :snapshots :join-keys :resume :lifecycle}: a response to
  repair (protocol/README.md §14). :request {\"method\" \"path\" \"headers\"
  \"body\"} is the request as received (its path with the query, its headers
  [name value] pairs, its body as text, left out when it was not kept whole),
  :response {\"status\" \"headers\"} the app's response head; the repair policy
  of `fix --own` (pointers), `--snapshots` (\"pass\" or \"delta\") and
  `--join-keys`, and `--lifecycle` (:lifecycle \"pass\", the default, or
  \"repair\"); :resume false turns resume off for the stream; :resync true
  when the client may hold more than the request's state (a stream opened
  again on a new sidecar without its replay). The sidecar
  decides the rest (the framing, the baseline, the headers). Returns {:pass
  {\"code\" \"message\"}} when the response is not one to repair, else
  {:stream-id :headers :replay-bytes}, and :baseline (why the request's state
  was not used), :run and :opening (the id block to write first) when it is a
  resumable run: :headers are the complete [name value] pairs of the
  response's head. The older form, {:state :framing :resume {...}}, is still
  taken."
  [client params]
  (call client "openStream" (wire-resume (check-colls "open-stream" params {"own" ["pointers (strings)"]}))))

(defn fix-stream
  "{:stream-id :text}: the next part of the stream as the server wrote it (whole
  characters). Returns {:text :findings :passed :mended :discarded :kept
  :pending :head}: the repaired text of every event that part completes, their
  findings (protocol/README.md §13, string keys, each with its \"outcome\"),
  those counted by outcome, how many UTF-8 bytes at the end of the text given
  so far no reply has answered for yet (:pending), and, once, how many bytes
  from the start hold the stream's RUN_STARTED (:head); once the
  stream is detached (detach-stream), :text is \"\" and :cancel says whether to
  stop the app. An unknown, closed, evicted or idle stream throws :kind
  :unknown-stream."
  [client params] (call client "fixStream" params))

(defn close-stream
  "{:stream-id :broken}, or just the stream id. Returns {:text :findings :summary
  :ended}: the rest of the output, the findings of the events it completes, the
  whole stream's counts (string keys, as the protocol names them), and whether
  the sidecar ended the run itself in :text (the closes and a RUN_ERROR with
  code INCOMPLETE_STREAM: the stream stopped inside a run, under
  :lifecycle \"repair\"): write :text, then end the response cleanly. :broken
  true says the app's response broke off rather than ended: a resumable run
  then ends as cancelled."
  [client params] (call client "closeStream" (if (map? params) params {:stream-id params})))

;;; Resume (protocol/README.md §16): a run that outlives its client's connection,
;;; and the rejoin that brings the client back. wrap-agui-state is built on them.

(defn detach-stream
  "{:stream-id}, or just the stream id: the client left in the middle of a
  resumable stream. Returns {:grace-ms}: keep feeding the app's output with
  fix-stream (its :text is \"\"), at least every :grace-ms (with :text \"\" when
  the app wrote nothing), until a reply's :cancel is true; then stop the app and
  close-stream. 0: cancel now (the stream is not resumable)."
  [client params] (call client "detachStream" (if (map? params) params {:stream-id params})))

(defn classify-request
  "{:method :path :headers :paths :resume}: what a request is (protocol/README.md
  §16), its headers the [name value] pairs as received, :paths and :resume the
  middleware's options as the user gave them. Returns {:kind :handled
  :body-bytes}: :handled false, the app's, untouched; else \"rejoin\" or
  \"reload\" (answer it with rejoin-stream, never the app) or \"forward\" (the
  app's, its body teed up to :body-bytes for open-stream)."
  [client params]
  (call client "classifyRequest" (check-colls "classify-request" params {"headers" ["[name value] pairs"]
                                                                         "paths" ["paths (strings)"]})))

(defn rejoin-stream
  "{:request {\"method\" \"path\" \"headers\" \"body\"}}: a request that rejoins a run
  or reloads a thread, as received (its headers [name value] pairs, its body as
  text); the sidecar reads the rest from it. Returns {:read-id :status
  :headers}: answer with that status and those headers, then read-rejoin until
  :done. Nothing to rejoin (unknown, expired, forged, another thread, path or
  credential) throws :kind :resume-unknown, whose (:data (ex-data e)) holds the
  answer to write exactly: \"status\", \"headers\" and \"body\". (The older
  params, {:thread-id :path :authorization :cookie :last-event-id}, are still
  taken.)"
  [client params] (call client "rejoinStream" params))

(defn read-rejoin
  "{:read-id :wait-ms}, or just the read id. Returns {:text :done :end}: the next
  events (SSE with their ids, at most one page) to write to the client as they
  are, waiting up to :wait-ms (else the sidecar's default, which a server should
  leave to it) for one; once :done, :end says how the run ended (\"finished\":
  end the response cleanly; anything else: break it off). An unknown read
  throws :kind :unknown-read. It waits by design: the client's :timeout-ms
  counts from the end of the wait (:wait-ms, else the sidecar's cap, 30,000)."
  [client params]
  (let [params (if (map? params) params {:read-id params})]
    (call client "readRejoin" params
          (some-> (:timeout-ms (:opts client)) (+ (long (:wait-ms params 30000)))))))

(defn close-rejoin
  "{:read-id}, or just the read id: the rejoin's client went away. Returns {:closed true}."
  [client params] (call client "closeRejoin" (if (map? params) params {:read-id params})))

(defn stats
  "Returns {:threads :state-bytes :requests :uptime-ms :limits :version :evicted
  :activities :streams :streams-evicted :runs :run-bytes :runs-evicted :reads};
  :limits keeps the protocol's names as string keys (\"maxOps\", \"maxThreads\", ...)."
  [client] (call client "stats" {}))

(defn discover
  "rpc.discover: the OpenRPC document (protocol/openrpc.json with its examples),
  top-level keys as keywords (:openrpc :info :methods :components ...)."
  [client] (call client "rpc.discover" {}))
