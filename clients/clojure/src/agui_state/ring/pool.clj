(ns agui-state.ring.pool
  "The threads the middleware's blocking work runs on, so that none of it runs
  on a thread others wait for: each detached stream's grace check (a fixStream
  call, up to sidecar/repair-call-ms), apart from the one thread that only
  schedules them, so that one hung call stalls no other stream; and the async
  arity's request work (reading the body, classifyRequest, rejoinStream and a
  rejoin's answer), apart from the adapter's thread, which an async handler
  must give back at once. Each pool is bounded (a flood queues rather than
  starting threads without end), its threads daemons that end when idle."
  (:import (java.util.concurrent ExecutorService LinkedBlockingQueue ThreadFactory ThreadPoolExecutor
                                 TimeUnit)
           (java.util.concurrent.atomic AtomicLong)))

(set! *warn-on-reflection* true)

(defn- bounded
  "At most n threads named `name`-1, -2, ...; more work waits in the queue."
  ^ExecutorService [^String name n]
  (let [ids (AtomicLong.)]
    (doto (ThreadPoolExecutor. (int n) (int n) 30 TimeUnit/SECONDS (LinkedBlockingQueue.)
                               (reify ThreadFactory
                                 (newThread [_ r]
                                   (doto (Thread. ^Runnable r (str name "-" (.incrementAndGet ids)))
                                     (.setDaemon true)))))
      (.allowCoreThreadTimeOut true))))

(defonce ^:private checks
  ;; A stream has at most one check at a time (stream.clj), each at most one call long.
  (bounded "agui-state-grace" 64))

(defonce ^:private requests
  ;; A rejoin's answer holds its thread until the run ends: room for many.
  (bounded "agui-state-request" 256))

(defn check!
  "Runs (f) on a grace-check thread."
  [f] (.execute ^ExecutorService checks ^Runnable f))

(defn request!
  "Runs (f) on a request thread."
  [f] (.execute ^ExecutorService requests ^Runnable f))
