(ns agui-state.ring.rejoin
  "The rejoins of agui-state.ring/wrap-agui-state (protocol/README.md §16): a
  request that carries Last-Event-ID (a dropped stream sent again) or a POST to
  <agent path>/connect (a reloaded page) is answered from the sidecar's run log
  (rejoinStream, then readRejoin until the run ends), and never reaches the
  handler. The run may be one another process executes: with a shared
  `--store redis://...`, any worker serves it."
  (:require [agui-state.client :as client]
            [clojure.data.json :as json]
            [clojure.string :as str]
            [ring.core.protocols :as protocols])
  (:import (java.io IOException OutputStream)
           (java.nio.charset StandardCharsets)))

(set! *warn-on-reflection* true)

(def ^:private connect-suffix
  "A reload's path is the agent's with this after it (CopilotKit's convention)."
  "/connect")

(defn kind
  ":rejoin (a Last-Event-ID header), :connect (a POST to a path ending in
  /connect, the rest of which is an agent path `wanted?`), or nil."
  [request wanted?]
  (let [last-id (get-in request [:headers "last-event-id"])
        uri (str (:uri request))]
    (cond
      (and (not (str/blank? last-id)) (wanted? uri)) :rejoin
      (and (= :post (:request-method request))
           (str/ends-with? uri connect-suffix)
           (> (count uri) (count connect-suffix))
           (wanted? (subs uri 0 (- (count uri) (count connect-suffix)))))
      :connect)))

(def gone-body
  "The body of a refused or unknown rejoin, the proxy's (§16): one answer for
  every case, so a refusal tells nothing."
  (json/write-str {"error" {"code" "resume_unknown"
                            "message" (str "no run to resume from this Last-Event-ID: it is unknown,"
                                           " expired, or not yours; start a new run")}}))

(defn- refused
  "410 Gone for a rejoin, 204 No Content (an empty stream) for a reload."
  [kind]
  (if (= kind :rejoin)
    {:status 410 :headers {"Content-Type" "application/json"} :body gone-body}
    {:status 204 :headers {} :body nil}))

(def ^:private wait-ms
  "How long one readRejoin waits for an event: well within the client's call
  timeout, and short enough that a rejoin whose client left is noticed soon."
  2000)

(defn- write-text [^OutputStream out ^String s]
  (when (pos? (.length s)) (.write out (.getBytes s StandardCharsets/UTF_8))))

(def ^:private broken-off
  "The exception that breaks a rejoin's answer off, thrown out of its body: the
  adapter then aborts the committed response (the client sees a failed body,
  never a clean end). Under Jetty it is Jetty's EofException, a QuietException,
  which Jetty logs at debug only, not as a warning of its own: the middleware's
  line says what happened. Elsewhere, an IOException."
  (let [eof (try (.getConstructor (Class/forName "org.eclipse.jetty.io.EofException")
                                  (into-array Class [String]))
                 (catch Exception _ nil))]
    (fn ^IOException [^String message]
      (if eof
        (.newInstance ^java.lang.reflect.Constructor eof (object-array [message]))
        (IOException. message)))))

(defn- body
  "Streams the read until the run ends: a run that finished ends the response;
  any other end (cancelled, evicted, unresumable), or a sidecar lost in the
  middle, throws out of the body (broken-off), which breaks the response off,
  so that the client never takes a cut run for a whole one. A client that
  leaves closes the read. Either way, one line says why the answer ended early:
  `warn` for the run's end or the sidecar, `log` for a client that left."
  [view read-id path {:keys [warn log]}]
  (let [ended (fn [say why] (say (str "agui-state.ring: " path ": the rejoin's answer ended early: " why)))]
    (reify protocols/StreamableResponseBody
      (write-body-to-stream [_ _ out]
        (let [^OutputStream out out]
          (loop []
            (let [r (try (client/read-rejoin view {:read-id read-id :wait-ms wait-ms})
                         (catch Exception e e))]
              (if (instance? Exception r)
                (do (ended warn (str "readRejoin failed (" (.getMessage ^Exception r) ")"))
                    (throw (broken-off "the rejoin could not be read to its end")))
                (do (try (write-text out (:text r))
                         (.flush out)
                         (catch IOException e
                           (when-not (:done r)
                             (try (client/close-rejoin view read-id) (catch Exception _ nil)))
                           (ended log "the client left")
                           (throw e)))
                    (cond
                      (not (:done r)) (recur)
                      (= "finished" (:end r)) (.close out)
                      :else (do (ended warn (str "the run ended " (:end r)))
                                (throw (broken-off (str "the run ended " (:end r)
                                                        ": the rejoin is broken off"))))))))))))))

(defn respond
  "The answer to a rejoin or a reload (`kind`), given the request's RunAgentInput
  (`input`, a map or nil) and the sidecar's client `c` (nil if it could not be
  had). Whatever fails, the answer is the refusal's (fail open: a rejoin that
  cannot be served is 410, a reload 204), and the handler is never called.
  `say` holds the middleware's :warn and :log."
  [kind request input c {:keys [warn] :as say}]
  (let [thread-id (get input "threadId")
        uri (str (:uri request))
        path (if (= kind :connect) (subs uri 0 (- (count uri) (count connect-suffix))) uri)
        headers (:headers request)]
    (if-not (and c (string? thread-id) (not= "" thread-id))
      (refused kind)
      (let [view (client/pinned c)
            r (try (client/rejoin-stream view (cond-> {:thread-id thread-id :path path
                                                       :authorization (get headers "authorization")
                                                       :cookie (get headers "cookie")}
                                                (= kind :rejoin)
                                                (assoc :last-event-id (get headers "last-event-id"))))
                   (catch Exception e e))]
        (cond
          (not (instance? Exception r))
          {:status (:status r) :headers (:headers r) :body (body view (:read-id r) path say)}
          (= :resume-unknown (:kind (ex-data r))) (refused kind)
          :else (do (warn (str "agui-state.ring: rejoinStream failed: " (.getMessage ^Exception r)
                               "; answered as nothing to resume"))
                    (refused kind)))))))
