(ns agui-state.ring.stream
  "The OutputStream of agui-state.ring/wrap-agui-state: the I/O of the states
  of agui-state.ring.machine. What the handler writes goes to the sidecar as it
  comes (fixStream, protocol/README.md §14), and what comes back to the client;
  the sidecar brought back when it dies in the middle
  (agui-state.ring.sidecar/reopen!). The sidecar decides every rule of the
  stream (its events, the client's limit, its RUN_STARTED): this keeps only the
  bytes its replies say it has not answered for, and the replay."
  (:require [agui-state.client :as client]
            [agui-state.ring.machine :as m]
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

(defn- utf8 ^bytes [^String s] (.getBytes s StandardCharsets/UTF_8))

(defn- loss
  "How a lost sidecar was lost, in a few words."
  [e]
  (let [{:keys [kind exit-status address]} (ex-data e)]
    (cond (not= kind :sidecar-exited) (.getMessage ^Exception e)
          address "the connection closed"
          :else (str "exit status " exit-status))))

(defn- outcome-line
  "The findings of one reply by outcome (§13's four words), or nil when it has none."
  [reply]
  (let [said (for [k [:passed :mended :discarded :kept]
                   :let [n (get reply k 0)]
                   :when (and (number? n) (pos? (long n)))]
               (str n " " (name k)))]
    (when (seq said) (str/join ", " said))))

(defonce ^:private ^ScheduledExecutorService ticker
  ;; One daemon thread that schedules every detached stream's grace check; the
  ;; checks themselves call the sidecar, on threads of their own (pool/check!).
  (Executors/newSingleThreadScheduledExecutor
   (reify ThreadFactory
     (newThread [_ r] (doto (Thread. ^Runnable r "agui-state-detach") (.setDaemon true))))))

(defn- decoder
  "(decode bytes end?) -> the text of `bytes` and those before them, decoded as
  UTF-8 incrementally: a character a write cuts in two waits for its other
  bytes; at the end, bad or cut bytes become U+FFFD. (held) gives the bytes
  still waiting, and empties them."
  []
  (let [^CharsetDecoder d (-> StandardCharsets/UTF_8 .newDecoder
                              (.onMalformedInput CodingErrorAction/REPLACE)
                              (.onUnmappableCharacter CodingErrorAction/REPLACE))
        carry (ByteArrayOutputStream.)]
    {:decode (fn [^bytes bs off len end?]
               (.write carry bs (int off) (int len))
               (let [in (ByteBuffer/wrap (.toByteArray carry))
                     chars (CharBuffer/allocate (inc (.remaining in)))]
                 (.decode d in chars (boolean end?))
                 (when end? (.flush d chars))
                 (.reset carry)
                 (.write carry (.array in) (.position in) (.remaining in))
                 (str (.flip chars))))
     :held (fn [] (let [b (.toByteArray carry)] (.reset carry) b))}))

(defn repairing-stream
  "An OutputStream onto `out` for the sidecar's stream `opened` (sidecar/open!
  with `params`), in state :repairing: each write goes to fixStream as it comes
  (decoded as UTF-8 across writes), and each reply's text to the client,
  flushed. Its findings go to `log` by outcome (§13's four words: what the
  repair changed is said), each finding in order to `finding` when given;
  restarts and failures to `warn`. Returns {:stream :abandon}: abandon closes
  the sidecar's stream when the app broke off (see below).

  When the app's body throws, abandon writes the text of closeStream (broken)
  and, when its `ended` says the sidecar ended the run itself, closes `out`:
  abandon returns whether the run was so ended (here or at close), in which
  case the response ended cleanly and the body's exception is not rethrown.

  Kept (machine/unanswered-after, machine/replay-after): the bytes no reply
  has answered for (`pending`), what failing open writes; and the answered
  text, up to openStream's replayBytes (or :replay-limit, when smaller), else
  its first `head` bytes, what a restarted sidecar is fed.

  The sidecar may die in the middle (a kill -9, an out-of-memory kill): it is
  restarted, the stream opened again with the same params and fed the replay,
  its output dropped, so that it holds the very mirror, then the unanswered
  bytes again: the rest of the response is repaired as `fix` repairs the
  whole. At most `restarts` times in one response; after that, a call that
  times out (the sidecar is hung: it is ended), or any other error, the rest
  goes out as written (:passing), with one warning.

  Detach (protocol/README.md §16). When the stream is a resumable run and a
  write to the client fails, the sidecar is told (detachStream), and for its
  grace the app's output goes on into fixStream, the run's log, and nowhere
  else; fixStream is called with \"\" while the app is silent, so that the
  cancel is learnt. A reply's `cancel`, or a sidecar lost meanwhile, ends it:
  the app's next write throws."
  [^OutputStream out c opened params {:keys [warn log finding restarts replay-limit]}]
  (let [lock (Object.)
        st (volatile! {:state :repairing
                       :view (:view opened)          ; the client pinned to the stream's process
                       :sid (:stream-id opened)
                       :resumable (some? (:run opened))
                       :replay-limit (let [given (long (or (:replay-bytes opened) (* 8 1024 1024)))]
                                       (if replay-limit (min given (long replay-limit)) given))
                       :replay {:size 0 :over false :head nil}
                       :restarted 0
                       :why nil                      ; why a lost sidecar was not restarted
                       :tick nil                     ; the detached stream's grace check
                       :called 0                     ; when the sidecar was last called
                       :cancelled false})
        state (fn [] (:state @st))
        go! (fn [event] (vswap! st update :state m/step event))
        unanswered (ByteArrayOutputStream.)          ; sent, not yet answered for: the `pending` tail
        replay (ByteArrayOutputStream.)              ; answered for: what a restarted sidecar is fed
        {:keys [decode held]} (decoder)
        sid (fn [] (:sid @st))
        ;; Every call of the stream: one that finds the sidecar hung ends it (sidecar/on).
        rpc (fn [f & args] (sidecar/on (:view @st) #(apply f % args)))
        forget! (fn [] (try (rpc client/close-stream {:stream-id (sid) :broken true}) (catch Exception _ nil)))
        stop-tick! (fn [] (some-> ^ScheduledFuture (:tick @st) (.cancel false)) (vswap! st assoc :tick nil))
        raw! (fn [^bytes bs] (when (pos? (alength bs)) (.write out bs)))
        ;; The run was cancelled: what the client's leaving did before resume, late.
        cancel! (fn [why]
                  (stop-tick!)
                  (log (str "agui-state.ring: stream " (sid) ": " why "; the app's response is cancelled"))
                  (forget!)
                  (vswap! st assoc :cancelled true)
                  (go! :cancel))
        send-ref (volatile! nil)
        checking (AtomicBoolean.)
        ;; A grace check: fixStream "" when the app was silent for half the grace. Never
        ;; on the ticker (one hung call would stall every detached stream), and one at
        ;; a time: a check in flight skips the next.
        check! (fn [grace]
                 (when (.compareAndSet checking false true)
                   (pool/check!
                    (fn [] (try (locking lock
                                  (when (and (= (state) :detached)
                                             (>= (- (System/currentTimeMillis) (long (:called @st)))
                                                 (quot (long grace) 2)))
                                    (@send-ref "")))
                                (finally (.set checking false)))))))
        ;; The client is gone: detached if the run can go on without it; else the
        ;; sidecar's stream is closed at once rather than left for its idle limit.
        gone! (fn [^IOException e]
                (let [grace (when (:resumable @st)
                              (try (:grace-ms (rpc client/detach-stream (sid))) (catch Exception _ nil)))]
                  (if (and grace (pos? (long grace)))
                    (let [every (max 1 (quot (long grace) 4))]
                      (go! :left)
                      (log (str "agui-state.ring: stream " (sid) ": the client left ("
                                (or (not-empty (.getMessage e)) (.getName (class e)))
                                "); the run goes on for " grace " ms for a rejoin"))
                      (vswap! st assoc :tick (.scheduleWithFixedDelay ticker ^Runnable (fn [] (check! grace))
                                                                      every every TimeUnit/MILLISECONDS)))
                    (do (forget!) (go! :gone) (throw e)))))
        to-client! (fn [^String s]
                     (when (and (= (state) :repairing) (pos? (.length s)))
                       (try (.write out (utf8 s)) (.flush out) (catch IOException e (gone! e)))))
        ;; A reply's findings are said.
        said! (fn [reply]
                (when-let [line (outcome-line reply)]
                  (log (str "agui-state.ring: stream " (sid) ": " line)))
                (when finding (run! finding (:findings reply))))
        ;; A reply's text goes out, and its findings are said.
        emit! (fn [reply]
                (to-client! (str (:text reply)))
                (said! reply))
        ;; `text` was given and `reply` came back: what it answered for moves from
        ;; `unanswered` to the replay, and the reply goes out.
        answered! (fn [^String text reply]
                    (.write unanswered (utf8 text))
                    (let [all (.size unanswered)
                          keep (m/unanswered-after all (:pending reply))
                          n (- all keep)]
                      (when (number? (:head reply)) (vswap! st assoc-in [:replay :head] (:head reply)))
                      (when (pos? n)
                        (let [bs (.toByteArray unanswered)
                              r (m/replay-after (:replay @st) n (:replay-limit @st))]
                          (vswap! st assoc :replay (dissoc r :action))
                          (case (:action r)
                            :append (.write replay bs 0 (int n))
                            :cut (let [whole (doto (ByteArrayOutputStream.) (.write (.toByteArray replay)) (.write bs 0 (int n)))]
                                   (.reset replay)
                                   (.write replay (.toByteArray whole) 0 (int (:size r))))
                            :drop nil)
                          (.reset unanswered)
                          (.write unanswered bs (int n) (int keep)))))
                    (emit! reply))
        ;; The sidecar behind the stream is gone: a new one, and the stream opened
        ;; again on it and fed the replay, so that it holds the very mirror; past the
        ;; replay limit only the RUN_STARTED, and the mirror starts again from the
        ;; request's state (§14). Returns whether it was brought back.
        recover! (fn [e what]
                   (loop [^Exception e e]
                     (if (>= (long (:restarted @st)) (long restarts))
                       (do (vswap! st assoc :why (str "not restarted again: it was restarted " (:restarted @st)
                                                      " times in this response"))
                           false)
                       (let [old (client/describe (:view @st))
                             old-id (sid)
                             {:keys [over size]} (:replay @st)
                             text (.toString replay "UTF-8")
                             r (try (vswap! st update :restarted inc)
                                    (sidecar/reopen! c (:view @st)
                                                     ;; Without the replay the new mirror starts at the request's
                                                     ;; state, which the client has moved past: :resync sends its
                                                     ;; owned members whole again (protocol/README.md §13, §14).
                                                     (cond-> params over (assoc :resync true))
                                                     text)
                                    (catch Exception x {:failed x}))]
                         (cond
                           (:failed r) (do (vswap! st assoc :why (str "restarting it failed: "
                                                                      (.getMessage ^Exception (:failed r))))
                                           false)
                           (:lost r) (do (vswap! st assoc :view (:view r)) (recur (:lost r)))
                           :else
                           (do (vswap! st assoc :view (:view r) :sid (:stream-id r) :resumable (some? (:run r)))
                               (warn (str "agui-state.ring: the sidecar (" old ") was lost during "
                                          what " on stream " old-id " (" (loss e) "); "
                                          (if (client/shared? (:view @st)) "connected again" "restarted")
                                          " (" (client/describe (:view @st)) "), stream " (sid) " resumes "
                                          (if over
                                            (str "from the request's state and the response's first event"
                                                 " (more than the replay limit, " (:replay-limit @st)
                                                 " bytes, were answered for)")
                                            (str "with its mirror rebuilt from the " size " bytes answered for"))))
                               true))))))
        ;; Failing open: the kept tail, then the text not answered, then the rest as written.
        fail-open! (fn [what ^Exception e ^String text]
                     (warn (if (sidecar/hung? e)
                             (let [v (:view @st)]
                               (str "agui-state.ring: the sidecar did not answer " what " within "
                                    (:timeout-ms (ex-data e)) " ms; "
                                    (if (client/shared? v) "the connection to it was closed (" "it was ended (")
                                    (client/describe v) "), the rest of stream " (sid) " goes out unrepaired, and"
                                    (if (client/shared? v) " the next stream connects again"
                                        " the next stream starts a new sidecar")))
                             (str "agui-state.ring: " what " failed on stream " (sid) ": "
                                  (.getMessage e) (some->> (:why @st) (str "; "))
                                  "; the rest of this response goes out unrepaired")))
                     (go! :fail)
                     (when-not (sidecar/lost? e) (forget!))
                     (.writeTo unanswered out)
                     (.reset unanswered)
                     (raw! (utf8 text))
                     (raw! (held)))
        ;; One part of the app's text. A part the sidecar did not answer because it
        ;; was lost goes again, behind the unanswered tail, once the replay is in.
        send! (fn [^String text]
                (loop [^String text text]
                  (vswap! st assoc :called (System/currentTimeMillis))
                  (let [reply (try (rpc client/fix-stream {:stream-id (sid) :text text})
                                   (catch Exception e e))]
                    (cond
                      (not (instance? Exception reply))
                      (do (answered! text reply)
                          (when (and (= (state) :detached) (:cancel reply))
                            (cancel! "nobody rejoined within the grace period")))
                      ;; Detached, there is no client to fail open to, and a restarted
                      ;; sidecar would hold a new run: the run ends.
                      (= (state) :detached) (cancel! (str "fixStream failed while detached: "
                                                          (.getMessage ^Exception reply)))
                      ;; A hung sidecar was ended: the stream goes on unrepaired.
                      (and (sidecar/lost? reply) (not (sidecar/hung? reply)) (recover! reply "fixStream"))
                      (do (vswap! st update :state m/step :restarted)
                          (let [tail (.toString unanswered "UTF-8")]
                            (.reset unanswered)
                            (recur (str tail text))))
                      :else (fail-open! "fixStream" reply text)))))
        finish! (fn []
                  (let [rest (decode (byte-array 0) 0 0 true)]
                    (when (pos? (.length ^String rest)) (send! rest)))
                  (loop []
                    (when (m/live? (state))
                      (let [reply (try (rpc client/close-stream (sid)) (catch Exception e e))]
                        (cond
                          (not (instance? Exception reply))
                          (do (when (and (true? (:ended reply)) (= (state) :repairing))
                                (vswap! st assoc :ended-run true))
                              (emit! reply) (go! :end))
                          (= (state) :detached) (go! :end)
                          (and (sidecar/lost? reply) (not (sidecar/hung? reply)) (recover! reply "closeStream"))
                          (let [tail (.toString unanswered "UTF-8")]
                            (.reset unanswered)
                            (go! :restarted)
                            (when (pos? (.length tail)) (send! tail))
                            (recur))
                          :else (fail-open! "closeStream" reply "")))))
                  (stop-tick!))
        ;; The app broke off while the client reads (issue 40, closeStream's `ended`):
        ;; closeStream broken, its text written; when the sidecar ended the run in
        ;; that text (the closes and a RUN_ERROR INCOMPLETE_STREAM), the response
        ;; ends cleanly, so that the client gets a whole, failed run. Otherwise (pass,
        ;; a run that had ended, an older sidecar, a client gone) it is broken off.
        broke! (fn []
                 (stop-tick!)
                 (let [reply (try (rpc client/close-stream {:stream-id (sid) :broken true})
                                  (catch Exception _ nil))]
                   (go! :broke)
                   (when reply
                     (said! reply)
                     (try (raw! (utf8 (str (:text reply))))
                          (.flush out)
                          (when (true? (:ended reply))
                            (.close out)
                            (vswap! st assoc :ended-run true))
                          (catch IOException _ nil)))))
        closed (fn [] (IOException. (if (:cancelled @st)
                                      "the client went away, and nobody rejoined the run within the grace period"
                                      "stream closed")))
        ;; Writing to the client failed outside to-client! (failing open): it went
        ;; away. The sidecar's stream is closed at once rather than left for its idle limit.
        guard (fn [f] (try (f) (catch IOException e
                                 (when (m/live? (state)) (stop-tick!) (forget!))
                                 (vswap! st assoc :state :ended)
                                 (throw e))))
        stream (proxy [OutputStream] []
                 (write
                   ([b] (if (bytes? b)
                          (let [^bytes bs b] (.write ^OutputStream this bs 0 (alength bs)))
                          (.write ^OutputStream this (byte-array [(unchecked-byte b)]) 0 1)))
                   ([bs off len]
                    (locking lock
                      (case (state)
                        (:repairing :detached)
                        (let [text (decode bs off len false)]
                          (when (pos? (.length ^String text)) (guard #(send! text)))
                          (when (= (state) :ended) (throw (closed))))
                        :passing (.write out ^bytes bs (int off) (int len))
                        :ended (throw (closed))))))
                 (flush []
                   ;; Each reply's text was flushed as it came: only a response going as
                   ;; written has anything to flush (§14).
                   (locking lock
                     (when (= (state) :passing) (.flush out))))
                 (close []
                   (locking lock
                     (when-not (= (state) :ended)
                       (let [detached (= (state) :detached)]
                         (try (if (m/live? (state)) (guard finish!) (go! :end))
                              (finally (vswap! st assoc :state :ended)
                                       ;; Closing a connection the client left may fail: nobody to tell.
                                       (if detached
                                         (try (.close out) (catch IOException _ nil))
                                         (.close out)))))))))]
    (vreset! send-ref send!)
    ;; §16: the run's opening id block goes first, flushed, before the handler's
    ;; first event, so that a client cut before that holds an id to rejoin from.
    (when-let [block (:opening opened)]
      (locking lock (guard #(to-client! block))))
    {:stream stream
     :abandon (fn [] (locking lock
                       (if (= (state) :repairing)
                         (broke!)
                         (do (when (m/live? (state)) (stop-tick!) (forget!))
                             (when-not (= (state) :ended) (go! :broke))))
                       (boolean (:ended-run @st))))}))
