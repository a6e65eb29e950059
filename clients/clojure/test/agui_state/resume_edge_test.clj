(ns agui-state.resume-edge-test
  "The resume edge's conformance table (test/fixtures/resume-edge/cases.json,
  its \"format\" member says how to read it) through agui-state.ring/wrap-agui-state
  in a real Jetty, against the real binary: the proxy's tests and the other
  middleware suites play the same cases, so that no one of them can drift
  (protocol/README.md §16). Each case gets a sidecar and a server of its own;
  the middleware has no option but its client (resume on, the sidecar's default
  credential policy), in front of the table's app, which answers every request
  that reaches it and counts them."
  (:require [agui-state.ring :as r]
            [agui-state.test-support :as s]
            [clojure.data.json :as json]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [ring.adapter.jetty :as jetty])
  (:import (java.net URI)
           (java.net.http HttpClient HttpClient$Version HttpRequest HttpRequest$BodyPublishers
                          HttpResponse HttpResponse$BodyHandlers)
           (java.time Duration)
           (org.eclipse.jetty.server Server ServerConnector)))

(set! *warn-on-reflection* true)

(def ^:private table
  (some-> (s/repo-file "test/fixtures/resume-edge/cases.json") slurp json/read-str))

(defn- compact [v] (json/write-str v :escape-slash false :escape-unicode false))

(defn- app
  "The table's app: its status, headers and events to every request, each
  request counted in `calls`."
  [calls]
  (let [{:strs [status headers events]} (get table "app")
        text (apply str (map #(str "data: " (compact %) "\n\n") events))
        ;; A name given twice is one Ring header with a vector of values.
        hs (reduce (fn [m [k v]] (update m k #(cond (nil? %) v (vector? %) (conj % v) :else [% v])))
                   {} headers)]
    (fn [_] (swap! calls inc) {:status status :headers hs :body text})))

(def ^:private ^HttpClient http
  (-> (HttpClient/newBuilder) (.version HttpClient$Version/HTTP_1_1) .build))

(defn- send!
  "Plays one request of the table (`subst` fills in $opening, $last and $forged);
  returns {:status :headers :body}, the headers by lower-case name."
  [base {:strs [method path headers body] :as req} subst]
  (let [b (HttpRequest/newBuilder (URI. (str base path)))
        publisher (if (contains? req "body")
                    (HttpRequest$BodyPublishers/ofString (compact body))
                    (HttpRequest$BodyPublishers/noBody))]
    (.timeout b (Duration/ofSeconds 60))        ; a hang guard, never an assertion
    (doseq [[k v] headers] (.header b k (subst v)))
    (.method b method publisher)
    (let [^HttpResponse res (.send http (.build b) (HttpResponse$BodyHandlers/ofString))]
      {:status (.statusCode res)
       :headers (into {} (for [[k vs] (.map (.headers res))] [(str/lower-case k) (vec vs)]))
       :body (.body res)})))

(defn- blocks [^String text] (remove str/blank? (str/split text #"\r?\n\r?\n")))

(defn- data-blocks [text] (filter #(re-find #"(?m)^data:" %) (blocks text)))

(defn- event-type [block]
  (let [data (str/join "\n" (map second (re-seq #"(?m)^data: ?(.*)$" block)))]
    (get (json/read-str data) "type")))

(defn- ids [text] (map second (re-seq #"(?m)^id: ?(.*)$" text)))

(defn- forge
  "The id with the last character of its nonce changed (the table's $forged)."
  [^String id]
  (str (subs id 0 (dec (count id))) (if (str/ends-with? id "A") "B" "A")))

(defn- play
  "One case on a fresh sidecar and server: its start (if any) read to the end,
  then its request, checked against its expect."
  [{:strs [start request expect]}]
  (with-open [^java.io.Closeable cl (s/start-client)]
    (let [calls (atom 0)
          said (atom [])
          ^Server server (jetty/run-jetty (r/wrap-agui-state (app calls) {:client cl :warn #(swap! said conj %)
                                                                          :log (fn [_])})
                                          {:host "127.0.0.1" :port 0 :join? false})
          base (str "http://127.0.0.1:" (.getLocalPort ^ServerConnector (first (.getConnectors server))))]
      (try
        (let [started (when start (send! base start identity))
              opening (some-> started :body ids first)
              vars {"$opening" opening "$last" (some-> started :body ids last) "$forged" (some-> opening forge)}
              subst (fn [v] (if (contains? vars v)
                              (or (get vars v) (throw (ex-info (str v ": the start's answer has no id") {:started started})))
                              v))
              before @calls
              {:keys [status headers body]} (send! base request subst)
              {want-status "status" app? "app" events "events" ids? "ids" want-headers "headers"
               absent "absent" want-body "body"} expect]
          (when start (is (= 200 (:status started)) "the start was answered"))
          (is (= want-status status))
          (is (= (if app? 1 0) (- @calls before)) (if app? "the request reached the app" "the app was not called"))
          (when events
            (is (= events (map event-type (data-blocks body)))))
          (when ids?
            (is (seq (data-blocks body)))
            (is (every? #(str/starts-with? % "id:") (data-blocks body)) "every data block starts with its id"))
          (doseq [[k v] want-headers]
            (is (= [v] (get headers k)) (str "header " k)))
          (doseq [k absent]
            (is (nil? (get headers k)) (str "no header " k)))
          (when (some? want-body)
            (is (= (if (= want-body "$gone") (get-in table ["gone" "body"]) want-body) body)))
          (is (empty? @said) "no warning"))
        (finally (.stop server))))))

(deftest every-case-of-the-resume-edge-table
  (is (some? table) "test/fixtures/resume-edge/cases.json is there")
  (is (<= 19 (count (get table "cases"))) "the table's cases, every one played")
  (doseq [c (get table "cases")]
    (testing (get c "name")
      ;; A case that throws fails alone: the others are still played.
      (is (nil? (try (play c) nil (catch Exception e e)))))))
