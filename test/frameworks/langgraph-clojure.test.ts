import { toolchain } from "../../scripts/harness/toolchain.js";
import { middlewareSuite } from "./middleware.js";
import { fixtureDir } from "./replay.js";
import { JARS } from "../middleware/jetty.js";

/**
 * Real LangGraph answers (test/fixtures/frameworks/langgraph/) replayed by Ring
 * handlers behind agui-state.ring/wrap-agui-state (:own the fixture's own) in
 * real Jetty servers, sync and async
 * (clients/clojure/test/agui_state/ring_replay_agent.clj), into the real
 * HttpAgent. Each warning of the middleware (a stream it could not repair: it
 * fails open) is a `WARN` line on stderr; a clean replay has none.
 */
middlewareSuite(
  "langgraph",
  {
    name: "wrap-agui-state (Jetty)",
    command: () => ({ file: "clojure", args: ["-cp", [...JARS, "clients/clojure/src", "clients/clojure/test"].join(":"), "-m", "agui-state.ring-replay-agent", fixtureDir("langgraph")] }),
    urls: (out) => {
      const m = /^listening (http:\/\/127\.0\.0\.1:\d+) (http:\/\/127\.0\.0\.1:\d+)\n/.exec(out);
      return m ? { sync: m[1] as string, async: m[2] as string } : undefined;
    },
    complaints: (stderr) => stderr.split("\n").filter((l) => l.startsWith("WARN ") || /Exception/.test(l)),
  },
  toolchain("Clojure + Ring + Jetty (clojure, libdata-json-clojure, libring-core-clojure, libring-jetty-adapter-clojure)", ["bash", "-c", `command -v clojure && ${JARS.map((j) => `test -f ${j}`).join(" && ")}`]),
);
