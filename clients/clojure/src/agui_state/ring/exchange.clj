(ns agui-state.ring.exchange
  "One request through agui-state.ring/wrap-agui-state, as an I/O adapter over
  the sidecar (protocol/README.md §14, §16): the request classed
  (classifyRequest, with the user's :paths and :resume), its body teed
  (agui-state.ring.body), a rejoin answered (agui-state.ring.rejoin), and at
  the response head the stream opened with the raw request and head
  (openStream), whose headers are written as given and whose body goes through
  agui-state.ring.stream. The sidecar decides what a request is, which paths,
  the framing, the baseline, the headers and the limits; every call that
  fails lets the request or the response go as it is (fail open)."
  (:require [agui-state.client :as client]
            [agui-state.ring.body :as body]
            [agui-state.ring.rejoin :as rejoin]
            [agui-state.ring.sidecar :as sidecar]
            [agui-state.ring.stream :as stream]
            [clojure.string :as str]
            [ring.core.protocols :as protocols])
  (:import (java.io InputStream OutputStream PrintWriter StringWriter)))

(set! *warn-on-reflection* true)

(defn- header-pairs
  "Ring headers as [name value] pairs, as the sidecar takes them: a request's as
  the adapter gives them (it joined repeated ones), a response's as the handler
  wrote them (a value may be a seq of several)."
  [headers]
  (vec (for [[k v] headers, v (if (sequential? v) v [v])] [(name k) (str v)])))

(defn- ring-headers
  "[name value] pairs as Ring response headers: a name given twice is one
  header with a vector of values."
  [pairs]
  (reduce (fn [m [k v]] (update m k #(cond (nil? %) v (vector? %) (conj % v) :else [% v])))
          {} pairs))

(defn- target [request]
  (str (:uri request) (some->> (:query-string request) (str "?"))))

(defn- head
  "The request as the sidecar takes it: method, path with its query, header pairs."
  [request]
  {"method" (str/upper-case (name (or (:request-method request) :get)))
   "path" (target request)
   "headers" (header-pairs (:headers request))})

(defn classify
  "classifyRequest's reply for `request` ({:kind :handled :body-bytes}), or nil,
  with one line, when the sidecar cannot be had: the request then goes to the
  handler untouched."
  [c request {:keys [paths resume warn]}]
  (let [h (head request)]
    (try (second (sidecar/call! (c) #(client/classify-request
                                        % (cond-> {:method (get h "method") :path (get h "path")
                                                   :headers (get h "headers")}
                                            (some? paths) (assoc :paths (vec paths))
                                            (false? resume) (assoc :resume false)))))
         (catch Exception e
           (warn (str "agui-state.ring: " (:uri request) ": classifyRequest failed ("
                      (.getMessage e) "); the request goes to the app"))
           nil))))

(defn teed
  "[request tee]: request with its body teed up to `limit` bytes (body/tee)."
  [request limit]
  (if (instance? InputStream (:body request))
    (let [length (some-> (get-in request [:headers "content-length"]) parse-long)
          t (body/tee (:body request) limit length)]
      [(assoc request :body (:in t)) t])
    [request nil]))

(defn answer-rejoin
  "The answer to a rejoin or a reload (classifyRequest's `kind`), its body read
  up to `limit` bytes: the handler is never called."
  [kind request limit c opts]
  (let [[_ t] (teed request limit)]
    (rejoin/respond kind (head request) (if t ((:read-ahead! t)) "") c
                    (select-keys opts [:warn :log]))))

(defn- trace
  "A Throwable and its stack trace, as the adapter would have logged it."
  ^String [^Throwable t]
  (let [w (StringWriter.)]
    (.printStackTrace t (PrintWriter. w))
    (str/trimr (str w))))

(defn- repaired-body
  "A StreamableResponseBody that writes `body` through a repairing stream on the
  sidecar's stream `opened`. A body that throws is a run broken off: when the
  sidecar ended that run itself (closeStream's `ended`, issue 40: the closes and
  a RUN_ERROR INCOMPLETE_STREAM), the response has ended cleanly, the client
  holds a whole, failed run, and the exception is said once to :warn instead of
  rethrown (which would break the response off); otherwise it is rethrown."
  [body response c opened params {:keys [warn] :as opts}]
  (reify protocols/StreamableResponseBody
    (write-body-to-stream [_ _ out]
      (let [{:keys [^OutputStream stream abandon]} (stream/repairing-stream out c opened params opts)]
        (try (protocols/write-body-to-stream body response stream)
             ;; Ring's protocol closes the stream after the body; a body that
             ;; does not is closed here (closing twice is nothing).
             (.close stream)
             (catch Throwable t
               (if (abandon)
                 (do (when (instance? InterruptedException t) (.interrupt (Thread/currentThread)))
                     (warn (str "agui-state.ring: stream " (:stream-id opened) ": the app's response threw;"
                                " the run was ended with a RUN_ERROR (INCOMPLETE_STREAM) and the response"
                                " ended cleanly: " (trace t))))
                 (throw t))))))))

(defn repair
  "The handler's `response` to `request` (its body teed by `tee`), at its head:
  the body read on up to the limit, the stream opened with both, and the
  response given openStream's headers and a repairing body; or the response as
  it is when openStream passes it (`pass`) or fails."
  [request tee response c {:keys [own snapshots join-keys resume lifecycle warn] :as opts}]
  (if (nil? (:body response))
    response
    ;; No body stream (a direct call's GET): the body is empty, not left out.
    (let [text (if tee ((:read-ahead! tee)) "")
          params (cond-> {:request (cond-> (head request) text (assoc "body" text))
                          :response {"status" (:status response 200)
                                     "headers" (header-pairs (:headers response))}}
                   (seq own) (assoc :own (vec own))
                   snapshots (assoc :snapshots snapshots)
                   join-keys (assoc :join-keys true)
                   (false? resume) (assoc :resume false)
                   ;; Left out when not given: the sidecar's default (pass), and a
                   ;; sidecar before issue 40 takes the call.
                   lifecycle (assoc :lifecycle lifecycle))
          ;; Starting the sidecar is inside the try: a missing binary fails open too.
          [cl opened] (try (let [cl (c)] [cl (sidecar/open! cl params)])
                           (catch Exception e
                             (warn (str "agui-state.ring: openStream failed: " (.getMessage e)
                                        "; this response goes out unrepaired"))
                             nil))
          {:keys [pass baseline]} opened]
      (cond
        (nil? opened) response
        ;; Not an event stream is no news; a stream the sidecar cannot read is (§14).
        pass (do (when-not (= "NOT_AN_EVENT_STREAM" (get pass "code"))
                   (warn (str "agui-state.ring: " (get pass "message"))))
                 response)
        :else
        (do (when baseline (warn (str "agui-state.ring: " (:uri request) ": " (get baseline "message")
                                      " (" (get baseline "code") ")")))
            (assoc response
                   :headers (ring-headers (:headers opened))
                   :body (repaired-body (:body response) response cl opened params opts)))))))
