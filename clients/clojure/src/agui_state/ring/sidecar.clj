(ns agui-state.ring.sidecar
  "The sidecar behind agui-state.ring/wrap-agui-state: a component that starts
  and stops it (start, stop), opening a stream on it, and a stream's way back
  when the sidecar dies in the middle of it (protocol/README.md §14)."
  (:require [agui-state.client :as client])
  (:import (clojure.lang ExceptionInfo)))

(set! *warn-on-reflection* true)

;;; The component

(def repair-call-ms
  "How long a call of the sidecar (openStream, fixStream, closeStream,
  detachStream, classifyRequest, rejoinStream) waits for its answer: one answers
  in well under a millisecond, so a call that takes 5 s means the sidecar hangs
  (stopped, swapped out). It is then ended (hung!) and the stream goes on
  unrepaired; 5 s leaves a loaded machine room and keeps the client's wait
  under 10 s (protocol/README.md §14). readRejoin waits by design: its limit
  counts from the end of its wait (agui-state.client/read-rejoin)."
  5000)

(defn sidecar-args
  "The command-line flags of a sidecar from its options: :store (`--store`:
  \"memory\", the sidecar's default, a redis:// URL that several processes
  share, or \"none\"), :detach-grace (`--detach-grace`, seconds), then :args
  as they are."
  [{:keys [store detach-grace args]}]
  (cond-> []
    (some? store) (into ["--store" (str store)])
    ;; The sidecar refuses a resume flag with --store none (a usage error): it has no effect there.
    (and (some? detach-grace) (not= "none" (str store))) (into ["--detach-grace" (str detach-grace)])
    (seq args) (into (map str args))))

(def ^:private warm-up
  "A stream of one event, fed once at start: the sidecar loads its stream
  pipeline on the first openStream (protocol/README.md §14), which the first
  response would otherwise wait for."
  "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"agui-state\",\"runId\":\"warm-up\"}\n\n")

(defrecord Sidecar [client]
  java.io.Closeable
  (close [_] (.close ^java.io.Closeable client)))

(defn start
  "A started sidecar for the middleware (a component: stop it with stop, or
  close it): its process, from :path, else AGUI_STATE_BIN, else agui-state on
  PATH, with the flags of sidecar-args and :env, its calls limited to
  repair-call-ms (:timeout-ms), and its stream pipeline loaded, so that the
  first response waits for neither. With :sidecar \"unix:PATH\" (else
  AGUI_STATE_SIDECAR), a connection to the host's shared sidecar instead,
  started there with those flags in start mode (:sidecar-start, else
  AGUI_STATE_SIDECAR_START=1; agui-state.client/start). Throws what starting
  it throws; :store, :detach-grace or :args with an address and no start mode
  throw before anything starts (client/check-sidecar), named as given here."
  [opts]
  (client/check-sidecar opts)
  (let [c (client/start (cond-> {:timeout-ms (:timeout-ms opts repair-call-ms)
                                 :args (sidecar-args opts)}
                          (:path opts) (assoc :path (:path opts))
                          (:env opts) (assoc :env (:env opts))
                          (string? (:sidecar opts)) (assoc :sidecar (:sidecar opts))
                          (some? (:sidecar-start opts)) (assoc :sidecar-start (:sidecar-start opts))))]
    (try (let [id (:stream-id (client/open-stream c {:framing "sse"}))]
           (client/fix-stream c {:stream-id id :text warm-up})
           (client/close-stream c id))
         (catch Exception e (.close ^java.io.Closeable c) (throw e)))
    (->Sidecar c)))

(defn stop
  "Ends the sidecar s (streams still on it go out unrepaired from there). Ending
  one that has ended is nothing."
  [s]
  (.close ^java.io.Closeable s)
  nil)

(defn lazily
  "A function giving the client of a sidecar started at its first call with
  `opts` (start), for a middleware given none: nothing starts before a request
  needs it, a start that fails is tried again by the next request, and the
  process ends with the JVM (its stdin closes). It belongs to the middleware
  that holds the function: no other shares it. Connected to the host's shared
  sidecar (:sidecar, AGUI_STATE_SIDECAR), the connection is the middleware's,
  the sidecar the host's. A bad address throws here, not at the first request."
  [opts]
  (client/check-sidecar opts)
  (let [held (atom nil)]
    (fn []
      (or @held
          (locking held
            (or @held (reset! held (:client (start opts)))))))))

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

(defn on
  "(f view), and when that call finds the sidecar hung (hung?), its process
  ended, or its connection to the shared sidecar closed (client/abort!), before
  the exception goes on: every stream on it then sees it gone, and the next
  stream starts a new one, or connects again."
  [view f]
  (try (f view)
       (catch ExceptionInfo e
         (when (hung? e) (client/abort! view))
         (throw e))))

(defn- restart-if-current!
  "Restarts c, unless another stream already did: `seen` (a view) is bound to
  the process or connection that failed, and only while it is still c's is it
  replaced, so that streams that all saw it die start one new sidecar (or
  connection), not one each in turn. It is ended first: a hung one would not
  exit when asked."
  [c seen]
  (locking c
    (when (identical? (client/connection seen) (client/connection c))
      (client/abort! seen)
      (client/restart c))))

(defn- open-on
  "openStream through a view pinned to c's current process (client/pinned):
  every later call of the stream goes through that view, so that none reaches
  another process, where the same id names another stream (§14). Returns the
  reply with :view (the stream, or its `pass`), or {:lost e :view v} when that
  process is gone."
  [c params]
  (let [v (client/pinned c)]
    (try (assoc (on v #(client/open-stream % params)) :view v)
         (catch ExceptionInfo e
           (if (lost? e) {:lost e :view v} (throw e))))))

(defn alive!
  "c, its sidecar restarted first if it is gone (unless another caller already
  did). Throws what starting it throws."
  [c]
  (let [v (client/pinned c)]
    (when-not (client/alive? v) (restart-if-current! c v)))
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
      (do (restart-if-current! c v)
          (let [v (client/pinned c)] [v (on v f)])))))

(defn open!
  "Opens a stream on c, restarting the sidecar first if it is gone, or once
  after an openStream that found it gone: the next request after a failure is
  repaired again. Returns openStream's reply with :view: :pass, or :stream-id
  :headers :replay-bytes and maybe :baseline :run :opening (protocol/README.md
  §14, §16); throws what the second try throws."
  [c params]
  (alive! c)
  (let [r (open-on c params)]
    (if-not (:lost r)
      r
      (do (restart-if-current! c (:view r))
          (let [r (open-on c params)]
            (if (:lost r) (throw (:lost r)) r))))))

(def replay-part
  "Characters of the replayed text per fixStream call: well under the sidecar's
  message limit however the text escapes in JSON."
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
  (restart-if-current! c view)
  (let [r (open-on c params)]
    (cond
      (:lost r) r
      (:pass r) (throw (ex-info (str "openStream passed the stream again: " (get-in r [:pass "message"])) r))
      :else
      (let [{v :view id :stream-id} r]
        (try (doseq [part (parts replay replay-part)]
               (on v #(client/fix-stream % {:stream-id id :text part})))
             r
             (catch ExceptionInfo e
               (if (lost? e) {:lost e :view v} (throw e))))))))
