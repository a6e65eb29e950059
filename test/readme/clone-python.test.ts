import { toolchain } from "../../scripts/harness/toolchain.js";
import { describeScenario, freshClone, readerEnv } from "./describe.js";

/**
 * The README's Python path in a fresh clone of the committed HEAD: `npm run
 * wheel`, a venv, `pip install` of the wheel, and the ASGI middleware served by
 * uvicorn, as shown, with nothing built before.
 */
const tools = toolchain("Python venv, Starlette, uvicorn (Debian python3-venv, python3-starlette, python3-uvicorn) and curl", [
  "bash", "-c", "command -v curl && /usr/bin/python3 -c 'import ensurepip, venv, setuptools, wheel, starlette, uvicorn'",
]);
describeScenario("python", tools.test, tools.available, (work) => {
  const clone = freshClone(work);
  return { docs: clone, cwd: clone, env: readerEnv(work) };
});
