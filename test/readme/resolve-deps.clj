;; The classpath tools.deps makes of a deps.edn, for the two kinds of
;; coordinate the README's Clojure path uses, offline:
;;
;;   clojure test/readme/resolve-deps.clj DEPS_EDN MAVEN_REPO
;;
;; prints the classpath, `:`-joined, as `clojure -Spath` would: the project's
;; :paths (default ["src"]), then each dep in order: a :local/root is a folder
;; whose own deps.edn is read the same way (its path relative to the deps.edn
;; that names it, as tools.deps takes it); an :mvn/version is the jar of a
;; local Maven repository (Debian's /usr/share/maven-repo, which Debian's
;; Clojure libraries fill), with the compile and runtime dependencies of its
;; POM after it. Anything else (a :git/url, a version the repository lacks, a
;; folder with no deps.edn) is an error on stderr and exit 1: tools.deps would
;; fetch it, and the tests have no network. tools.deps itself is not a Debian
;; package; this is its resolution for these coordinates, not the tool.
(require '[clojure.edn :as edn]
         '[clojure.java.io :as io]
         '[clojure.string :as str])
(import '(java.io File)
        '(javax.xml.parsers DocumentBuilderFactory)
        '(org.w3c.dom Element Node))

(defn- fail [& words]
  (binding [*out* *err*] (apply println "resolve-deps:" words))
  (System/exit 1))

(defn- children
  "The element children of `node` named `tag`."
  [^Node node tag]
  (let [nodes (.getChildNodes node)]
    (filter #(and (instance? Element %) (= tag (.getTagName ^Element %)))
            (map #(.item nodes %) (range (.getLength nodes))))))

(defn- text [node tag] (some-> (first (children node tag)) (.getTextContent) str/trim))

(defn- pom-deps
  "The [group artifact version] a POM's project/dependencies needs at run time:
  no test, provided or system scope, nothing optional (Maven's rules)."
  [^File pom]
  (let [project (.getDocumentElement (.parse (.newDocumentBuilder (DocumentBuilderFactory/newInstance)) pom))]
    (for [deps (children project "dependencies")
          dep (children deps "dependency")
          :when (not (#{"test" "provided" "system"} (text dep "scope")))
          :when (not= "true" (text dep "optional"))]
      (let [[g a v :as gav] (map #(text dep %) ["groupId" "artifactId" "version"])]
        (when (or (nil? v) (str/includes? v "${"))
          (fail pom "names" (str g "/" a) "without a version it states:" (pr-str v)))
        gav))))

(defn -main [deps-edn repo]
  (let [seen (atom #{})
        cp (atom [])
        add! (fn [^File f]
               (let [p (.getCanonicalPath f)]
                 (when-not (contains? @seen p) (swap! seen conj p) (swap! cp conj p))))]
    (letfn [(mvn [group artifact version]
              (when-not (contains? @seen [group artifact]) ; the first version named wins, as in tools.deps
                (swap! seen conj [group artifact])
                (let [dir (io/file repo (str/replace group "." "/") artifact version)
                      jar (io/file dir (str artifact "-" version ".jar"))
                      pom (io/file dir (str artifact "-" version ".pom"))]
                  (when-not (.isFile jar) (fail (str group "/" artifact) version "is not in" repo (str "(no " jar ")")))
                  (add! jar)
                  (when (.isFile pom) (doseq [[g a v] (pom-deps pom)] (mvn g a v))))))
            (project [^File file]
              (when-not (.isFile file) (fail "no deps.edn at" (str file)))
              (let [dir (.getParentFile (.getCanonicalFile file))
                    m (edn/read-string (slurp file))]
                (doseq [p (:paths m ["src"])] (add! (io/file dir p)))
                (doseq [[lib coord] (:deps m)]
                  (cond
                    (:local/root coord) (project (io/file dir (:local/root coord) "deps.edn"))
                    (:mvn/version coord) (mvn (or (namespace lib) (name lib)) (name lib) (:mvn/version coord))
                    :else (fail lib (pr-str coord) "is a coordinate tools.deps would fetch")))))]
      (project (io/file deps-edn)))
    (println (str/join ":" @cp))))

(apply -main *command-line-args*)
