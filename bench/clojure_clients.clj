;; The Clojure client's cost per call beside a bare client on the same kind of
;; pipe to the same binary (reported beside B16-B18). The bare client does
;; nothing but json/write-str, write, flush, readLine and json/read-str. Rounds
;; alternate (ours, bare, ...) after a warm-up that lets the JIT compile both;
;; each round's wall-clock and process CPU microseconds per call are printed as
;; JSON for bench/clients.ts.
;;
;;   clojure -cp <data.json.jar>:clients/clojure/src bench/clojure_clients.clj <rounds> <calls> <sidecar argv...>
(require '[agui-state.client :as agui]
         '[clojure.data.json :as json])
(import '(java.io BufferedReader BufferedWriter InputStreamReader OutputStreamWriter)
        '(java.lang.management ManagementFactory)
        '(java.nio.charset StandardCharsets))

(let [[rounds calls & argv] *command-line-args*
      rounds (Long/parseLong rounds)
      calls (Long/parseLong calls)
      ns-map (into {} (for [i (range 100)]
                        [(str "tool-" i "/result")
                         {"rows" (vec (for [j (range 20)] {"j" j "v" (str "value " i "." j)})) "ok" true}]))
      value (fn [i] {"rows" [{"j" 0 "v" (str "changed " i)}] "ok" (even? i)})
      k "tool-50/result"
      ours (agui/start {:path (first argv) :args (rest argv)})
      proc (.start (doto (ProcessBuilder. ^java.util.List (vec argv))
                     (.redirectError java.lang.ProcessBuilder$Redirect/INHERIT)))
      w (BufferedWriter. (OutputStreamWriter. (.getOutputStream proc) StandardCharsets/UTF_8))
      r (BufferedReader. (InputStreamReader. (.getInputStream proc) StandardCharsets/UTF_8))
      ids (atom 0)
      bare (fn [method params]
             (let [id (swap! ids inc)]
               (.write w ^String (json/write-str {"jsonrpc" "2.0" "id" id "method" method "params" params}))
               (.write w "\n")
               (.flush w)
               (let [reply (json/read-str (.readLine r))]
                 (when-not (= id (get reply "id")) (throw (ex-info "bare: wrong reply" reply)))
                 (get reply "result"))))
      i (atom 0)
      a #(agui/diff-tool-state ours {:thread-id "ns" :set {k (value (swap! i inc))}})
      b #(bare "diffToolState" {"threadId" "ns" "set" {k (value (swap! i inc))}})
      bean (ManagementFactory/getThreadMXBean)
      cpu #(let [os (ManagementFactory/getOperatingSystemMXBean)]
             (.getProcessCpuTime ^com.sun.management.OperatingSystemMXBean os))
      out (atom {"ours" [] "bare" [] "oursCpu" [] "bareCpu" []})
      measure (fn [side f]
                (let [t (System/nanoTime) c (cpu)]
                  (dotimes [_ calls] (f))
                  (swap! out #(-> %
                                  (update side conj (/ (- (System/nanoTime) t) 1e3 calls))
                                  (update (str side "Cpu") conj (/ (- (cpu) c) 1e3 calls))))))]
  bean
  (agui/open-run ours {:thread-id "ns" :tool-state ns-map})
  (bare "openRun" {"threadId" "ns" "toolState" ns-map})
  (dotimes [_ 3000] (a) (b))
  (dotimes [_ rounds] (measure "ours" a) (measure "bare" b))
  (.close ^java.io.Closeable ours)
  (.close w)
  (.waitFor proc)
  (println (json/write-str @out))
  (shutdown-agents))
