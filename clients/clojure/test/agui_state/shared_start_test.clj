(ns agui-state.shared-start-test
  "The flags of a sidecar a client starts, and start mode (protocol/README.md
  §2, \"One sidecar per host\"): with an address and no start mode they could
  reach no sidecar, and the client and the middleware refuse them when made;
  in start mode a start whose command line the sidecar refuses (exit 2, apart
  from 3, \"a sidecar serves there already\") is not waited for: the client
  fails at once, showing the command, and the middleware fails open on it."
  (:require [agui-state.client :as c]
            [agui-state.ring :as r]
            [agui-state.socket :as socket]
            [agui-state.test-support :as s]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [ring.core.protocols :as protocols])
  (:import (java.io ByteArrayInputStream ByteArrayOutputStream File OutputStream)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)))

(defn- address-in-temp-dir
  "unix:PATH in a fresh directory (short: a socket path holds 103 bytes), nobody serving it."
  []
  (str "unix:" (.toFile (Files/createTempDirectory "agui-start-" (make-array FileAttribute 0))) "/s.sock"))

(defn- refused
  "ex-data (with ::msg) of what f throws, an ex-info with :code \"CONFLICTING_OPTIONS\"."
  [f]
  (let [d (try (f) nil (catch clojure.lang.ExceptionInfo e (assoc (ex-data e) ::msg (ex-message e))))]
    (is (= "CONFLICTING_OPTIONS" (:code d)) (pr-str d))
    (is (= :invalid-argument (:kind d)))
    d))

(defn- unstarted
  "The message for sidecar flags `named` (\"gives\"/\"give\" included) with `address` and no start mode."
  [named address pronoun]
  (str "agui-state: " named " the flags of a sidecar this client starts, but with an address (" address
       ") and no start mode no sidecar is started here; drop " pronoun
       ", or set start mode (:sidecar-start true, or AGUI_STATE_SIDECAR_START=1)"))

(deftest sidecar-flags-without-start-mode-are-refused-when-made
  (let [address (address-in-temp-dir)]
    (testing "the client's :args"
      (let [d (refused #(c/start {:path (s/bin) :sidecar address :args ["--max-ops" "9"]}))]
        (is (= (unstarted ":args [\"--max-ops\" \"9\"] gives" address "it") (::msg d)))
        (is (= [:args] (:options d)))))
    (testing "the middleware's :store, the component's :store and :detach-grace"
      (is (= (unstarted ":store gives" address "it")
             (::msg (refused #(r/wrap-agui-state identity {:sidecar address :store "memory"})))))
      (is (= (unstarted ":store and :detach-grace give" address "them")
             (::msg (refused #(r/sidecar {:sidecar address :store "memory" :detach-grace 0}))))))
    (testing "the environment's address counts as the option's, and its start mode lets them through"
      (with-redefs [socket/getenv {"AGUI_STATE_SIDECAR" address}]
        (is (= (unstarted ":store gives" address "it")
               (::msg (refused #(r/wrap-agui-state identity {:store "memory"}))))))
      (with-redefs [socket/getenv {"AGUI_STATE_SIDECAR" address "AGUI_STATE_SIDECAR_START" "1"}]
        (is (fn? (r/wrap-agui-state identity {:store "memory"})) "in start mode they are the started sidecar's")))))

(def ^:private stream
  "An event stream the handler writes, which a middleware that fails open passes as it is."
  (str "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t1\",\"runId\":\"r1\"}\n\n"
       "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t1\",\"runId\":\"r1\"}\n\n"))

(deftest a-start-whose-command-line-is-refused-fails-at-once-showing-it
  (let [address (address-in-temp-dir)
        says (fn [& flags] (str "the sidecar started there refused its command line (exit 2): " (s/bin)
                                " serve --listen " address " --exit-idle 60000 " (str/join " " flags)))]
    (testing "the client: :sidecar-unreachable, naming the command (run it to read why)"
      (let [d (s/thrown "start" :sidecar-unreachable
                        #(c/start {:path (s/bin) :sidecar address :sidecar-start true :args ["--max-ops" "0"]}))]
        (is (str/ends-with? (str (::s/msg d)) (says "--max-ops" "0")) (::s/msg d))))
    (testing "the middleware fails open: the response goes as the handler wrote it, and the warning says why"
      (let [warnings (atom [])
            app (r/wrap-agui-state
                 (fn [_] {:status 200 :headers {"Content-Type" "text/event-stream"}
                          :body (reify protocols/StreamableResponseBody
                                  (write-body-to-stream [_ _ out]
                                    (with-open [^OutputStream out out]
                                      (.write out (.getBytes ^String stream StandardCharsets/UTF_8)))))})
                 ;; --store bogus: a flag the sidecar refuses (the binary from AGUI_STATE_BIN, as the runner sets it)
                 {:sidecar address :sidecar-start true :store "bogus" :resume false
                  :warn (partial swap! warnings conj) :log (constantly nil)})
            response (app {:request-method :post :uri "/agent" :headers {"content-type" "application/json"}
                           :body (ByteArrayInputStream. (.getBytes "{}" StandardCharsets/UTF_8))})
            out (ByteArrayOutputStream.)]
        (protocols/write-body-to-stream (:body response) response out)
        (is (= stream (.toString out "UTF-8")))
        (is (some #(str/includes? % (says "--store" "bogus")) @warnings) (pr-str @warnings))))
    (is (not (.exists (File. (subs address 5)))) "no sidecar serves there")))
