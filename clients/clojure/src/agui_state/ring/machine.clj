(ns agui-state.ring.machine
  "The lifecycle of one response through agui-state.ring/wrap-agui-state, as
  protocol/README.md §14 writes it down, once: its states, the events that move
  it, and what it keeps. Pure: agui-state.ring.stream does the I/O each step
  calls for.

    waiting    the request is handled, no response head yet (the handler
               runs; agui-state.ring.exchange/repair takes the head)
    repairing  the app's bytes go through fixStream, the replies to the client
    passing    the app's bytes go to the client as written (not a stream, or
               failed open)
    detached   the client left a resumable run: the app's bytes go on into
               fixStream (the run's log) for the grace, the replies nowhere
    ended      closed: a write throws")

(def transitions
  "state -> event -> next state (protocol/README.md §14's table). An event not
  listed for a state is a bug of the adapter (step throws)."
  {:waiting   {:opened :repairing    ; openStream gave a stream: its headers, its opening
               :pass :passing}       ; `pass`, or openStream failed: the app's head as it is
   :repairing {:write :repairing     ; fixStream, its text written, the `pending` tail kept
               :restarted :repairing ; the sidecar died: restarted, reopened, replayed
               :fail :passing        ; a 3rd death, a timeout, any other error: the tail, then as is
               :left :detached       ; the client left a resumable run (detachStream graceMs > 0)
               :gone :ended          ; the client left, not resumable: closeStream broken
               :end :ended           ; the app's response ended: closeStream, its text
               :broke :ended}        ; the app broke off: closeStream broken
   :detached  {:write :detached      ; fixStream, its text dropped
               :check :detached      ; fixStream "" when the app was silent
               :cancel :ended        ; a reply's `cancel`, or the sidecar died or hung
               :end :ended
               :broke :ended}
   :passing   {:write :passing
               :end :ended
               :broke :ended}
   :ended     {}})

(defn step
  "The state after `event` in `state`."
  [state event]
  (or (get-in transitions [state event])
      (throw (ex-info (str "agui-state.ring: no " event " in state " state)
                      {:state state :event event}))))

(defn live?
  "Whether the sidecar still holds the response's stream."
  [state]
  (contains? #{:repairing :detached} state))

;;; What a repairing stream keeps (protocol/README.md §14, spec: fixStream's `pending` and `head`)

(defn unanswered-after
  "How many bytes of the kept-unanswered buffer to keep after a reply: its last
  `pending` (the unfinished event the sidecar holds), never more than it has.
  A reply without `pending` (a sidecar before 1.2) keeps everything."
  [kept pending]
  (if (number? pending) (min (long kept) (long pending)) (long kept)))

(defn replay-after
  "The replay after `n` more bytes were answered for: `replay` is {:size :over
  :head}, `limit` is openStream's replayBytes. While the answered text stays
  within the limit, all of it is kept (:append); past it, only its first `head`
  bytes, the response's RUN_STARTED (:cut to :size), and nothing more after
  that (:drop). A sidecar restarted mid-stream is fed the replay, so that it
  holds the very mirror the old one held, or, cut, reads the rest as one run
  from the request's state."
  [{:keys [size over head] :as replay} n limit]
  (let [size (long size) n (long n)]
    (cond over (assoc replay :action :drop)
          (<= (+ size n) (long limit)) (assoc replay :size (+ size n) :action :append)
          :else (assoc replay :size (min (+ size n) (long (or head 0))) :over true :action :cut))))

(def restarts
  "How many times one response restarts a sidecar that died under it before
  the rest goes out as written (§14): a dead sidecar cannot decide it."
  2)
