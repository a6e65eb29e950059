(ns agui-state.ring.rejoin
  "The rejoins of agui-state.ring/wrap-agui-state (protocol/README.md §16): a
  request the sidecar classed as a rejoin (a dropped stream sent again) or a
  reload (a reloaded page) is answered from the sidecar's run log
  (rejoinStream, then readRejoin until the run ends), and never reaches the
  handler. The sidecar decides everything about it (who may, which headers,
  the refusal): this namespace only carries the request there and the answer
  back. The run may be one another process executes: with a shared
  `--store redis://...`, any worker serves it."
  (:require [agui-state.client :as client]
            [agui-state.ring.sidecar :as sidecar]
            [ring.core.protocols :as protocols])
  (:import (java.io IOException OutputStream)
           (java.nio.charset StandardCharsets)))

(set! *warn-on-reflection* true)

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

(def aborter
  "Called on the adapter's thread, a function of a Throwable that aborts the
  response being handled there, from any thread: the async arity writes an
  answer on a thread of its own, where a body that throws reaches no adapter.
  Under Jetty, its HttpChannel's abort (the client sees a failed body, never a
  clean end), found while Jetty binds the connection to its thread; elsewhere,
  one that rethrows."
  (let [current (try (.getMethod (Class/forName "org.eclipse.jetty.server.HttpConnection")
                                 "getCurrentConnection" (into-array Class []))
                     (catch Exception _ nil))
        rethrow (fn [^Throwable t] (throw t))]
    (fn []
      (if-let [conn (some-> ^java.lang.reflect.Method current (.invoke nil (object-array 0)))]
        (let [channel (clojure.lang.Reflector/invokeInstanceMethod conn "getHttpChannel" (object-array 0))]
          (fn [^Throwable t]
            (clojure.lang.Reflector/invokeInstanceMethod channel "abort" (object-array [t]))))
        rethrow))))

(def ^:private probe
  "What a rejoin's answer gets when readRejoin comes back empty: an SSE comment,
  which dispatches nothing (HTML Living Standard, 9.2.6; §16: a block without
  data gets no id). The adapter sees a client that left only when a write to it
  fails: without a write, the rejoin of a silent run would keep its read open,
  and so the run, detached, from its cancel after the grace, for ever."
  ":\n\n")

(defn- body-of
  "Streams the read until the run ends: a run that finished ends the response;
  any other end (cancelled, evicted, unresumable), or a sidecar lost in the
  middle, throws out of the body (broken-off), which breaks the response off,
  so that the client never takes a cut run for a whole one. A client that
  leaves closes the read, noticed while the run is silent too (probe). Either
  way, one line says why the answer ended early:
  `warn` for the run's end or the sidecar, `log` for a client that left."
  [view read-id path {:keys [warn log]}]
  (let [ended (fn [say why] (say (str "agui-state.ring: " path ": the rejoin's answer ended early: " why)))]
    (reify protocols/StreamableResponseBody
      (write-body-to-stream [_ _ out]
        (let [^OutputStream out out]
          (loop []
            ;; No :wait-ms: the sidecar's default decides (§16). Each reply is at most a
            ;; page; the flush below waits for the client to take it before the next.
            (let [r (try (sidecar/on view #(client/read-rejoin % {:read-id read-id}))
                         (catch Exception e e))]
              (if (instance? Exception r)
                (do (ended warn (str "readRejoin failed (" (.getMessage ^Exception r) ")"))
                    (throw (broken-off "the rejoin could not be read to its end")))
                (do (try (write-text out (if (or (:done r) (seq (:text r))) (:text r) probe))
                         (.flush out)
                         (catch IOException e
                           (when-not (:done r)
                             (try (sidecar/on view #(client/close-rejoin % read-id)) (catch Exception _ nil)))
                           (ended log "the client left")
                           (throw e)))
                    (cond
                      (not (:done r)) (recur)
                      (= "finished" (:end r)) (.close out)
                      :else (do (ended warn (str "the run ended " (:end r)))
                                (throw (broken-off (str "the run ended " (:end r)
                                                        ": the rejoin is broken off"))))))))))))))

(defn respond
  "The answer to a rejoin or a reload (`kind`, \"rejoin\" or \"reload\", as
  classifyRequest said), given the request (`head`: its method, path and header
  pairs) and its body's text (nil when it was not kept whole: left out), through the sidecar's client (`c` gives it, or
  throws). The sidecar's refusal is written exactly as it gives it. If the
  sidecar cannot be reached (fail open), a rejoin is answered 410 and a reload
  204, with an empty body, and one line says why. The handler is never called.
  `say` holds the middleware's :warn and :log."
  [kind head body c {:keys [warn] :as say}]
  (let [r (try (sidecar/call! (c) #(client/rejoin-stream % {:request (cond-> head body (assoc "body" body))}))
               (catch Exception e e))]
    (cond
      (vector? r)
      (let [[view {:keys [read-id status headers]}] r]
        {:status status :headers headers :body (body-of view read-id (get head "path") say)})
      (= :resume-unknown (:kind (ex-data r)))
      (let [{:strs [status headers body]} (:data (ex-data r))]
        {:status status :headers headers :body body})
      :else
      (do (warn (str "agui-state.ring: " (get head "path") ": rejoinStream failed ("
                     (.getMessage ^Exception r) "); answered " (if (= kind "rejoin") 410 204)
                     " with an empty body"))
          {:status (if (= kind "rejoin") 410 204) :headers {} :body ""}))))
