(ns agui-state.upload-test
  "Issue 39 §5: with every path handled, a 200 MiB upload reaches the handler
  as it arrives. The middleware tees the request body (agui-state.ring.body):
  it never reads more than classifyRequest's bodyBytes ahead of the handler,
  and holds no more than that. The upload is a counting InputStream (byte i is
  i mod 251, so that order is checked too), the handler is called as an
  adapter calls it, against the real binary with a small --max-request-body."
  (:require [agui-state.client :as c]
            [agui-state.ring :as r]
            [agui-state.test-support :as s]
            [clojure.test :refer [deftest is testing]]
            [ring.core.protocols :as protocols])
  (:import (java.io ByteArrayOutputStream InputStream OutputStream)
           (java.nio.charset StandardCharsets)
           (java.util Arrays)
           (java.util.concurrent.atomic AtomicLong)))

(set! *warn-on-reflection* true)

(def ^:private size (* 200 1024 1024))

(def ^:private ^"[B" pattern
  ;; Byte i of the upload is i mod 251: any slice of up to 64 KiB starting at
  ;; position p is pattern's slice starting at p mod 251.
  (let [bs (byte-array (+ 251 65536))]
    (dotimes [i (alength bs)] (aset bs i (unchecked-byte (mod i 251))))
    bs))

(defn- upload
  "An InputStream of `size` bytes, counting in `given` what it gave."
  ^InputStream [^AtomicLong given]
  (proxy [InputStream] []
    (read
      ([] (let [b (byte-array 1)] (if (pos? (.read ^InputStream this b 0 1)) (bit-and 0xff (aget b 0)) -1)))
      ([bs off len]
       (let [at (.get given)
             n (int (min (long len) 65536 (- (long size) at)))]
         (if (<= n 0)
           -1
           (do (System/arraycopy pattern (int (mod at 251)) bs (int off) n)
               (.addAndGet given n)
               n)))))))

(defn- read-all
  "Reads `in` to its end, 64 KiB at a time, checking each byte's place; before
  each read, (seen given-so-far read-so-far). Returns [bytes-read in-order?]."
  [^InputStream in seen]
  (let [buf (byte-array 65536)]
    (loop [total 0, ok true]
      (seen total)
      (let [n (.read in buf)]
        (if (neg? n)
          [total ok]
          (recur (+ total n)
                 (and ok (Arrays/equals buf 0 n pattern (int (mod total 251)) (int (+ (mod total 251) n))))))))))

(def ^:private sse
  "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t1\",\"runId\":\"u1\"}\n\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t1\",\"runId\":\"u1\"}\n\n")

(defn- request [body]
  {:request-method :post :uri "/agent" :headers {"content-type" "application/json"
                                                 "content-length" (str size)}
   :body body})

(defn- written [response]
  (let [out (ByteArrayOutputStream.)]
    (protocols/write-body-to-stream (:body response) response out)
    (.toString out "UTF-8")))

(deftest a-200-mib-upload-reaches-the-handler-as-it-arrives
  (with-open [^java.io.Closeable sc (r/sidecar {:path (s/bin) :args ["--max-request-body" "1M"] :env {"AGUI_STATE_LOG_LEVEL" "warn"}})]
    (let [limit (long (:body-bytes (c/classify-request (:client sc) {:method "POST" :path "/agent"
                                                                     :headers [["content-type" "application/json"]]})))
          warnings (atom [])
          opts {:sidecar sc :warn #(swap! warnings conj %) :log (fn [_])}]
      (is (< 0 limit (* 2 1024 1024)) "bodyBytes follows --max-request-body")
      (testing "a handler that reads the body before it answers"
        (let [given (AtomicLong.)
              ahead (atom 0)        ; the most the middleware read before the handler had it
              first-seen (atom nil)
              handler (fn [req]
                        (let [[n ok] (read-all (:body req)
                                               (fn [got]
                                                 (when (and (pos? (long got)) (nil? @first-seen))
                                                   (reset! first-seen (.get given)))
                                                 (swap! ahead max (- (.get given) (long got)))))]
                          {:status 200 :headers {"Content-Type" "text/event-stream"}
                           :body (str sse) ::read [n ok]}))
              response ((r/wrap-agui-state handler opts) (request (upload given)))]
          (is (= [size true] (::read response)) "the handler read all 200 MiB, in order")
          (is (<= (long @first-seen) 65536) "its first bytes came before the middleware read more")
          (is (<= (long @ahead) limit) "never more than bodyBytes ahead of it")
          (is (= size (.get given)) "nothing read twice, nothing left")
          (is (re-find #"RUN_FINISHED" (written response)) "the answer was repaired and went out")))
      (testing "a handler that answers first and reads the body in its streaming body"
        (let [given (AtomicLong.)
              at-head (atom nil)
              read (atom nil)
              handler (fn [req]
                        {:status 200 :headers {"Content-Type" "text/event-stream"}
                         :body (reify protocols/StreamableResponseBody
                                 (write-body-to-stream [_ _ out]
                                   (reset! at-head (.get given))
                                   (reset! read (read-all (:body req) (fn [_])))
                                   (with-open [^OutputStream out out]
                                     (.write out (.getBytes ^String sse StandardCharsets/UTF_8)))))})
              response ((r/wrap-agui-state handler opts) (request (upload given)))
              out (written response)]
          (is (= limit @at-head) "at the head the middleware read on up to bodyBytes, and stopped there")
          (is (= [size true] @read) "the handler got those bytes first, then the rest, in order")
          (is (re-find #"RUN_FINISHED" out))
          (is (some #(re-find #"BODY_TOO_LARGE|too large|bodyBytes|max-request-body" %) @warnings)
              (str "the baseline could not be read, and a line says why: " (pr-str @warnings))))))))
