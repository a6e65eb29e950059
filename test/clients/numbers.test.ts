import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { childEnv, run, SEA } from "../../scripts/harness/process.js";
import { runProgram, toolchain } from "../../scripts/harness/toolchain.js";

/**
 * Issue 22, protocol/README.md §3 (Numbers): random integer and float tokens
 * through the real binary, and through the Python (sync), Go and Clojure
 * clients. Every token either comes back as text that reads as the same value
 * of the same kind (integer or not), or, for an integer beyond ±(2^53 − 1), is
 * refused with -32602 UNSAFE_INTEGER where the server writes it (diffToolState's
 * `set`), and read as the double the client holds in openRun's `state`, a
 * baseline the client sent (protocol/README.md §3, baselines). Each client's test holds what comes back
 * to its own language's parse of the token (clients/python/tests/test_numbers.py,
 * clients/go/numbers_test.go, clients/clojure/test/agui_state/numbers_test.clj)
 * and reports per token; here the report is held to the rule.
 *
 * Seeded: AGUI_NUMBER_SEED=<n> replays a run (the seed is in every failure message).
 */
const SEED = Number(process.env["AGUI_NUMBER_SEED"] ?? 22);
const MAX_SAFE = 2n ** 53n - 1n;

const digits = (min: number, max: number) => fc.stringMatching(new RegExp(`^[0-9]{${min},${max}}$`));
const sign = fc.constantFrom("", "-");
/** A JSON integer token's digits: no leading zero. */
const integerDigits = (max: number) => fc.bigInt({ min: 0n, max: 10n ** BigInt(max) }).map(String);

const token: fc.Arbitrary<string> = fc.oneof(
  // integers: safe ones, the edge, and past it
  fc.bigInt({ min: -MAX_SAFE, max: MAX_SAFE }).map(String),
  fc.bigInt({ min: MAX_SAFE - 3n, max: MAX_SAFE + 3n }).chain((n) => sign.map((s) => s + String(n))),
  fc.tuple(sign, fc.bigInt({ min: MAX_SAFE + 1n, max: 10n ** 30n })).map(([s, n]) => s + String(n)),
  // floats whose value is whole: `1.0`, `-0.0`, `1e2`, `1.5e3`, `1e-400`
  fc.tuple(sign, integerDigits(20), fc.integer({ min: 1, max: 3 })).map(([s, n, z]) => `${s}${n}.${"0".repeat(z)}`),
  fc.tuple(sign, integerDigits(3), fc.constantFrom("e", "E", "e+", "E-"), fc.integer({ min: 0, max: 25 })).map(([s, n, e, x]) => `${s}${n}${e}${x}`),
  fc.tuple(sign, integerDigits(2), digits(1, 2), fc.integer({ min: 2, max: 20 })).map(([s, n, f, x]) => `${s}${n}.${f}e${x}`),
  fc.tuple(sign, fc.integer({ min: 324, max: 999 })).map(([s, x]) => `${s}1e-${x}`),
  // fractions that round to a whole double, and ones that just do not
  fc.tuple(sign, integerDigits(15), fc.integer({ min: 1, max: 20 }), fc.constantFrom("9", "0")).map(([s, n, k, d]) => `${s}${n}.${d.repeat(k)}${d === "0" ? "1" : ""}`),
  // any double, as JavaScript writes it (the shortest text) and in other spellings
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => d.toExponential()),
  fc.double({ min: -1e9, max: 1e9, noNaN: true }).map((d) => d.toFixed(3)),
);

const FIXED = ["0", "-0", "1.0", "-0.0", "0.0", "1e2", "1.5e3", "1e-400", "100000000000000000000.0", "1e21", "0.99999999999999999", "9007199254740991", "9007199254740992", "-9007199254740992", "1152921504606846976", "100000000000000000000"];
const TOKENS = [...new Set([...FIXED, ...fc.sample(token, { seed: SEED, numRuns: 300 })])];
const OVERFLOW = ["1e400", "-1e999", "1" + "0".repeat(400)];

const isInteger = (t: string): boolean => /^-?\d+$/.test(t);
const refused = (t: string): boolean => isInteger(t) && (BigInt(t) > MAX_SAFE || BigInt(t) < -MAX_SAFE);

/** Why `out` is not `t` again (the same value and kind), or undefined when it is. */
function differs(t: string, out: string | undefined): string | undefined {
  if (out === undefined) return "no number came back";
  if (isInteger(t) !== isInteger(out)) return `came back as ${out}, of the other kind`;
  if (isInteger(t)) return BigInt(t) === BigInt(out) ? undefined : `came back as ${out}`;
  return Object.is(Number(t), Number(out)) ? undefined : `came back as ${out}, another double`;
}

const NUMBER = "(-?\\d+(?:\\.\\d+)?(?:[eE][-+]?\\d+)?)";
const numberAfter = (line: string | undefined, key: string): string | undefined => new RegExp(`"${key}":${NUMBER}[,}\\]]`).exec(line ?? "")?.[1];
const request = (id: string, method: string, params: string): string => `{"jsonrpc":"2.0","id":"${id}","method":"${method}","params":${params}}\n`;

/** Runs NDJSON requests through the binary; its response lines by id, as text. */
async function exchange(input: string): Promise<Map<string, string>> {
  const r = await run(SEA, [], input, 60_000);
  expect(r.code, r.stderr).toBe(0);
  const lines = r.stdout.toString("utf8").trim().split("\n");
  return new Map(lines.map((l) => [(JSON.parse(l) as { id: string }).id, l]));
}

describe(`numbers keep their value and kind through the binary (issue 22; seed ${SEED})`, () => {
  it("every token comes back as itself (value and kind) from diffToolState, getState and openRun with getState's output, or is refused where the server writes it and read as the client's double in a baseline", async () => {
    const first = await exchange(
      [...TOKENS, ...OVERFLOW]
        .map((t, i) => request(`o${i}`, "openRun", `{"threadId":"t${i}","state":{"s":${t}},"toolState":{}}`) + request(`d${i}`, "diffToolState", `{"threadId":"t${i}","set":{"n":${t}}}`) + request(`g${i}`, "getState", `{"threadId":"t${i}"}`))
        .join(""),
    );
    const states = new Map<number, string>();
    [...TOKENS, ...OVERFLOW].forEach((t, i) => {
      const opened = JSON.parse(first.get(`o${i}`) ?? "null") as { error?: { message: string; data: unknown } } | null;
      const why = `${t} (seed ${SEED})`;
      if (!Number.isFinite(Number(t))) {
        expect(opened?.error?.data, why).toEqual({ code: "INVALID_PARAMS", field: "/state/s", reason: "NUMBER_OVERFLOW" });
      } else if (refused(t)) {
        expect(opened, why).toHaveProperty("result");
        const set = JSON.parse(first.get(`d${i}`) ?? "null") as { error?: { message: string; data: unknown } } | null;
        expect(set?.error?.data, why).toEqual({ code: "INVALID_PARAMS", field: "/set/n", reason: "UNSAFE_INTEGER" });
        expect(set?.error?.message, why).toContain("send it as a string");
        // The baseline holds what the client's JSON.parse holds: the nearest double, written as JavaScript writes it.
        expect(numberAfter(first.get(`g${i}`), "s"), why).toBe(JSON.stringify(JSON.parse(t)));
      } else {
        expect(opened, why).toHaveProperty("result");
        const got = first.get(`g${i}`);
        expect(differs(t, numberAfter(first.get(`d${i}`), "value")), `${why} in diffToolState's delta`).toBeUndefined();
        expect(differs(t, numberAfter(got, "s")), `${why} in getState`).toBeUndefined();
        expect(differs(t, numberAfter(got, "n")), `${why} in getState's toolState`).toBeUndefined();
        states.set(i, (got as string).slice((got as string).indexOf('"state":') + 8, -2));
      }
    });
    // What a server does after a restart (README): open the thread with the state getState gave it.
    const second = await exchange([...states].map(([i, state]) => request(`r${i}`, "openRun", `{"threadId":"r${i}","state":${state}}`) + request(`s${i}`, "getState", `{"threadId":"r${i}"}`)).join(""));
    for (const [i, state] of states) {
      expect(second.get(`r${i}`), `${TOKENS[i]} (seed ${SEED})`).toContain('"result"');
      expect(second.get(`s${i}`), `${TOKENS[i]} (seed ${SEED})`).toContain(`"state":${state}}`);
    }
  }, 120_000);
});

/** The report a client's test wrote: one line per token, `same` or `refused`, held to the rule. */
function checkReport(file: string): void {
  const lines = readFileSync(file, "utf8").trim().split("\n");
  expect(lines.map((l) => l.split("\t")[0])).toEqual(TOKENS);
  for (const l of lines) {
    const [t, verdict] = l.split("\t") as [string, string];
    expect(verdict, `${t} (seed ${SEED})`).toBe(refused(t) ? "refused" : "same");
  }
}

const tmp = mkdtempSync(path.join(os.tmpdir(), "agui-numbers-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const tokensFile = path.join(tmp, "tokens.txt");
writeFileSync(tokensFile, TOKENS.join("\n") + "\n");
const BIN = path.join(ROOT, "dist/agui-state");
const env = (report: string, extra: Record<string, string> = {}) => childEnv({ AGUI_STATE_BIN: BIN, AGUI_NUMBER_TOKENS: tokensFile, AGUI_NUMBER_REPORT: path.join(tmp, report), ...extra });

const python = toolchain("Python (Debian python3-pytest)", ["/usr/bin/python3", "-c", "import pytest"]);
python.test("the Python sync client: each token as json.loads reads it (int or float) comes back the same, or UNSAFE_INTEGER", () => {
  const e = env("python.txt", { PYTHONDONTWRITEBYTECODE: "1" });
  delete e["PYTHONPATH"];
  const r = runProgram("/usr/bin/python3", ["-m", "pytest", "-q", "-p", "no:cacheprovider", "clients/python/tests/test_numbers.py"], { cwd: ROOT, env: e, timeout: 240_000 });
  expect(r.status, r.output).toBe(0);
  checkReport(path.join(tmp, "python.txt"));
}, 250_000);

const go = toolchain("Go (golang-go)", ["go", "version"]);
go.test("the Go client: each token sent as a json.Number comes back, read with UseNumber, as the same integer or float, or UNSAFE_INTEGER", () => {
  const e = env("go.txt", { GO111MODULE: "on", GOFLAGS: "-mod=mod", GOPROXY: "off", GOSUMDB: "off", GOWORK: "off", GOENV: "off", GOTOOLCHAIN: "local", GOPATH: path.join(tmp, "gopath"), GOCACHE: path.join(tmp, "gocache") });
  delete e["GOMODCACHE"];
  const r = runProgram("go", ["test", "-count=1", "-run", "^TestNumberTokensKeepValueAndKind$", "-v", "."], { cwd: path.join(ROOT, "clients/go"), env: e, timeout: 300_000 });
  expect(r.status, r.output).toBe(0);
  expect(r.stdout).toMatch(/^--- PASS: TestNumberTokensKeepValueAndKind /m);
  checkReport(path.join(tmp, "go.txt"));
}, 320_000);

const clojure = toolchain("Clojure (clojure + libdata-json-clojure)", ["bash", "-c", "command -v clojure && test -f /usr/share/java/data.json.jar"]);
clojure.test("the Clojure client: each token as data.json reads it (Long or Double) comes back of the same class and value, or UNSAFE_INTEGER", () => {
  const classpath = ["/usr/share/java/data.json.jar", "clients/clojure/src", "clients/clojure/test"].join(":");
  const main = `(System/setProperty "agui-state.bin" ${JSON.stringify(BIN)}) (require 'agui-state.numbers-test) (let [r (clojure.test/run-tests 'agui-state.numbers-test)] (shutdown-agents) (System/exit (if (and (pos? (:test r)) (zero? (+ (:fail r) (:error r)))) 0 1)))`;
  const r = runProgram("clojure", ["-cp", classpath, "-e", main], { cwd: ROOT, env: env("clojure.txt"), timeout: 300_000 });
  expect(r.status, r.output).toBe(0);
  checkReport(path.join(tmp, "clojure.txt"));
}, 320_000);
