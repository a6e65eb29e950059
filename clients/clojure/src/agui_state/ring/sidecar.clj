(ns agui-state.ring.sidecar
  "The sidecar behind agui-state.ring/wrap-agui-state: the one a process shares,
  started when the middleware is made (or by start!) and ended by stop!; opening
  a stream on it; and a stream's way back when the sidecar dies in the middle of
  it (protocol/README.md §14)."
  (:require [agui-state.client :as client])
  (:import (clojure.lang ExceptionInfo)
           (java.util.concurrent TimeUnit)))

(set! *warn-on-reflection* true)

;;; The shared sidecar

(defonce ^:private shared (atom nil))

(defonce ^:private shared-args
  ;; The flags the shared sidecar is started with (configure!), kept by its restarts.
  (atom []))

(defn sidecar-args
  "The command-line flags of the sidecar from wrap-agui-state's options: :store
  (`--store`: \"memory\", the sidecar's default, a redis:// URL that several
  processes share, or \"none\") and :detach-grace (`--detach-grace`, seconds)."
  [{:keys [store detach-grace]}]
  (cond-> []
    (some? store) (into ["--store" (str store)])
    ;; The sidecar refuses a resume flag with --store none (a usage error): it has no effect there.
    (and (some? detach-grace) (not= "none" (str store))) (into ["--detach-grace" (str detach-grace)])))

(defn configure!
  "Sets the flags the shared sidecar starts with. Returns nil, or, when the
  sidecar already runs with other flags, a sentence saying so (the flags of the
  running one stand until stop!)."
  [args]
  (locking shared
    (let [before @shared-args]
      (reset! shared-args (vec args))
      (when (and @shared (not= before (vec args)))
        (str "the shared sidecar already runs with " (pr-str before) ", not " (pr-str (vec args))
             "; stop! it to start it with the new flags")))))

(def repair-call-ms
  "How long a call of the shared sidecar (openStream, fixStream, closeStream,
  detachStream, classifyRequest, rejoinStream) waits for its answer: one answers
  in well under a millisecond, so a call that takes 5 s means the sidecar hangs
  (stopped, swapped out). It is then ended (hung!) and the stream goes on
  unrepaired; 5 s leaves a loaded machine room and keeps the client's wait
  under 10 s (protocol/README.md §14). readRejoin waits by design: its limit
  counts from the end of its wait (agui-state.client/read-rejoin)."
  5000)

(defn default-client
  "The client that every wrap-agui-state without :client shares: one sidecar per
  process, started by the first call (wrap-agui-state makes it) from
  AGUI_STATE_BIN, else agui-state on PATH, with the flags of configure!. Each
  call has a limit (repair-call-ms), so that a sidecar that stops answering
  cannot hold a response (it fails open instead)."
  []
  (or @shared
      (locking shared
        (or @shared (reset! shared (client/start {:timeout-ms repair-call-ms :args @shared-args}))))))

(defn running
  "The shared client if it was started and not stopped, else nil; starts nothing."
  [] @shared)

(def ^:private warm-up
  "A stream of one event, fed once at start: the sidecar loads its stream
  pipeline on the first openStream (protocol/README.md §14), which the first
  response would otherwise wait for."
  "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"agui-state\",\"runId\":\"warm-up\"}\n\n")

(defonce ^:private warmed (atom nil)) ; the process whose pipeline start! loaded

(defn start!
  "The shared sidecar started if it does not run, and its stream pipeline
  loaded, so that the first response waits for neither. Returns its client;
  throws what starting it throws."
  []
  (let [c (default-client)
        p (client/process c)]
    (when-not (identical? p @warmed)
      (let [id (:stream-id (client/open-stream c {:framing "sse"}))]
        (client/fix-stream c {:stream-id id :text warm-up})
        (client/close-stream c id))
      (reset! warmed p))
    c))

(defn stop!
  "Ends the shared sidecar, if one runs, and returns whether one did. Streams
  still open on it fail open; the next stream starts a new sidecar."
  []
  (let [c (locking shared (let [c @shared] (reset! shared nil) c))]
    (when c (.close ^java.io.Closeable c))
    (some? c)))

;;; Losing it

(defn lost?
  "Whether an exception from a call says the sidecar behind it is gone: it
  exited, or it did not answer within the client's :timeout-ms (and is ended).
  The streams it held are gone with it."
  [e]
  (boolean (#{:sidecar-exited :timeout} (:kind (ex-data e)))))

(defn hung?
  "Whether an exception from a call says the sidecar did not answer within the
  client's :timeout-ms."
  [e]
  (= :timeout (:kind (ex-data e))))

(defn end!
  "Ends the process p at once (SIGKILL, which a stopped process obeys too), and
  waits a little for it to go: a hung sidecar is not asked to exit."
  [^Process p]
  (.destroyForcibly p)
  (.waitFor p 5 TimeUnit/SECONDS))

(defn on
  "(f view), and when that call finds the sidecar hung (hung?), its process
  ended (end!) before the exception goes on: every stream on it then sees it
  gone, and the next stream starts a new one."
  [view f]
  (try (f view)
       (catch ExceptionInfo e
         (when (hung? e) (end! (client/process view)))
         (throw e))))

(defn- restart-if-current!
  "Restarts c, unless another stream already did: `seen` is the process that
  failed, and only while it is still c's process is it replaced, so that
  streams that all saw it die start one new sidecar, not one each in turn. It
  is ended first: a hung one would not exit when asked."
  [c ^Process seen]
  (locking c
    (when (identical? seen (client/process c))
      (end! seen)
      (client/restart c))))

(defn- open-on
  "openStream through a view pinned to c's current process (client/pinned):
  every later call of the stream goes through that view, so that none reaches
  another process, where the same id names another stream (§14). Returns
  {:view :stream-id}, and :run :opening :headers for a resumable run, or {:lost
  e :view v} when that process is gone."
  [c params]
  (let [v (client/pinned c)]
    (try (let [{:keys [stream-id run opening headers]} (on v #(client/open-stream % params))]
           (cond-> {:view v :stream-id stream-id} run (assoc :run run :opening opening :headers headers)))
         (catch ExceptionInfo e
           (if (lost? e) {:lost e :view v} (throw e))))))

(defn alive!
  "c, its sidecar restarted first if it is gone (unless another caller already
  did). Throws what starting it throws."
  [c]
  (let [p (client/process c)]
    (when-not (.isAlive p) (restart-if-current! c p)))
  c)

(defn call!
  "(f v) on a view v pinned to c's process, the sidecar restarted first if it is
  gone, and once more after a call that found it gone (unless another caller
  already restarted it). Returns [v (f v)]: a rejoin's reads go to the process
  that holds its read. Throws what the second try throws."
  [c f]
  (alive! c)
  (let [v (client/pinned c)
        r (try [v (on v f)] (catch ExceptionInfo e (if (lost? e) e (throw e))))]
    (if (vector? r)
      r
      (do (restart-if-current! c (client/process v))
          (let [v (client/pinned c)] [v (on v f)])))))

(defn open!
  "Opens a stream on c, restarting the sidecar first if it is gone, or once
  after an openStream that found it gone: the next request after a failure is
  repaired again. Returns {:view :stream-id}, and :run, :opening (the id block
  to write first) and :headers (to add to the response's head) when the stream
  was filed as a resumable run (params' :resume, protocol/README.md §16); throws
  what the second try throws."
  [c params]
  (alive! c)
  (let [r (open-on c params)]
    (if-not (:lost r)
      r
      (do (restart-if-current! c (client/process (:view r)))
          (let [r (open-on c params)]
            (if (:lost r) (throw (:lost r)) r))))))

(def replay-part
  "Characters of the replayed text per fixStream call: well under
  --max-message-bytes (64 MiB) however the text escapes in JSON."
  (* 1024 1024))

(defn- parts
  "s in pieces of at most n characters (one more where a piece would end
  between the two halves of a surrogate pair: fixStream takes whole characters)."
  [^CharSequence s n]
  (let [len (.length s)]
    (loop [from 0, acc []]
      (if (>= from len)
        acc
        (let [to (min len (+ from (long n)))
              to (if (and (< to len) (Character/isHighSurrogate (.charAt s (dec to)))) (inc to) to)]
          (recur to (conj acc (str (.subSequence s from to)))))))))

(defn reopen!
  "After the sidecar behind `view` was lost in the middle of a stream: restarts
  it (unless another stream already did), opens the stream again with the same
  `params` and feeds it `replay`, dropping what comes back. With the text the
  old stream answered for, the new one holds the very mirror the old one held
  (the pipeline is deterministic, §14), and the rest of
  the response is repaired as if nothing had happened. With :resume the new
  stream is a new run, its log holding the replay under new ids: the ids the
  client gets from there on rejoin it, an older one is unknown. Returns {:view
  :stream-id :run}, or {:lost e :view v} when the new sidecar is gone too (the caller
  decides whether to try again). Throws what else fails (a sidecar that cannot
  start, a refusal)."
  [c view params ^CharSequence replay]
  (restart-if-current! c (client/process view))
  (let [r (open-on c params)]
    (if (:lost r)
      r
      (let [{v :view id :stream-id} r]
        (try (doseq [part (parts replay replay-part)]
               (on v #(client/fix-stream % {:stream-id id :text part})))
             r
             (catch ExceptionInfo e
               (if (lost? e) {:lost e :view v} (throw e))))))))
