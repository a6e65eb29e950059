import { toolchain } from "../../scripts/harness/toolchain.js";
import { describeScenario, freshClone, readerEnv } from "./describe.js";

/**
 * The README's Clojure path in a fresh clone of the committed HEAD: `npm run
 * build`, and the Ring middleware on Jetty run with Debian's `clojure -cp`, as
 * shown.
 */
const JARS = ["data.json", "ring-core", "ring-jetty-adapter"].map((j) => `/usr/share/java/${j}.jar`);
const tools = toolchain("Clojure with data.json, Ring and its Jetty adapter (Debian clojure, libdata-json-clojure, libring-core-clojure, libring-jetty-adapter-clojure) and curl", [
  "bash", "-c", `command -v curl && command -v clojure && ls ${JARS.join(" ")}`,
]);
describeScenario("clojure", tools.test, tools.available, (work) => {
  const clone = freshClone(work);
  return { docs: clone, cwd: clone, env: readerEnv(work) };
});
