(ns agui-state.stream-edge-test
  "The stream edge's conformance table (test/fixtures/stream-edge/cases.json)
  through agui-state.ring/wrap-agui-state in a real Jetty, against the real
  binary: the proxy's tests and the other middleware suites play the same rows,
  so that no rule of the edge (which paths, which content types, the body's
  limit, the headers, the options that conflict) can differ between them
  (protocol/README.md §14). One sidecar, started with the table's sidecarArgs,
  serves every row; each row's middleware has the row's options, in front of an
  app that answers the row's response and records whether it was called and
  the body it received. Requests go over a plain socket, so that every header
  is sent as the row gives it."
  (:require [agui-state.ring :as r]
            [agui-state.test-support :as s]
            [clojure.data.json :as json]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [ring.adapter.jetty :as jetty])
  (:import (java.io ByteArrayOutputStream InputStream)
           (java.net Socket)
           (java.nio.charset StandardCharsets)
           (java.util Arrays)
           (org.eclipse.jetty.server Server ServerConnector)))

(set! *warn-on-reflection* true)

(def ^:private table
  (some-> (s/repo-file "test/fixtures/stream-edge/cases.json") slurp json/read-str))

(defn- mine?
  "Whether this suite plays the row: it names no runners, or names this one."
  [row]
  (let [runners (get row "runners")] (or (nil? runners) (some #{"clojure"} runners))))

(def ^:private option-keys
  {"paths" :paths "resume" :resume "own" :own "snapshots" :snapshots "joinKeys" :join-keys
   "store" :store "detachGrace" :detach-grace})

(defn- middleware-options
  "The row's options as wrap-agui-state's: every one the table may give is
  mapped; one this runner does not know fails the row rather than being dropped.
  \"sidecar\": \"given\" is every row's here: each middleware is given the
  table's sidecar."
  [o]
  (into {} (for [[k v] (dissoc o "sidecar")]
             [(or (option-keys k) (throw (ex-info (str "an option this runner does not know: " k) {:option k}))) v])))

(defn- utf8 ^bytes [^String s] (.getBytes s StandardCharsets/UTF_8))

(defn- request-body
  "The row's request body, its @PAD@ marker replaced with `pad` x's, as bytes; nil for none."
  [{:strs [body pad]}]
  (when body (utf8 (str/replace body "@PAD@" (apply str (repeat (or pad 0) \x))))))

(defn- ring-headers [pairs]
  (reduce (fn [m [k v]] (update m k #(cond (nil? %) v (vector? %) (conj % v) :else [% v]))) {} pairs))

(defn- app
  "The row's app: its response to every request, each call recorded with the
  body it read (the whole of it, before answering)."
  [{:strs [status headers body]} calls]
  (fn [request]
    (let [got (some-> ^InputStream (:body request) .readAllBytes)]
      (swap! calls conj (or got (byte-array 0)))
      {:status status :headers (ring-headers headers) :body (or body "")})))

;;; A plain HTTP/1.1 client: what the row sends, and the answer read to its end.

(defn- index-of ^long [^bytes bs ^bytes needle from]
  (loop [i (long from)]
    (cond (> (+ i (alength needle)) (alength bs)) -1
          (Arrays/equals bs (int i) (int (+ i (alength needle))) needle 0 (alength needle)) i
          :else (recur (inc i)))))

(defn- dechunk
  "A chunked body (RFC 9112 §7.1) as its bytes."
  ^bytes [^bytes bs]
  (let [out (ByteArrayOutputStream.) crlf (utf8 "\r\n")]
    (loop [at 0]
      (let [eol (index-of bs crlf at)
            size (Long/parseLong (str/trim (first (str/split (String. bs (int at) (int (- eol at)) StandardCharsets/ISO_8859_1) #";"))) 16)]
        (when (pos? size)
          (.write out bs (int (+ eol 2)) (int size))
          (recur (+ eol 2 size 2)))))
    (.toByteArray out)))

(defn- exchange!
  "Sends the row's request to port; returns {:status :headers :body}, the
  headers by lower-case name (a name sent twice, its values joined by \", \")."
  [port {:strs [method path headers] :as req}]
  (with-open [sock (Socket. "127.0.0.1" (int port))]
    (.setSoTimeout sock 60000)                    ; a hang guard, never an assertion
    (let [^bytes body (request-body req)
          given? (fn [n] (some #(.equalsIgnoreCase ^String n ^String (first %)) headers))
          head (str method " " path " HTTP/1.1\r\n"
                    (when-not (given? "host") "Host: 127.0.0.1\r\n")
                    "Connection: close\r\n"
                    (apply str (for [[k v] headers] (str k ": " v "\r\n")))
                    (when (and body (not (given? "content-length"))) (str "Content-Length: " (alength body) "\r\n"))
                    "\r\n")
          ^java.io.OutputStream out (.getOutputStream sock)
          ;; Sent from another thread: an answer may come before the whole body is read.
          sending (future (try (.write out (.getBytes head StandardCharsets/ISO_8859_1))
                               (when body (.write out body))
                               (.flush out)
                               (catch java.io.IOException _ nil)))
          bs (.readAllBytes (.getInputStream sock))
          _ (deref sending 60000 nil)
          end (index-of bs (utf8 "\r\n\r\n") 0)
          [status-line & lines] (str/split-lines (String. bs 0 (int end) StandardCharsets/ISO_8859_1))
          hs (reduce (fn [m line]
                       (let [[k v] (str/split line #":\s*" 2)
                             k (str/lower-case k)]
                         (assoc m k (if-let [was (get m k)] (str was ", " v) v))))
                     {} lines)
          raw (Arrays/copyOfRange bs (int (+ end 4)) (alength bs))]
      {:status (Long/parseLong (second (str/split status-line #" ")))
       :headers hs
       :body (String. (if (= "chunked" (some-> (get hs "transfer-encoding") str/lower-case)) (dechunk raw) raw)
                      StandardCharsets/UTF_8)})))

(defn- strip-ids [^String body] (str/replace body #"(?m)^id:[^\n]*\n" ""))

(defn- play
  "One row: the middleware with its options on `sc`, behind `serve` (the
  server's handler), its request sent, its expect checked."
  [sc serve port {:strs [options request response expect]}]
  (let [calls (atom [])
        opts (merge (middleware-options options) {:sidecar sc :warn (fn [_]) :log (fn [_])})]
    (if-let [code (get expect "error")]
      (let [e (try (r/wrap-agui-state (app response calls) opts) nil
                   (catch clojure.lang.ExceptionInfo e e))]
        (is (= code (:code (ex-data e))) "constructing the middleware fails")
        (is (str/includes? (str (ex-message e) (pr-str (ex-data e))) code) "the error names its code"))
      (do (reset! serve (r/wrap-agui-state (app response calls) opts))
          (let [{:keys [status headers body]} (exchange! port request)
                {want-app "app" want-status "status" want-body "body" ids "ids"
                 want-headers "headers" app-body "appBody"} expect]
            (when (some? want-app)
              (is (= (if want-app 1 0) (count @calls)) (if want-app "the app was called" "the app was not called")))
            (when want-status (is (= want-status status) "status"))
            (when (some? want-body)
              (is (= want-body (if (= ids "strip") (strip-ids body) body)) "body"))
            (doseq [[k v] want-headers]
              (is (= v (get headers (str/lower-case k))) (str "header " k)))
            (when (= app-body "same")
              (is (= 1 (count @calls)))
              (is (let [^bytes sent (or (request-body request) (byte-array 0))
                        ^bytes got (first @calls)]
                    (Arrays/equals sent got))
                  "the app received the body exactly as sent")))))))

(deftest every-row-of-the-stream-edge-table
  (is (some? table) "test/fixtures/stream-edge/cases.json is there")
  (let [rows (filter mine? (get table "cases"))
        played (atom 0)
        serve (atom (fn [_] {:status 500 :body "no row"}))]
    (is (= 29 (count rows)) "the rows this suite plays")
    (with-open [^java.io.Closeable sc (r/sidecar {:path (s/bin) :args (get table "sidecarArgs") :env {"AGUI_STATE_LOG_LEVEL" "warn"}})]
      (let [^Server server (jetty/run-jetty (fn [request] (@serve request)) {:host "127.0.0.1" :port 0 :join? false})
            port (.getLocalPort ^ServerConnector (first (.getConnectors server)))]
        (try
          (doseq [row rows]
            (testing (get row "name")
              ;; A row that throws fails alone: the others are still played.
              (is (nil? (try (play sc serve port row) (swap! played inc) nil (catch Exception e e))))))
          (finally (.stop server)))))
    (is (= (count rows) @played) "every row was played")))
