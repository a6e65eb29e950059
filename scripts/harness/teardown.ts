import { afterEach } from "vitest";
import { killAll } from "./process.js";

// vitest setupFiles entry: after every test, SIGKILL whatever child it left
// running (a failed assertion can leave one mid-conversation), so no test
// file needs its own afterEach and no child outlives the run.
afterEach(killAll);
