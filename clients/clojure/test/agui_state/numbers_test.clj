(ns agui-state.numbers-test
  "Numbers keep their value and their kind through the sidecar (protocol/README.md
  §3, issue 22). Each token is read with data.json's own read-str (a Long, a
  BigInt or a Double), sent through the client, and read back: what comes back
  must be of the same class and the same value, a zero keeping its sign. An
  integer beyond ±(2^53 − 1) must be refused with :invalid-params, reason
  UNSAFE_INTEGER.

  The tokens are `tokens` below, or, when AGUI_NUMBER_TOKENS names a file of
  tokens (one per line, as test/clients/numbers.test.ts writes them), that
  file's; AGUI_NUMBER_REPORT then receives one line per token: the token, a tab,
  and `same` or `refused`."
  (:require [agui-state.client :as c]
            [agui-state.test-support :as s :refer [*client*]]
            [clojure.data.json :as json]
            [clojure.string :as str]
            [clojure.test :refer [deftest is use-fixtures]]))

(use-fixtures :once s/with-client)

(def tokens
  ["0" "-0" "1" "-1" "9007199254740991" "-9007199254740991" "9007199254740992" "1152921504606846976"
   "100000000000000000000" "1.0" "-0.0" "0.0" "1e2" "1.5e3" "1E-400" "100000000000000000000.0" "1e21"
   "0.5" "6.02e23" "0.99999999999999999" "5e-324" "-1.7976931348623157e308"])

(defn- the-tokens []
  (if-let [f (System/getenv "AGUI_NUMBER_TOKENS")]
    (remove str/blank? (str/split-lines (slurp f)))
    tokens))

(defn- same-number?
  "Same class (Long stays Long, Double stays Double) and same value; for a Double,
  Double/compare also tells -0.0 from 0.0."
  [got want]
  (and (= (class got) (class want))
       (if (instance? Double want) (zero? (Double/compare got want)) (= got want))))

(def ^:private max-safe (dec (bigint (Math/pow 2 53))))

(deftest number-tokens-keep-value-and-kind
  (let [report (StringBuilder.)]
    (doseq [[i token] (map-indexed vector (the-tokens))]
      (let [want (json/read-str token)
            tid (str "n" i)
            big? (and (integer? want) (> (abs (bigint want)) max-safe))
            ;; openRun's state is a baseline the client sent: an integer beyond 2^53 - 1 there is the
            ;; double the client holds (protocol/README.md §3, baselines), never refused.
            _ (c/open-run *client* {:thread-id tid :state {"s" want} :tool-state {}})
            changed (try {:change (c/diff-tool-state *client* {:thread-id tid :set {"n" want}})}
                         (catch clojure.lang.ExceptionInfo e {:refused (ex-data e)}))
            refused (:refused changed)]
        (if refused
          (do (is big? (str token " was refused: " (:message refused)))
              (is (= :invalid-params (:kind refused)) token)
              (is (= {"reason" "UNSAFE_INTEGER" "field" "/set/n"} (select-keys (:data refused) ["reason" "field"])) token)
              (is (str/includes? (str (:message refused)) "send it as a string") token)
              (let [held (get (:state (c/get-state *client* tid)) "s")]
                (is (== (double held) (double want)) (str token " in openRun's state came back as " (pr-str held))))
              (.append report (str token "\trefused\n")))
          (let [change (:change changed)
                state (:state (c/get-state *client* tid))
                ;; What a server does after a restart: open the thread again with the state it was given.
                _ (c/open-run *client* {:thread-id (str "r" tid) :state state})
                again (:state (c/get-state *client* (str "r" tid)))
                seen {"diffToolState's delta" (get-in change [:delta 0 "value"])
                      "getState" (get state "s")
                      "getState's toolState" (get-in state ["toolState" "n"])
                      "openRun with getState's output" (get again "s")}]
            (is (not big?) (str token ", an integer beyond 2^53 - 1, was accepted"))
            (doseq [[where got] seen]
              (is (same-number? got want) (str token " in " where " came back as " (pr-str got) " (" (class got) ")")))
            (.append report (str token "\tsame\n"))))))
    (when-let [out (System/getenv "AGUI_NUMBER_REPORT")]
      (spit out (str report)))))
