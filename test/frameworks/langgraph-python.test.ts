import { toolchain } from "../../scripts/harness/toolchain.js";
import { middlewareSuite } from "./middleware.js";
import { fixtureDir } from "./replay.js";

/**
 * Real LangGraph answers (test/fixtures/frameworks/langgraph/) replayed by a
 * plain ASGI app behind AguiStateMiddleware(own=[...]) under a real uvicorn
 * (clients/python/examples/replay_server.py), into the real HttpAgent. The
 * middleware logs at WARNING each stream it could not repair (it fails open):
 * a clean replay logs nothing.
 */
const PYTHON = "/usr/bin/python3";
middlewareSuite(
  "langgraph",
  {
    name: "AguiStateMiddleware (uvicorn)",
    command: () => ({ file: PYTHON, args: ["clients/python/examples/replay_server.py", "--fixtures", fixtureDir("langgraph")] }),
    urls: (out) => {
      const port = /listening on (\d+)\n/.exec(out)?.[1];
      return port === undefined ? undefined : { "": `http://127.0.0.1:${port}` };
    },
    complaints: (stderr) => stderr.split("\n").filter((l) => l !== ""),
  },
  toolchain("Python middleware (Debian python3-fastapi, python3-starlette, python3-uvicorn)", [PYTHON, "-c", "import starlette, uvicorn"]),
);
