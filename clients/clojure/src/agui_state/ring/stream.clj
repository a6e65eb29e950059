(ns agui-state.ring.stream
  "The OutputStream of agui-state.ring/wrap-agui-state: what the handler writes
  goes to the sidecar event by event (fixStream, protocol/README.md §14), and
  what comes back to the client; the sidecar brought back when it dies in the
  middle (agui-state.ring.sidecar/reopen!)."
  (:require [agui-state.client :as client]
            [agui-state.ring.pool :as pool]
            [agui-state.ring.sidecar :as sidecar]
            [clojure.string :as str])
  (:import (java.io ByteArrayOutputStream IOException OutputStream)
           (java.nio ByteBuffer CharBuffer)
           (java.nio.charset CharsetDecoder CodingErrorAction StandardCharsets)
           (java.util.concurrent Executors ScheduledExecutorService ScheduledFuture ThreadFactory
                                 TimeUnit)
           (java.util.concurrent.atomic AtomicBoolean)))

(set! *warn-on-reflection* true)

(defn- sse-cut
  "Scans s from `from` for blank lines, the end of an SSE event (HTML Living
  Standard, 9.2.6 Interpreting an event stream: a line ends with CRLF, LF or CR,
  and an empty line dispatches the event). `line-start?` says whether `from` is
  the start of a line. Returns [cut scanned line-start?]: the end of the last
  blank line (-1 if none), where to resume, and whether that is a line start. A
  CR at the very end is left unscanned: the LF that may follow is part of it.
  s is any CharSequence, so that the held text is scanned where it lies."
  [^CharSequence s from line-start?]
  (let [n (.length s)]
    (loop [i (long from), start? line-start?, cut -1]
      (if (>= i n)
        [cut i start?]
        (let [ch (.charAt s i)]
          (cond
            (= ch \newline) (recur (inc i) true (if start? (inc i) cut))
            (= ch \return) (if (= (inc i) n)
                             [cut i start?]
                             (let [j (if (= \newline (.charAt s (inc i))) (+ i 2) (inc i))]
                               (recur j true (if start? j cut))))
            :else (recur (inc i) false cut)))))))

(defn- ndjson-cut
  "[cut scanned line-start?] as sse-cut, for NDJSON, whose events end at LF.
  Only what came after `from` is looked at: an event that is long in coming is
  not searched again on every flush."
  [^CharSequence s from _]
  (let [n (.length s)]
    (loop [i (dec n)]
      (cond (< i (long from)) [-1 n true]
            (= \newline (.charAt s i)) [(inc i) n true]
            :else (recur (dec i))))))

(defn- write-text [^OutputStream out ^String s]
  (when (pos? (.length s)) (.write out (.getBytes s StandardCharsets/UTF_8))))

(def client-sse-limit
  "UTF-16 code units of one event, or of the text held without an event's end,
  past which @ag-ui/client fails the run, and the sidecar passes the rest of the
  stream on unread (protocol/README.md §13 SSE_BUFFER_LIMIT, §14)."
  (* 10 1024 1024))

(def ^:private drain-bytes
  "Bytes written without a flush after which the stream hands them on anyway,
  so that a handler that never flushes is still repaired in bounded memory."
  65536)

(defn- loss
  "How a lost sidecar was lost, in a few words."
  [e]
  (let [{:keys [kind exit-status]} (ex-data e)]
    (if (= kind :sidecar-exited) (str "exit status " exit-status) (.getMessage ^Exception e))))

(def ^:private blank-line
  "The end of an SSE event: two line ends, each CRLF, LF or CR (HTML Living
  Standard, 9.2.6)."
  #"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r)")

(defn- first-run-started
  "The first event of `text` (whole events), when it starts a run: what a stream
  opened again past the replay limit is fed, so that the rest of the run is read
  as one (§14); nil otherwise."
  [^String text framing]
  (let [end (if (= framing "ndjson")
              (let [i (.indexOf text "\n")] (when (>= i 0) (inc i)))
              (let [m (re-matcher blank-line text)] (when (.find m) (.end m))))
        first-event (subs text 0 (or end (.length text)))]
    (when (str/includes? first-event "\"RUN_STARTED\"") first-event)))

(defn- outcome-line
  "The findings of one reply by outcome (§13's four words), or nil when it has none."
  [reply]
  (let [said (for [k [:passed :mended :discarded :kept]
                   :let [n (get reply k 0)]
                   :when (and (number? n) (pos? (long n)))]
               (str n " " (name k)))]
    (when (seq said) (str/join ", " said))))

(defonce ^:private ^ScheduledExecutorService ticker
  ;; One daemon thread that schedules every detached stream's grace check (gone!);
  ;; the checks themselves call the sidecar, on threads of their own (pool/check!).
  (Executors/newSingleThreadScheduledExecutor
   (reify ThreadFactory
     (newThread [_ r] (doto (Thread. ^Runnable r "agui-state-detach") (.setDaemon true))))))

(defn repairing-stream
  "An OutputStream onto `out` that hands what is written, decoded as UTF-8
  incrementally (a character a flush cuts in two waits for its other bytes), to
  fixStream on each flush, and writes what comes back. Only whole events go to
  the sidecar: the unfinished one stays here, so that whatever the sidecar held
  when it failed can still be sent as the server wrote it. Every reply's
  findings go to `log` by outcome (§13's four words: what the repair changed is
  said), and each finding, in order, to `finding` when it is given; restarts
  and failures to `warn`. Returns {:stream :abandon}; abandon
  closes the sidecar's stream when the response will not end normally.

  The sidecar may die in the middle (a kill -9, an out-of-memory kill): it is
  restarted, the stream opened again with the same params, and the text the old
  stream answered for (kept up to replay-limit characters) fed to it first, its
  output dropped, so that it holds the very mirror and the rest of the response
  is repaired exactly as `fix` repairs the whole. Past replay-limit, only the
  response's first event is fed (a RUN_STARTED: the rest is read as one run) and
  the mirror starts again from the request's state: a snapshot under :own is
  still one add of each owned member, which needs no baseline, and the client's
  other keys still stand (protocol/README.md §14). At most `restarts` times in
  one response; after that, or when the restart fails, the rest goes out as
  written, with one warning.

  The unfinished event is held only up to client-sse-limit: past it the sidecar
  would pass that event and the rest on unread, so the middleware does the same
  at once (give-up!) rather than hold an event that may never end. It counts the
  decoded text, whose length is exactly the UTF-16 length the sidecar counts;
  the few bytes of a character still being decoded are left out, so it never
  gives up on an event the sidecar would still read.

  Detach (protocol/README.md §16). When the stream is a resumable run (`opened`
  has :run) and a write to the client fails, the client left mid-run: the
  sidecar is told (detachStream), and for its grace period the app's output goes
  on into fixStream, the run's log, and nowhere else; a rejoin, served by any
  process sharing the store, picks it up. A fixStream reply with :cancel (the
  grace passed with nobody reading), or a sidecar lost meanwhile, ends it: the
  app's next write throws, as it did at once before resume. fixStream is called
  with \"\" between the app's writes, so that the cancel is learnt within the
  grace even from an app that is silent."
  [^OutputStream out c opened params framing {:keys [warn log finding restarts replay-limit]}]
  (let [pending (ByteArrayOutputStream.)  ; written, not yet decoded
        ^CharsetDecoder decoder (-> StandardCharsets/UTF_8 .newDecoder
                                    (.onMalformedInput CodingErrorAction/REPLACE)
                                    (.onUnmappableCharacter CodingErrorAction/REPLACE))
        tail (StringBuilder.)              ; decoded, not yet sent: the unfinished event
        scan (volatile! [0 true])          ; sse-cut's place in tail
        cut-fn (if (= framing "ndjson") ndjson-cut sse-cut)
        mode (volatile! :repair)           ; :repair, :detached (client gone, run goes on), :raw (failed open), :closed
        live? (fn [] (#{:repair :detached} @mode))
        resumable (volatile! (some? (:run opened)))
        tick (volatile! nil)               ; the detached stream's grace check
        called (volatile! 0)               ; when the sidecar was last called for the stream
        send-ref (volatile! nil)           ; send!, for the grace check that gone! schedules
        cancelled (volatile! false)        ; the detached run was cancelled: the app's writes fail
        lock (Object.)
        view (volatile! (:view opened))    ; the client pinned to the stream's process
        sid (volatile! (:stream-id opened))
        answered (StringBuilder.)          ; the text the sidecar answered for: the replay after a restart
        replayable (volatile! true)        ; answered holds all of it (within replay-limit)
        run-started (volatile! nil)        ; the response's first event, if it starts a run
        restarted (volatile! 0)
        why (volatile! nil)                ; why a lost sidecar was not restarted
        ;; Every call of the stream: one that finds the sidecar hung ends it (sidecar/on).
        rpc (fn [f & args] (sidecar/on @view #(apply f % args)))
        ;; Only on an abnormal end: a resumable run ends as cancelled, so a rejoin breaks off.
        forget! (fn [] (try (rpc client/close-stream {:stream-id @sid :broken true}) (catch Exception _ nil)))
        stop-tick! (fn [] (some-> ^ScheduledFuture @tick (.cancel false)) (vreset! tick nil))
        ;; The run was cancelled, or can no longer be kept: what the client's
        ;; leaving did before resume, late. The app's next write throws.
        cancel! (fn [why]
                  (stop-tick!)
                  (log (str "agui-state.ring: stream " @sid ": " why "; the app's response is cancelled"))
                  (forget!)
                  (vreset! cancelled true)
                  (vreset! mode :closed))
        ;; A grace check: fixStream "" when the app was silent for half the grace, so
        ;; that the cancel is learnt. Never on the ticker (one hung call would stall
        ;; every detached stream), and one at a time: a check in flight skips the next.
        checking (AtomicBoolean.)
        check! (fn [grace]
                 (when (.compareAndSet checking false true)
                   (pool/check!
                    (fn [] (try (locking lock
                                  (when (and (= @mode :detached)
                                             (>= (- (System/currentTimeMillis) (long @called))
                                                 (quot (long grace) 2)))
                                    (@send-ref "")))
                                (finally (.set checking false)))))))
        ;; The client is gone: detached if the run can go on without it; else the
        ;; sidecar's stream is closed at once rather than left for its idle
        ;; limit (§14), and the write fails as it did.
        gone! (fn [^IOException e]
                (let [grace (when @resumable
                              (try (:grace-ms (rpc client/detach-stream @sid)) (catch Exception _ nil)))]
                  (if (and grace (pos? (long grace)))
                    (do (vreset! mode :detached)
                        (log (str "agui-state.ring: stream " @sid ": the client left ("
                                  (or (not-empty (.getMessage e)) (.getName (class e)))
                                  "); the run goes on for " grace " ms for a rejoin"))
                        (vreset! tick (.scheduleWithFixedDelay
                                       ticker
                                       ^Runnable (fn [] (check! grace))
                                       (max 1 (quot (long grace) 4)) (max 1 (quot (long grace) 4))
                                       TimeUnit/MILLISECONDS)))
                    (do (forget!) (vreset! mode :closed) (throw e)))))
        to-client! (fn [^String s]
                     (when (= @mode :repair)
                       (try (write-text out s) (catch IOException e (gone! e)))))
        ;; `text` was answered for by `reply`: its repair goes out, its findings are
        ;; said, and it is kept to replay.
        emit! (fn [^String text reply]
                (to-client! (:text reply))
                (when-let [line (outcome-line reply)]
                  (log (str "agui-state.ring: stream " @sid ": " line)))
                (when finding (run! finding (:findings reply)))
                (when (and (nil? @run-started) text)
                  (vreset! run-started (or (first-run-started text framing) "")))
                (when (and @replayable text)
                  (if (> (+ (.length answered) (.length text)) (long replay-limit))
                    (do (vreset! replayable false) (.setLength answered 0) (.trimToSize answered))
                    (.append answered text))))
        ;; The sidecar behind the stream is gone: a new one, and the stream opened
        ;; again on it and fed what the old one answered for, so that it holds the
        ;; very mirror; past replay-limit only its RUN_STARTED, and the mirror
        ;; starts again from the request's state (§14). :exact, :partial, or false
        ;; (`why` says why) when it cannot be brought back.
        recover! (fn [e what]
                   (loop [^Exception e e]
                     (if (>= (long @restarted) (long restarts))
                       (do (vreset! why (str "not restarted again: it was restarted " @restarted
                                             " times in this response (:restarts)"))
                           false)
                       (let [old-pid (.pid (client/process @view))
                             old-id @sid
                             exact @replayable
                             replay (if exact answered (or @run-started ""))
                             r (try (vswap! restarted inc)
                                    (sidecar/reopen! c @view params replay)
                                    (catch Exception x {:failed x}))]
                         (cond
                           (:failed r) (do (vreset! why (str "restarting it failed: "
                                                             (.getMessage ^Exception (:failed r))))
                                           false)
                           (:lost r) (do (vreset! view (:view r)) (recur (:lost r)))
                           :else
                           (do (vreset! view (:view r))
                               (vreset! sid (:stream-id r))
                               (vreset! resumable (some? (:run r)))
                               (warn (str "agui-state.ring: the sidecar (pid " old-pid ") was lost during "
                                          what " on stream " old-id " (" (loss e) "); restarted (pid "
                                          (.pid (client/process @view)) "), stream " @sid " resumes "
                                          (if exact
                                            (str "with its mirror rebuilt from the " (.length answered)
                                                 " characters answered for")
                                            (str "from the request's state and the response's first event"
                                                 " (more than :replay-limit, " replay-limit
                                                 " characters, were answered for)"))))
                               (if exact :exact :partial)))))))
        decode! (fn [end?]
                  (let [in (ByteBuffer/wrap (.toByteArray pending))
                        chars (CharBuffer/allocate (inc (.remaining in)))]
                    (.decode decoder in chars (boolean end?))
                    (when end? (.flush decoder chars))
                    (.append tail (.flip chars))
                    (.reset pending)
                    (.write pending (.array in) (.position in) (.remaining in))))
        fail-open! (fn [what ^Exception e ^String unanswered]
                     (warn (if (sidecar/hung? e)
                             (str "agui-state.ring: the sidecar did not answer " what " within "
                                  (:timeout-ms (ex-data e)) " ms; it was ended (pid "
                                  (.pid (client/process @view)) "), the rest of stream " @sid
                                  " goes out unrepaired, and the next stream starts a new sidecar")
                             (str "agui-state.ring: " what " failed on stream " @sid ": "
                                  (.getMessage e) (some->> @why (str "; "))
                                  "; the rest of this response goes out unrepaired")))
                     (vreset! mode :raw)
                     (when-not (sidecar/lost? e) (forget!))
                     (write-text out unanswered)
                     (write-text out (str tail))
                     (.setLength tail 0)
                     (.writeTo pending out)
                     (.reset pending))
        ;; The held text passed the limit. Only whole events went to the sidecar, so
        ;; closing its stream gives back nothing of this one; whatever it does
        ;; give back comes before it.
        give-up! (fn []
                   (warn (str "agui-state.ring: stream " @sid ": an event passed "
                              (quot (long client-sse-limit) (* 1024 1024)) " MiB without its end"
                              " (the client's SSE limit); the rest of this response goes through"
                              " unrepaired"))
                   (vreset! mode :raw)
                   (when-let [reply (try (rpc client/close-stream {:stream-id @sid :broken true})
                                         (catch Exception _ nil))]
                     (write-text out (:text reply)))
                   (write-text out (str tail))
                   (.setLength tail 0)
                   (.writeTo pending out)
                   (.reset pending))
        ;; A part the sidecar did not answer because it was lost goes again, to the
        ;; new stream once the replay is in.
        send! (fn [^String text]
                (loop []
                  (vreset! called (System/currentTimeMillis))
                  (let [reply (try (rpc client/fix-stream {:stream-id @sid :text text})
                                   (catch Exception e e))]
                    (cond
                      (not (instance? Exception reply))
                      (do (emit! text reply)
                          (when (and (= @mode :detached) (:cancel reply))
                            (cancel! "nobody rejoined within the grace period"))
                          reply)
                      ;; Detached, there is no client to fail open to, and a restarted
                      ;; sidecar would hold a new run: the run ends.
                      (= @mode :detached) (do (cancel! (str "fixStream failed while detached: "
                                                            (.getMessage ^Exception reply)))
                                              nil)
                      ;; A hung sidecar was ended: the stream goes on unrepaired, the next one gets a new sidecar.
                      (and (sidecar/lost? reply) (not (sidecar/hung? reply)) (recover! reply "fixStream")) (recur)
                      :else (do (fail-open! "fixStream" reply text) nil)))))
        ;; The held text is scanned in place from where the last scan stopped, and
        ;; only the whole events are copied out: a flush costs what it brought.
        send-whole! (fn []
                      (let [[from start?] @scan
                            [cut scanned start?] (cut-fn tail from start?)]
                        (if (neg? (long cut))
                          (vreset! scan [scanned start?])
                          (let [whole (.substring tail 0 (int cut))]
                            (.delete tail 0 (int cut))
                            (vreset! scan [(- (long scanned) (long cut)) start?])
                            (send! whole)))))
        drain! (fn []
                 (decode! false)
                 (send-whole!)
                 (when (> (.length tail) (long client-sse-limit))
                   (case @mode
                     :repair (give-up!)
                     :detached (cancel! "an event passed the client's SSE limit while detached")
                     nil)))
        ;; The whole events, then the unfinished one on its own: the sidecar then
        ;; holds just that when closeStream comes, and it is what goes again (or
        ;; as written) if closeStream finds the sidecar gone.
        finish! (fn []
                  (decode! true)
                  (send-whole!)
                  (when (live?)
                    (let [rest (str tail)]
                      (.setLength tail 0)
                      (when (pos? (.length rest)) (send! rest))
                      (loop []
                        (when (live?)
                          (let [reply (try (rpc client/close-stream @sid) (catch Exception e e))]
                            (cond
                              (not (instance? Exception reply)) (emit! nil reply)
                              (= @mode :detached) nil
                              (and (sidecar/lost? reply) (not (sidecar/hung? reply)) (recover! reply "closeStream"))
                              ;; The replay holds what the old stream held, unless it was cut short.
                              (do (when (and (not @replayable) (pos? (.length rest))) (send! rest))
                                  (recur))
                              :else (fail-open! "closeStream" reply rest)))))))
                  (stop-tick!))
        ;; Writing to the client failed outside to-client! (failing open): it went
        ;; away. The sidecar's stream is closed at once rather than left for its
        ;; idle limit (§14).
        guard (fn [f] (try (f) (catch IOException e
                                 (when (live?) (stop-tick!) (forget!))
                                 (vreset! mode :closed)
                                 (throw e))))
        flush-client! (fn [] (when (= @mode :repair)
                               (try (.flush out) (catch IOException e (gone! e)))))
        closed (fn [] (IOException. (if @cancelled
                                      "the client went away, and nobody rejoined the run within the grace period"
                                      "stream closed")))
        stream (proxy [OutputStream] []
                 (write
                   ([b] (if (bytes? b)
                          (let [^bytes bs b] (.write ^OutputStream this bs 0 (alength bs)))
                          (.write ^OutputStream this (byte-array [(unchecked-byte b)]) 0 1)))
                   ([bs off len]
                    (locking lock
                      (case @mode
                        (:repair :detached)
                        (do (.write pending ^bytes bs (int off) (int len))
                            (when (> (.size pending) (long drain-bytes)) (guard drain!))
                            (when (= @mode :closed) (throw (closed))))
                        :raw (.write out ^bytes bs (int off) (int len))
                        :closed (throw (closed))))))
                 (flush []
                   (locking lock
                     (case @mode
                       (:repair :detached) (do (guard (fn [] (drain!) (flush-client!)))
                                               (when (= @mode :closed) (throw (closed))))
                       :raw (.flush out)
                       nil)))
                 (close []
                   (locking lock
                     (when-not (= @mode :closed)
                       (let [detached (= @mode :detached)]
                         (try (when (live?) (guard finish!))
                              (finally (vreset! mode :closed)
                                       ;; Closing a connection the client left may fail: nobody to tell.
                                       (if detached
                                         (try (.close out) (catch IOException _ nil))
                                         (.close out)))))))))]
    (vreset! send-ref send!)
    ;; §16: the run's opening id block goes first, flushed, before the handler's
    ;; first event, so that a client cut before that holds an id to rejoin from.
    ;; Only the stream first opened has one: one opened again after a restart is
    ;; a new run, whose opening the client never needs.
    (when-let [block (:opening opened)]
      (locking lock
        (guard (fn [] (to-client! block) (flush-client!)))))
    {:stream stream
     :abandon (fn [] (locking lock
                       (when (live?) (stop-tick!) (forget!))
                       (vreset! mode :closed)))}))
