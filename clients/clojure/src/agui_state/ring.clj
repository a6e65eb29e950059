(ns agui-state.ring
  "Ring middleware that repairs an AG-UI event stream inside the server: the
  repair `agui-state fix` does (protocol/README.md §13), through the sidecar's
  stream methods (§14), for a server whose events a framework writes.

    (wrap-agui-state handler {:own [\"/toolState\"]})

  A response whose Content-Type is text/event-stream, or NDJSON
  (application/x-ndjson, application/ndjson, application/jsonl), is repaired as
  it streams: the body (any ring.core.protocols/StreamableResponseBody: a
  function writing to the stream, an InputStream, a string, a seq) is written
  through an OutputStream that hands each flushed part to fixStream and sends on
  what comes back, and Content-Length goes. Every other response passes
  untouched. The request body is read once for RunAgentInput.state, the client's
  baseline, and handed to the handler again as a fresh InputStream.

  The shared sidecar starts when wrap-agui-state is called (start! and stop!
  for a system's lifecycle). If it dies in the middle of a stream, it is
  restarted and the stream resumes, repaired, on a mirror rebuilt from the text
  the old stream answered for (agui-state.ring.stream/repairing-stream). One
  that does not answer a call within 5 s (sidecar/repair-call-ms) is hung: it
  is ended, the rest of that response goes out as written, with one line, and
  the next stream starts a new one. It fails open: if the sidecar cannot be
  brought back, or errors, the rest of that response goes out as the server
  wrote it and a warning is logged; the user's stream is never broken by the
  repair. An event that passes the client's SSE limit without its end
  (client-sse-limit) is not held either: it and the rest of the response go
  out as written, as `agui-state fix` passes them (SSE_BUFFER_LIMIT, §13).

  Resume (§16, on unless :resume false): every repaired SSE event gets an id
  and the run goes into the sidecar's run log; a client that leaves mid-run is
  detached (agui-state.ring.stream: the app's output goes on into the log for
  the grace); a request the sidecar classes as a rejoin or a reload is
  answered from the log (agui-state.ring.rejoin) and never reaches the
  handler. Every rule of it is the sidecar's (classifyRequest, rejoinStream,
  openStream's resume): the middleware passes the request and the response's
  headers as they are, and writes what comes back."
  (:require [agui-state.client :as client]
            [agui-state.ring.pool :as pool]
            [agui-state.ring.rejoin :as rejoin]
            [agui-state.ring.sidecar :as sidecar]
            [agui-state.ring.stream :as stream]
            [clojure.data.json :as json]
            [clojure.string :as str]
            [ring.core.protocols :as protocols])
  (:import (java.io ByteArrayInputStream InputStream OutputStream)
           (java.nio.charset StandardCharsets)))

(set! *warn-on-reflection* true)

;;; The sidecar (agui-state.ring.sidecar)

(def ^{:arglists '([])} default-client
  "The client that every wrap-agui-state without :client shares: one sidecar per
  process, started by wrap-agui-state (or start!) from AGUI_STATE_BIN, else
  agui-state on PATH; each call has a limit (sidecar/repair-call-ms, 5 s), so
  that a sidecar that stops answering cannot hold a response: it is ended, and
  the response goes on unrepaired. Starts it if it does not run."
  sidecar/default-client)

(defn start!
  "Starts the shared sidecar now, if it does not run, and loads its stream
  pipeline, so that the first response waits for neither; returns its client.
  wrap-agui-state calls it (unless :start false); call it yourself after stop!,
  or from a system's start. Throws what starting it throws (a missing binary)."
  [] (sidecar/start!))

(defn stop!
  "Ends the shared sidecar, if one runs, and returns whether one did: for a
  system's stop, a REPL reset or a test's end. Responses still streaming through
  it go out unrepaired from there (fail-open); a later stream, or start!, starts
  a new one."
  [] (sidecar/stop!))

;;; The request and the response

(defn- header
  "The value of the response header `name`, whatever the case of its key (Ring
  leaves header keys as the handler wrote them); the first, if there are several."
  [response ^String name]
  (some (fn [[k v]] (when (.equalsIgnoreCase name (str k)) (if (string? v) v (first v))))
        (:headers response)))

(defn- without-header [headers ^String name]
  (into {} (remove (fn [[k _]] (.equalsIgnoreCase name (str k)))) headers))

(defn- with-headers
  "headers with each of `more` set, replacing a header of the same name in any
  case: openStream gives a header's whole value (§16)."
  [headers more]
  (reduce (fn [hs [k v]] (assoc (without-header hs k) k v)) headers more))

(defn- header-pairs
  "Ring headers as [name value] pairs, as the sidecar takes them: a request's as
  the adapter gives them (it joined repeated ones), a response's as the handler
  wrote them (a value may be a seq of several)."
  [headers]
  (vec (for [[k v] headers, v (if (sequential? v) v [v])] [(name k) (str v)])))

(def ^:private ndjson-types #{"application/x-ndjson" "application/ndjson" "application/jsonl"})

(defn- framing
  "\"sse\", \"ndjson\" or nil (not an event stream), from a Content-Type, as
  protocol/README.md §14 names them."
  [content-type]
  (when content-type
    (let [media (str/lower-case (str/trim (first (str/split content-type #";" 2))))]
      (cond (= media "text/event-stream") "sse"
            (ndjson-types media) "ndjson"))))

(defn- run-input
  "The request body's bytes read as a RunAgentInput: a map, or nil when it is
  not a JSON object."
  [^bytes body]
  (when (and body (pos? (alength body)))
    (try (let [input (json/read-str (String. body StandardCharsets/UTF_8))]
           (when (map? input) input))
         (catch Exception _ nil))))

(defn- baseline
  "RunAgentInput.state, when it is an object; nil otherwise, and openStream then
  starts from {} as `proxy` does (§14)."
  [input]
  (let [state (get input "state")] (when (map? state) state)))

(defn- resume-params
  "openStream's :resume for a response to `request` (§16): the thread and the
  messages a reload is given back, when the RunAgentInput has them, the path,
  and both sets of headers as they are; the sidecar derives the rest. A run
  with no threadId is filed too: it is rejoined by its id."
  [request input response]
  (let [thread-id (get input "threadId")
        messages (get input "messages")]
    (cond-> {:path (:uri request)
             :request-headers (header-pairs (:headers request))
             :response-headers (header-pairs (:headers response))}
      ;; Any string, as it came: which one names a thread is the sidecar's to say (§16).
      (string? thread-id) (assoc :thread-id thread-id)
      (vector? messages) (assoc :messages messages))))

;;; The repairing stream (agui-state.ring.stream)

(def client-sse-limit
  "UTF-16 code units of one event, or of the text held without an event's end,
  past which @ag-ui/client fails the run, and the sidecar passes the rest of the
  stream on unread (protocol/README.md §13 SSE_BUFFER_LIMIT, §14)."
  stream/client-sse-limit)

(defn- open-repair
  "Opens the sidecar's stream for a response, before its head is sent, so that
  what openStream adds to the head (the announcement, §16) goes in it:
  {:client :opened :params}, or nil, with a warning, when it cannot be opened
  (the response then goes as it is)."
  [framing state resume {:keys [own snapshots join-keys client warn]}]
  (let [params (cond-> {:framing framing}
                 state (assoc :state state)
                 (seq own) (assoc :own (vec own))
                 snapshots (assoc :snapshots snapshots)
                 join-keys (assoc :join-keys true)
                 resume (assoc :resume resume))]
    ;; Starting the sidecar is inside the try: a missing binary fails open too.
    (try (let [c (or client (default-client))]
           {:client c :opened (sidecar/open! c params) :params params})
         (catch Exception e
           (warn (str "agui-state.ring: openStream failed: " (.getMessage e)
                      "; this response goes out unrepaired"))
           nil))))

(defn- repaired-body
  "A StreamableResponseBody that writes `body` through a repairing stream on the
  sidecar's stream `opened`."
  [body response framing {:keys [client opened params]} opts]
  (reify protocols/StreamableResponseBody
    (write-body-to-stream [_ _ out]
      (let [{:keys [^OutputStream stream abandon]}
            (stream/repairing-stream out client opened params framing opts)]
        (try (protocols/write-body-to-stream body response stream)
             ;; Ring's protocol closes the stream after the body; a body that
             ;; does not is closed here (closing twice is nothing).
             (.close stream)
             (catch Throwable t (abandon) (throw t)))))))

(defn- stderr-warning [^String message] (.println System/err message))

(defn wrap-agui-state
  "Wraps a Ring handler (one argument, or three for async) so that its AG-UI
  event streams reach the client repaired. Options:
    :own        pointers to the members the server owns, such as [\"/toolState\"]:
                each STATE_SNAPSHOT then goes as a STATE_DELTA on those members
                only, and the client's other keys survive (`fix --own`)
    :snapshots  \"pass\" (default) or \"delta\" (`fix --snapshots`)
    :join-keys  true to read an unescaped /toolState/a/b as the key \"a/b\" when
                that is the only way the op applies (`fix --join-keys`)
    :paths      the request URIs to repair (exact :uri values), and with resume
                each one's <uri>/connect (a reload's); nil, every one
    :client     an agui-state.client to use; default (default-client), one per
                process, shared by every wrap-agui-state
    :start      true (default): without :client, start the shared sidecar now
                (start!: the process, and its stream pipeline loaded), so that
                the first stream does not wait for it; a failure is a warning,
                and the first stream tries again. false: the first stream starts
                it. stop! ends it.
    :restarts   how many times one response may restart a sidecar that died in
                its middle before the rest goes out unrepaired; default 2
    :replay-limit  characters of a response kept to replay to a restarted
                sidecar, which rebuilds the stream's mirror from them; past it
                the mirror starts again from the request's state and the
                response's first event; default 8 MiB
    :resume     true (default): resume (protocol/README.md §16). Each SSE event
                gets an id and the run is logged in the sidecar; a client that
                leaves mid-run is detached (the app's response goes on, into the
                log, for the sidecar's detach grace); a request with
                Last-Event-ID, or a POST to <path>/connect, is answered from the
                log and never reaches the handler (410, or 204 for connect, when
                there is nothing to give). The sidecar decides all of it: each
                request on a handled path is classed by classifyRequest first
                (one call; if the sidecar cannot be had, the request goes to the
                handler). false: none of it, as before.
    :store      the shared sidecar's `--store`: \"memory\" (its default: this
                process serves the rejoins of its runs), \"redis://HOST:PORT/DB\"
                (every process on that database serves any run's rejoin), or
                \"none\"
    :detach-grace  the shared sidecar's `--detach-grace`, in seconds (its
                default 30; 0 cancels the app's response as soon as its client
                leaves). :store and :detach-grace are flags of the sidecar the
                middleware starts: with :client, start that one with them
    :warn       a function of one string, called for each warning and each
                restart; default prints it to stderr
    :log        a function of one string, called with the findings of each part
                of a stream by outcome (\"stream s3: 1 mended, 2 kept\"), so that
                whatever the middleware changes is said; default prints it to
                stderr
    :finding    a function of one finding (a map with string keys, as
                protocol/README.md §13 names them: \"event\" \"line\" \"kind\"
                \"type\" \"index\" \"pointer\" \"code\" \"message\" \"hint\"
                \"outcome\" \"stops\"), called with each finding of the repair in
                order: every op it sent rewritten or left out, with its outcome,
                as proxy logs them at debug level; default none. It is called
                between two writes of the response: it must not block
  Put it inside any compression middleware, so that it sees the body before it
  is encoded: a response with a Content-Encoding passes untouched, with a warning."
  ([handler] (wrap-agui-state handler {}))
  ([handler opts]
   (let [opts (merge {:restarts 2 :replay-limit (* 8 1024 1024)}
                     (-> opts
                         (update :warn #(or % stderr-warning))
                         (update :log #(or % stderr-warning))))
         resume? (not (false? (:resume opts)))
         _ (when (nil? (:client opts))
             (some-> (sidecar/configure! (sidecar/sidecar-args opts))
                     (->> (str "agui-state.ring: ")) ((:warn opts))))
         _ (when (and (nil? (:client opts)) (not (false? (:start opts))))
             (try (start!)
                  (catch Exception e
                    ((:warn opts) (str "agui-state.ring: the sidecar did not start: " (.getMessage e)
                                       "; the first stream tries again")))))
         paths (some-> (:paths opts) set)
         wanted? (fn [request] (or (nil? paths) (contains? paths (:uri request))))
         ;; A path's reload is POSTed to <path>/connect: those are classed too. Which
         ;; request is a reload is the sidecar's to say (§16); these are only the paths.
         handled (some->> paths (mapcat (fn [p] [p (if (= p "/") "/connect" (str p "/connect"))])) set)
         handled? (fn [request] (or (nil? handled) (contains? handled (:uri request))))
         ;; Starting the shared sidecar may throw (a missing binary): each caller fails open.
         sidecar-client (fn [] (or (:client opts) (default-client)))
         prepare (fn [request]
                   ;; The body is read once, here, and the handler gets the same bytes.
                   (let [body (when (instance? InputStream (:body request))
                                (.readAllBytes ^InputStream (:body request)))]
                     [(cond-> request body (assoc :body (ByteArrayInputStream. body))) body]))
         head (fn [request] {"method" (str/upper-case (name (or (:request-method request) :get)))
                             "path" (:uri request)
                             "headers" (header-pairs (:headers request))})
         ;; "rejoin" or "reload" when the sidecar says so (resume on, a handled path);
         ;; nil for the handler. Failing open: a sidecar that cannot be had sends
         ;; the request to the handler, with one line.
         rejoin-kind (fn [request]
                       (when (and resume? (handled? request))
                         (let [kind (try (:kind (second (sidecar/call! (sidecar-client)
                                                                       #(client/classify-request % (head request)))))
                                         (catch Exception e
                                           ((:warn opts) (str "agui-state.ring: " (:uri request) ": classifyRequest failed ("
                                                              (.getMessage e) "); the request goes to the app"))
                                           nil))]
                           (when (#{"rejoin" "reload"} kind) kind))))
         answer-rejoin (fn [kind request]
                         (let [[_ body] (prepare request)]
                           (rejoin/respond kind (head request)
                                           (if body (String. ^bytes body StandardCharsets/UTF_8) "")
                                           sidecar-client (select-keys opts [:warn :log]))))
         repair (fn [request body response]
                  (let [type (header response "Content-Type")
                        framing (framing type)
                        coding (some-> (header response "Content-Encoding") str/trim str/lower-case)]
                    (cond
                      (or (nil? framing) (nil? (:body response))) response
                      (and coding (not= coding "identity"))
                      (do ((:warn opts) (str "agui-state.ring: an event stream in Content-Encoding "
                                             coding " passes unrepaired: put wrap-agui-state inside"
                                             " the compression middleware"))
                          response)
                      :else
                      (let [input (run-input body)
                            opened (open-repair framing (baseline input)
                                                (when (and resume? (= framing "sse"))
                                                  (resume-params request input response))
                                                opts)]
                        (if-not opened
                          response
                          (-> response
                              (update :headers without-header "Content-Length")
                              (update :headers with-headers (:headers (:opened opened)))
                              (assoc :body (repaired-body (:body response) response framing opened opts))))))))]
     (fn
       ([request]
        (if-let [kind (rejoin-kind request)]
          (answer-rejoin kind request)
          (if-not (wanted? request)
            (handler request)
            (let [[request body] (prepare request)]
              (some->> (handler request) (repair request body))))))
       ([request respond raise]
        ;; What blocks (the body read, classifyRequest, rejoinStream, a rejoin's
        ;; answer) runs on a thread of the middleware's: the adapter's is given back.
        (let [abort (rejoin/aborter)]
          (pool/request!
           (fn []
             (let [begun (volatile! false)
                   respond (fn [r] (vreset! begun true) (respond r))]
               (try
                 (if-let [kind (rejoin-kind request)]
                   (respond (answer-rejoin kind request))
                   (if-not (wanted? request)
                     (handler request respond raise)
                     (let [[request body] (prepare request)]
                       (handler request #(respond (some->> % (repair request body))) raise))))
                 ;; raise only before the answer: once respond has begun it, the
                 ;; response is committed, and a body that broke off aborts it.
                 (catch Throwable t (if @begun (abort t) (raise t)))))))))))))
