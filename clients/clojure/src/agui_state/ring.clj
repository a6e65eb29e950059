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

  It fails open: if the sidecar dies or errors in the middle of a stream, the
  rest of that response goes out as the server wrote it and a warning is logged;
  the user's stream is never broken by the repair. The next request restarts
  the sidecar. An event that passes the client's SSE limit without its end
  (client-sse-limit) is not held either: it and the rest of the response go
  out as written, as `agui-state fix` passes them (SSE_BUFFER_LIMIT, §13)."
  (:require [agui-state.client :as client]
            [clojure.data.json :as json]
            [clojure.string :as str]
            [ring.core.protocols :as protocols])
  (:import (clojure.lang ExceptionInfo)
           (java.io ByteArrayInputStream ByteArrayOutputStream InputStream IOException
                    OutputStream)
           (java.nio ByteBuffer CharBuffer)
           (java.nio.charset CharsetDecoder CodingErrorAction StandardCharsets)))

(set! *warn-on-reflection* true)

;;; The sidecar

(defonce ^:private shared (atom nil))

(defn default-client
  "The client that every wrap-agui-state without :client shares: one sidecar per
  process, started on first use from AGUI_STATE_BIN, else agui-state on PATH.
  Each call has a timeout, so that a sidecar that stops answering cannot hold a
  response (it fails open instead)."
  []
  (or @shared
      (locking shared
        (or @shared (reset! shared (client/start {:timeout-ms 30000}))))))

(defn- restart-if-current!
  "Restarts c, unless another request already did: `seen` is the process that
  failed, and only while it is still c's process is it replaced, so that two
  requests that both saw it die start one new sidecar, not two in turn."
  [c ^Process seen]
  (locking c
    (when (identical? seen (client/process c))
      (client/restart c))))

(defn- open!
  "openStream on c, restarting the sidecar first if it is gone, or once after a
  call that found it gone (or silent): the next request after a failure is
  repaired again. Returns the stream id; throws what the second try throws."
  [c params]
  (let [seen (client/process c)]
    (when-not (.isAlive seen) (restart-if-current! c seen))
    (try (:stream-id (client/open-stream c params))
         (catch ExceptionInfo e
           (if (#{:sidecar-exited :timeout} (:kind (ex-data e)))
             (do (restart-if-current! c (client/process c))
                 (:stream-id (client/open-stream c params)))
             (throw e))))))

;;; The request and the response

(defn- header
  "The value of the response header `name`, whatever the case of its key (Ring
  leaves header keys as the handler wrote them); the first, if there are several."
  [response ^String name]
  (some (fn [[k v]] (when (.equalsIgnoreCase name (str k)) (if (string? v) v (first v))))
        (:headers response)))

(defn- without-header [headers ^String name]
  (into {} (remove (fn [[k _]] (.equalsIgnoreCase name (str k)))) headers))

(def ^:private ndjson-types #{"application/x-ndjson" "application/ndjson" "application/jsonl"})

(defn- framing
  "\"sse\", \"ndjson\" or nil (not an event stream), from a Content-Type, as
  protocol/README.md §14 names them."
  [content-type]
  (when content-type
    (let [media (str/lower-case (str/trim (first (str/split content-type #";" 2))))]
      (cond (= media "text/event-stream") "sse"
            (ndjson-types media) "ndjson"))))

(defn- baseline
  "RunAgentInput.state from the request body's bytes, when it is an object; nil
  otherwise, and openStream then starts from {} as `proxy` does (§14)."
  [^bytes body]
  (when (and body (pos? (alength body)))
    (try (let [input (json/read-str (String. body StandardCharsets/UTF_8))
               state (when (map? input) (get input "state"))]
           (when (map? state) state))
         (catch Exception _ nil))))

;;; The repairing stream

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

(defn- repairing-stream
  "An OutputStream onto `out` that hands what is written, decoded as UTF-8
  incrementally (a character a flush cuts in two waits for its other bytes), to
  fixStream on each flush, and writes what comes back. Only whole events go to
  the sidecar: the unfinished one stays here, so that whatever the sidecar held
  when it failed can still be sent as the server wrote it. Returns {:stream
  :abandon}; abandon closes the sidecar's stream when the response will not end
  normally.

  The unfinished event is held only up to client-sse-limit: past it the sidecar
  would pass that event and the rest on unread, so the middleware does the same
  at once (give-up!) rather than hold an event that may never end. It counts the
  decoded text, whose length is exactly the UTF-16 length the sidecar counts;
  the few bytes of a character still being decoded are left out, so it never
  gives up on an event the sidecar would still read."
  [^OutputStream out c stream-id framing warn]
  (let [pending (ByteArrayOutputStream.)  ; written, not yet decoded
        ^CharsetDecoder decoder (-> StandardCharsets/UTF_8 .newDecoder
                                    (.onMalformedInput CodingErrorAction/REPLACE)
                                    (.onUnmappableCharacter CodingErrorAction/REPLACE))
        tail (StringBuilder.)              ; decoded, not yet sent: the unfinished event
        scan (volatile! [0 true])          ; sse-cut's place in tail
        cut-fn (if (= framing "ndjson") ndjson-cut sse-cut)
        mode (volatile! :repair)           ; :repair, :raw (failed open), :closed
        lock (Object.)
        forget! (fn [] (try (client/close-stream c stream-id) (catch Exception _ nil)))
        decode! (fn [end?]
                  (let [in (ByteBuffer/wrap (.toByteArray pending))
                        chars (CharBuffer/allocate (inc (.remaining in)))]
                    (.decode decoder in chars (boolean end?))
                    (when end? (.flush decoder chars))
                    (.append tail (.flip chars))
                    (.reset pending)
                    (.write pending (.array in) (.position in) (.remaining in))))
        fail-open! (fn [what ^Exception e ^String unanswered]
                     (warn (str "agui-state.ring: " what " failed on stream " stream-id ": "
                                (.getMessage e) "; the rest of this response goes out unrepaired"))
                     (vreset! mode :raw)
                     (when-not (= :sidecar-exited (:kind (ex-data e))) (forget!))
                     (write-text out unanswered)
                     (write-text out (str tail))
                     (.setLength tail 0)
                     (.writeTo pending out)
                     (.reset pending))
        ;; The held text passed the limit. Only whole events went to the sidecar, so
        ;; closing its stream gives back nothing of this one; whatever it does
        ;; give back comes before it.
        give-up! (fn []
                   (warn (str "agui-state.ring: stream " stream-id ": an event passed "
                              (quot (long client-sse-limit) (* 1024 1024)) " MiB without its end"
                              " (the client's SSE limit); the rest of this response goes through"
                              " unrepaired"))
                   (vreset! mode :raw)
                   (when-let [reply (try (client/close-stream c stream-id) (catch Exception _ nil))]
                     (write-text out (:text reply)))
                   (write-text out (str tail))
                   (.setLength tail 0)
                   (.writeTo pending out)
                   (.reset pending))
        send! (fn [^String text]
                (let [reply (try (client/fix-stream c {:stream-id stream-id :text text})
                                 (catch Exception e (fail-open! "fixStream" e text) nil))]
                  (when reply (write-text out (:text reply)))
                  reply))
        ;; The held text is scanned in place from where the last scan stopped, and
        ;; only the whole events are copied out: a flush costs what it brought.
        drain! (fn []
                 (decode! false)
                 (let [[from start?] @scan
                       [cut scanned start?] (cut-fn tail from start?)]
                   (if (neg? (long cut))
                     (vreset! scan [scanned start?])
                     (let [whole (.substring tail 0 (int cut))]
                       (.delete tail 0 (int cut))
                       (vreset! scan [(- (long scanned) (long cut)) start?])
                       (send! whole)))
                   (when (and (= @mode :repair) (> (.length tail) (long client-sse-limit)))
                     (give-up!))))
        finish! (fn []
                  (decode! true)
                  (let [s (str tail)
                        sent (when (pos? (.length s))
                               (.setLength tail 0)
                               (send! s))]
                    (when (= @mode :repair)
                      (let [reply (try (client/close-stream c stream-id)
                                       (catch Exception e
                                         ;; The sidecar held s: send it as it came, unless
                                         ;; fixStream already answered part of it.
                                         (fail-open! "closeStream" e (if (seq (:text sent)) "" s))
                                         nil))]
                        (when reply (write-text out (:text reply)))))))
        ;; Writing to the client failed: it went away. The sidecar's stream is
        ;; closed at once rather than left for its idle limit (§14).
        guard (fn [f] (try (f) (catch IOException e
                                 (when (= @mode :repair) (forget!))
                                 (vreset! mode :closed)
                                 (throw e))))
        stream (proxy [OutputStream] []
                 (write
                   ([b] (if (bytes? b)
                          (let [^bytes bs b] (.write ^OutputStream this bs 0 (alength bs)))
                          (.write ^OutputStream this (byte-array [(unchecked-byte b)]) 0 1)))
                   ([bs off len]
                    (locking lock
                      (case @mode
                        :repair (do (.write pending ^bytes bs (int off) (int len))
                                    (when (> (.size pending) (long drain-bytes)) (guard drain!)))
                        :raw (.write out ^bytes bs (int off) (int len))
                        :closed (throw (IOException. "stream closed"))))))
                 (flush []
                   (locking lock
                     (case @mode
                       :repair (guard (fn [] (drain!) (.flush out)))
                       :raw (.flush out)
                       nil)))
                 (close []
                   (locking lock
                     (when-not (= @mode :closed)
                       (try (when (= @mode :repair) (guard finish!))
                            (finally (vreset! mode :closed)
                                     (.close out)))))))]
    {:stream stream
     :abandon (fn [] (locking lock
                       (when (= @mode :repair) (forget!))
                       (vreset! mode :closed)))}))

(defn- repaired-body
  "A StreamableResponseBody that writes `body` through a repairing stream,
  opened when the adapter starts writing. If the stream cannot be opened, the
  body goes as it is, with a warning."
  [body response framing state {:keys [own snapshots join-keys client warn]}]
  (reify protocols/StreamableResponseBody
    (write-body-to-stream [_ _ out]
      (let [params (cond-> {:framing framing}
                     state (assoc :state state)
                     (seq own) (assoc :own (vec own))
                     snapshots (assoc :snapshots snapshots)
                     join-keys (assoc :join-keys true))
            ;; Starting the sidecar is inside the try: a missing binary fails open too.
            opened (try (let [c (or client (default-client))] {:c c :id (open! c params)})
                        (catch Exception e
                          (warn (str "agui-state.ring: openStream failed: " (.getMessage e)
                                     "; this response goes out unrepaired"))
                          nil))]
        (if-not opened
          (protocols/write-body-to-stream body response out)
          (let [{:keys [^OutputStream stream abandon]}
                (repairing-stream out (:c opened) (:id opened) framing warn)]
            (try (protocols/write-body-to-stream body response stream)
                 ;; Ring's protocol closes the stream after the body; a body that
                 ;; does not is closed here (closing twice is nothing).
                 (.close stream)
                 (catch Throwable t (abandon) (throw t)))))))))

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
    :paths      the request URIs to repair (exact :uri values); nil, every one
    :client     an agui-state.client to use; default (default-client), one per
                process, started on first use
    :warn       a function of one string, called for each warning; default
                prints it to stderr
  Put it inside any compression middleware, so that it sees the body before it
  is encoded: a response with a Content-Encoding passes untouched, with a warning."
  ([handler] (wrap-agui-state handler {}))
  ([handler opts]
   (let [opts (update opts :warn #(or % stderr-warning))
         paths (some-> (:paths opts) set)
         wanted? (fn [request] (or (nil? paths) (contains? paths (:uri request))))
         prepare (fn [request]
                   ;; The body is read once, here, and the handler gets the same bytes.
                   (let [body (when (instance? InputStream (:body request))
                                (.readAllBytes ^InputStream (:body request)))]
                     [(cond-> request body (assoc :body (ByteArrayInputStream. body))) body]))
         repair (fn [response body]
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
                      (-> response
                          (update :headers without-header "Content-Length")
                          (assoc :body (repaired-body (:body response) response framing
                                                      (baseline body) opts))))))]
     (fn
       ([request]
        (if-not (wanted? request)
          (handler request)
          (let [[request body] (prepare request)]
            (some-> (handler request) (repair body)))))
       ([request respond raise]
        (if-not (wanted? request)
          (handler request respond raise)
          (let [[request body] (prepare request)]
            (handler request #(respond (some-> % (repair body))) raise))))))))
