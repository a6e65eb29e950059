(ns agui-state.ring
  "Ring middleware that repairs an AG-UI event stream inside the server: the
  repair `agui-state fix` does (protocol/README.md §13), through the sidecar's
  stream methods (§14), for a server whose events a framework writes.

    (def s (sidecar {}))                                ; a component: (stop s)
    (wrap-agui-state handler {:sidecar s :own [\"/toolState\"]})

  The middleware is an I/O adapter; the sidecar decides (agui-state.ring.exchange):
  each request is classed by classifyRequest (which paths are handled, a
  rejoin or a reload, how much of the body to keep); a handled one's body is
  teed as the handler reads it; at the response head the stream is opened with
  the raw request and head, and the sidecar says whether it is an event stream
  to repair and which headers to write. A repaired body goes through fixStream
  as the handler writes it (agui-state.ring.stream, the states of
  agui-state.ring.machine), and fails open: if the sidecar dies more than twice
  in one response, hangs (sidecar/repair-call-ms), or errors, the rest goes out
  as written, with one line.

  Resume (§16, on unless :resume false): every repaired SSE event gets an id;
  a client that leaves mid-run is detached (the app's output goes on into the
  run log for the grace); a rejoin or a reload is answered from the log
  (agui-state.ring.rejoin) and never reaches the handler."
  (:require [agui-state.ring.exchange :as exchange]
            [agui-state.ring.machine :as machine]
            [agui-state.ring.pool :as pool]
            [agui-state.ring.rejoin :as rejoin]
            [agui-state.ring.sidecar :as sidecar]
            [clojure.string :as str]))

(set! *warn-on-reflection* true)

;;; The sidecar: a component

(defn sidecar
  "A started sidecar for wrap-agui-state's :sidecar: a component (a record,
  java.io.Closeable) whose process runs until (stop s). Its stream pipeline is
  loaded at start, so that the first response waits for neither. Options:
    :store         `--store`: \"memory\" (the sidecar's default: this process
                   serves the rejoins of its runs), \"redis://HOST:PORT/DB\"
                   (every process on that database serves any run's rejoin), or
                   \"none\"
    :detach-grace  `--detach-grace`, in seconds (default 30; 0 cancels the app's
                   response as soon as its client leaves)
    :args          more flags, as strings (\"--max-request-body\" \"16M\")
    :path          the binary; default AGUI_STATE_BIN, else agui-state on PATH
    :env           more environment for it
    :sidecar       \"unix:PATH\" or \"tcp:127.0.0.1:PORT\" (else the environment's
                   AGUI_STATE_SIDECAR): a connection to the host's one sidecar,
                   which every worker shares (protocol/README.md §2), instead of
                   a process: a rejoin that another worker receives finds the
                   run with the memory store. If it dies, each stream goes on
                   through a new connection, as through a restarted sidecar
    :sidecar-start true (else AGUI_STATE_SIDECAR_START=1): when nobody answers
                   there, start it (`serve --listen ADDRESS --exit-idle 60000`
                   with the flags above), detached, so that it outlives the JVM
  Throws what starting it throws (a missing binary). With Integrant:
    (defmethod ig/init-key ::sidecar [_ opts] (agui-state.ring/sidecar opts))
    (defmethod ig/halt-key! ::sidecar [_ s] (agui-state.ring/stop s))"
  ([] (sidecar {}))
  ([opts] (sidecar/start opts)))

(defn stop
  "Ends a sidecar made by `sidecar`; responses still streaming through it go
  out unrepaired from there (fail open). Stopping it again is nothing. On the
  host's shared sidecar (:sidecar), only the connection ends: the streams it
  opened are released, and the sidecar serves the other workers on."
  [s]
  (sidecar/stop s))

(defn- stderr-line [^String message] (.println System/err message))

(defn- client-of
  "() -> the client the middleware calls. :sidecar's (a component), :client,
  or, given neither, one started at the first request with :store,
  :detach-grace, and :sidecar (an address) and :sidecar-start
  (sidecar/lazily): this middleware's own, ended with the JVM. Given a
  component or a client, those are its options, not the middleware's: with
  both, the options conflict."
  [{:keys [client] :as opts}]
  (let [address (when (string? (:sidecar opts)) (:sidecar opts))
        given (or (when-not address (:client (:sidecar opts))) client)
        theirs (filter #(some? (get opts %)) [:store :detach-grace :sidecar-start])
        theirs (if (and address client) (cons :sidecar theirs) theirs)]
    (when (and given (seq theirs))
      (throw (ex-info (str "agui-state.ring: " (str/join ", " (map pr-str theirs))
                           " are the sidecar's options: give them to (agui-state.ring/sidecar {...}),"
                           " not beside a :sidecar component or a :client")
                      {:code "CONFLICTING_OPTIONS" :options (vec theirs)})))
    (if given
      (constantly given)
      (sidecar/lazily (select-keys opts [:store :detach-grace :sidecar :sidecar-start])))))

(def ^:private lifecycles
  "The values of :lifecycle, as `fix --lifecycle` names them (protocol/README.md §13)."
  #{"repair" "pass"})

(defn- checked
  "opts, or ex-info with :code \"INVALID_OPTION\" for a :lifecycle that is
  neither \"repair\" nor \"pass\": said when the app is made, not at its first
  request."
  [{:keys [lifecycle] :as opts}]
  (when (and (some? lifecycle) (not (contains? lifecycles lifecycle)))
    (throw (ex-info (str "agui-state.ring: :lifecycle is \"repair\" or \"pass\", not " (pr-str lifecycle))
                    {:code "INVALID_OPTION" :option :lifecycle :value lifecycle})))
  opts)

(defn wrap-agui-state
  "Wraps a Ring handler (one argument, or three for async) so that its AG-UI
  event streams reach the client repaired. Pure: it starts nothing and changes
  no global state. Options:
    :sidecar    a sidecar component (agui-state.ring/sidecar), yours to stop
    :client     or an agui-state.client you started and close
                (agui-state.client/start, with :timeout-ms); given neither, the
                middleware starts one sidecar of its own at the first request,
                with :store and :detach-grace (agui-state.ring/sidecar's), which
                ends with the JVM: for a REPL or a script; a system holds a
                :sidecar. Or :sidecar \"unix:PATH\" (and :sidecar-start), the
                host's shared sidecar, connected to at the first request, as
                agui-state.ring/sidecar takes them; a bad address throws here.
                :store, :detach-grace or :sidecar-start beside a :sidecar
                component or :client throws ex-info with :code
                \"CONFLICTING_OPTIONS\", and so do :store and :detach-grace
                beside a :sidecar address without start mode
    :own        pointers to the members the server owns, such as [\"/toolState\"]:
                each STATE_SNAPSHOT then goes as a STATE_DELTA on those members
                only, and the client's other keys survive (`fix --own`)
    :snapshots  \"pass\" (default) or \"delta\" (`fix --snapshots`)
    :join-keys  true to read an unescaped /toolState/a/b as the key \"a/b\" when
                that is the only way the op applies (`fix --join-keys`)
    :lifecycle  \"pass\" (the sidecar's default) or \"repair\" (`fix --lifecycle`):
                repair mends a run the client would reject (content after its
                message's end, a RUN_FINISHED with a message open, events after
                the run's end, a stream that stops inside its run, ...), each
                mend a finding; pass leaves the lifecycle as the app wrote it
                (repair sends events the app never wrote: opt in).
                Any other value throws ex-info with :code \"INVALID_OPTION\".
                Under repair, a body that throws inside a run gets the run's
                closes and a RUN_ERROR (code INCOMPLETE_STREAM) and the response
                ends cleanly (the client holds a whole, failed run); the
                exception goes to :warn, once, with its stack trace
    :paths      the paths to handle: an entry handles itself and the paths
                below it (\"/agent\": /agent, /agent/, /agent/run, not /agents;
                \"/\": every one); nil, every one. The sidecar applies it
                (classifyRequest): the others go to the handler untouched
    :resume     true (default): resume (protocol/README.md §16): each SSE event
                gets an id and the run is logged in the sidecar; a client that
                leaves mid-run is detached for the sidecar's grace; a rejoin or
                a reload is answered from the log and never reaches the handler.
                false: none of it
    :restarts   how many times one response may restart a sidecar that died in
                its middle before the rest goes out unrepaired; default 2
    :replay-limit  at most this many bytes of a response are kept to rebuild
                its stream on a restarted sidecar; default the sidecar's
                replayBytes (8 MiB). Past it the mirror starts again from the
                request's state and the response's first event
    :warn       a function of one string, called for each warning and each
                restart; default prints it to stderr
    :log        a function of one string, called with the findings of each part
                of a stream by outcome (\"stream s3: 1 mended, 2 kept\"), and for
                a client that left; default prints it to stderr
    :finding    a function of one finding (a map with string keys, as
                protocol/README.md §13 names them), called with each finding of
                the repair in order; default none. It is called between two
                writes of the response: it must not block
  Put it inside any compression middleware, so that it sees the body before it
  is encoded: a response with a Content-Encoding passes untouched, with a warning."
  ([handler] (wrap-agui-state handler {}))
  ([handler opts]
   (let [c (client-of (checked opts))
         opts (-> opts
                  (update :warn #(or % stderr-line))
                  (update :log #(or % stderr-line))
                  (update :restarts #(or % machine/restarts)))
         ;; One call classes the request; nil (the sidecar cannot be had) or not
         ;; handled: the handler's, untouched.
         plan (fn [request]
                (let [{:keys [handled kind body-bytes]} (exchange/classify c request opts)]
                  (cond (not handled) [:app]
                        (#{"rejoin" "reload"} kind) [:rejoin kind (or body-bytes 0)]
                        :else [:repair (or body-bytes 0)])))]
     (fn
       ([request]
        (let [[what a b] (plan request)]
          (case what
            :app (handler request)
            :rejoin (exchange/answer-rejoin a request b c opts)
            :repair (let [[request tee] (exchange/teed request a)]
                      (some-> (handler request) (#(exchange/repair request tee % c opts)))))))
       ([request respond raise]
        ;; What blocks (classifyRequest, the body read ahead, openStream,
        ;; rejoinStream and a rejoin's answer) runs on a thread of the
        ;; middleware's: the adapter's is given back.
        (let [abort (rejoin/aborter)]
          (pool/request!
           (fn []
             (let [begun (volatile! false)
                   respond (fn [r] (vreset! begun true) (respond r))]
               (try
                 (let [[what a b] (plan request)]
                   (case what
                     :app (handler request respond raise)
                     :rejoin (respond (exchange/answer-rejoin a request b c opts))
                     :repair (let [[request tee] (exchange/teed request a)]
                               (handler request
                                        (fn [response]
                                          (pool/request!
                                           (fn [] (try (respond (when response
                                                                  (exchange/repair request tee response c opts)))
                                                       (catch Throwable t (if @begun (abort t) (raise t)))))))
                                        raise))))
                 ;; raise only before the answer: once respond has begun it, the
                 ;; response is committed, and a body that broke off aborts it.
                 (catch Throwable t (if @begun (abort t) (raise t)))))))))))))
