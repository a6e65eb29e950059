(ns agui-state.ring.body
  "The request body of a handled request, teed (protocol/README.md §14,
  classifyRequest's bodyBytes): the handler reads it as it arrives, through an
  InputStream that keeps a copy of the first bodyBytes; at the response head
  the middleware reads on, up to bodyBytes, if the body has not ended, and the
  handler gets those bytes after, in order. So nothing is read before the
  handler's first byte, and never more than bodyBytes ahead of it: an upload
  of any size streams to the handler as it comes."
  (:import (java.io IOException InputStream)
           (java.nio.charset StandardCharsets)
           (java.util Arrays)))

(set! *warn-on-reflection* true)

(defn- grown
  "buf with room for `need` bytes, doubled (at most to `limit`) when it has not."
  ^bytes [^bytes buf need limit]
  (if (<= (long need) (alength buf))
    buf
    (Arrays/copyOf buf (int (min (long limit) (max (long need) (* 2 (alength buf))))))))

(defn tee
  "The body `in` teed, keeping its first `limit` bytes; `length` is the
  request's Content-Length, if any. Returns {:in :read-ahead! :read}:
    :in           the InputStream the handler reads
    :read-ahead!  at the response head: reads on, up to the limit, unless the
                  body ended (the bytes read are the handler's next); returns
                  the body as text (UTF-8, bad bytes replaced) when the whole of
                  it is kept, else nil (past the limit, or cut off by the client)
    :read         how many bytes were read from `in` so far"
  [^InputStream in limit length]
  (let [limit (long limit)
        lock (Object.)
        ;; kept: the first `size` bytes of the body; the handler has had `served` of them.
        st (volatile! {:buf (byte-array (min limit 8192)) :size 0 :served 0 :read 0
                       :ended false :over false :broken false})
        keep! (fn [^bytes bs off n]
                (let [{:keys [buf size]} @st
                      size (long size)
                      take (min (- limit size) (long n))]
                  (when (pos? take)
                    (let [buf (grown buf (+ size take) limit)]
                      (System/arraycopy bs (int off) buf (int size) (int take))
                      (vswap! st assoc :buf buf :size (+ size take))))
                  (when (> (long n) take) (vswap! st assoc :over true))
                  (vswap! st update :read + n)))
        from-in (fn [^bytes bs off len]
                  (try (.read in bs (int off) (int len))
                       (catch IOException e (vswap! st assoc :broken true) (throw e))))
        stream (proxy [InputStream] []
                 (read
                   ([] (let [b (byte-array 1)
                             n (.read ^InputStream this b 0 1)]
                         (if (pos? n) (bit-and 0xff (aget b 0)) -1)))
                   ([bs] (.read ^InputStream this ^bytes bs 0 (alength ^bytes bs)))
                   ([bs off len]
                    (locking lock
                      (let [{:keys [^bytes buf size served]} @st
                            ahead (- (long size) (long served))]
                        (cond
                          (zero? (long len)) 0
                          ;; What read-ahead! read first, then the body as it comes.
                          (pos? ahead) (let [n (int (min ahead (long len)))]
                                         (System/arraycopy buf (int served) bs (int off) n)
                                         (vswap! st update :served + n)
                                         n)
                          :else (let [n (from-in bs off len)]
                                  (if (neg? n)
                                    (vswap! st assoc :ended true)
                                    (do (keep! bs off n)
                                        (vswap! st assoc :served (:size @st))))
                                  n))))))
                 (available [] (locking lock
                                 (let [{:keys [size served]} @st]
                                   (+ (max 0 (- (long size) (long served))) (.available in)))))
                 (close [] (.close in)))]
    {:in stream
     :read (fn [] (:read @st))
     :read-ahead!
     (fn []
       (locking lock
         (let [chunk (byte-array 65536)]
           (loop []
             (let [{:keys [ended over broken size]} @st
                   room (- limit (long size))]
               (when (and (not ended) (not over) (not broken) (pos? room))
                 (let [n (try (from-in chunk 0 (min room 65536)) (catch IOException _ 0))]
                   (if (neg? n) (vswap! st assoc :ended true) (keep! chunk 0 n))
                   (recur))))))
         (let [{:keys [ended over broken ^bytes buf size]} @st]
           ;; The limit reached exactly: whole only if Content-Length says so, since
           ;; finding the end would read past the limit.
           (when (and (not over) (not broken) (or ended (and length (= (long length) (long size)))))
             (String. buf 0 (int size) StandardCharsets/UTF_8)))))}))
