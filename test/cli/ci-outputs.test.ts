import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import type Ajv04Class from "ajv-draft-04";
import type addFormatsFn from "ajv-formats";
import { SaxesParser } from "saxes";
import { afterAll, describe, expect, it } from "vitest";
import { BINARY, childEnv } from "../../scripts/harness/process.js";
import { junitXml, xmlText } from "../../src/cli/junit.js";
import { LEVEL, RULES, artifactOf, sarifLog } from "../../src/cli/sarif.js";
import { EVENT_CODES, FINDING_CODES } from "../../src/stream/codes.js";
import { StreamChecker } from "../../src/stream/checker.js";
import type { Finding } from "../../src/stream/findings.js";
import { CORPUS, toNdjson, toSse } from "../stream/streams.js";

/**
 * Issue 32, case 9: `check --sarif FILE` and `check --junit FILE`. The SARIF
 * is validated against the SARIF 2.1.0 schema of the OASIS Standard (errata
 * 01, vendored in test/fixtures/sarif); the JUnit XML is read back with a
 * strict XML 1.0 parser (saxes), which refuses what XML cannot carry.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const SCHEMA_FILE = path.join(ROOT, "test/fixtures/sarif/sarif-schema-2.1.0.json");
const schemaText = readFileSync(SCHEMA_FILE, "utf8");
// Both are CommonJS whose module.exports is the class (the function): read as such.
const require = createRequire(import.meta.url);
const Ajv04 = require("ajv-draft-04") as typeof Ajv04Class.default;
const addFormats = require("ajv-formats") as typeof addFormatsFn.default;
const ajv = new Ajv04({ allErrors: true, strict: false });
addFormats(ajv);
const validate = ajv.compile(JSON.parse(schemaText) as object);
const valid = (log: unknown): string[] => (validate(log) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ""}`));

/** An XML document read strictly: its elements in order, each with its attributes and its text. */
function parseXml(xml: string): { name: string; attributes: Record<string, string>; text: string }[] {
  const parser = new SaxesParser({ xmlns: false });
  const out: { name: string; attributes: Record<string, string>; text: string }[] = [];
  const open: { text: string }[] = [];
  parser.on("error", (e) => {
    throw e;
  });
  parser.on("opentag", (tag) => {
    const el = { name: tag.name, attributes: tag.attributes as Record<string, string>, text: "" };
    out.push(el);
    open.push(el);
  });
  parser.on("text", (t) => {
    const top = open[open.length - 1];
    if (top) top.text += t;
  });
  parser.on("closetag", () => void open.pop());
  parser.write(xml).close();
  return out;
}

function check(events: string[], state = {}): Finding[] {
  const checker = new StreamChecker(state);
  return [...checker.push(toSse(events)), ...checker.end()];
}

const work = mkdtempSync(path.join(tmpdir(), "agui-ci-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the finding codes are one closed set, each with its rule (issue 32)", () => {
  /** The codes of a table in protocol/README.md: the first cell of each row, between two headings. */
  const tableCodes = (from: string, to: string): string[] => {
    const text = readFileSync(path.join(ROOT, "protocol/README.md"), "utf8");
    const section = text.slice(text.indexOf(from), text.indexOf(to, text.indexOf(from)));
    return [...section.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1] as string);
  };

  it("is the contract's: §4's skip codes and §13's event codes, no more, no less", () => {
    const skips = tableCodes("## 4. Skip codes", "## 5.");
    // §13 names ROOT_NOT_OBJECT again, for a snapshot: one code, already a skip code (§4).
    const events = tableCodes("Event codes:", "## 14.").filter((c) => !skips.includes(c));
    expect(skips.length).toBeGreaterThan(5);
    expect(new Set(events)).toEqual(new Set(EVENT_CODES));
    expect(new Set(FINDING_CODES)).toEqual(new Set([...skips, ...events]));
  });

  it("gives every code words, and every rule a distinct id", () => {
    for (const code of FINDING_CODES) {
      expect(RULES[code].short.length, code).toBeGreaterThan(10);
      expect(RULES[code].help.length, code).toBeGreaterThan(RULES[code].short.length);
    }
    expect(new Set(FINDING_CODES).size).toBe(FINDING_CODES.length);
    expect(Object.keys(RULES).sort()).toEqual([...FINDING_CODES].sort());
  });

  it("covers every code check finds in the corpus of field mistakes", () => {
    const seen = new Set<string>();
    for (const c of CORPUS) for (const f of check(c.events, c.state)) seen.add(f.code);
    expect(seen.size).toBeGreaterThan(8);
    for (const code of seen) expect(FINDING_CODES, code).toContain(code);
  });
});

describe("check --sarif", () => {
  it("uses the vendored schema unchanged", () => {
    expect(createHash("sha256").update(readFileSync(SCHEMA_FILE)).digest("hex")).toBe("c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e");
  });

  it("is a valid SARIF 2.1.0 log for every stream of the corpus, one result per finding, each with its rule, level and place", () => {
    let results = 0;
    for (const c of CORPUS) {
      const findings = check(c.events, c.state);
      const log = sarifLog("runs/the run.sse", findings, findings.length ? 1 : 0);
      expect(valid(log), c.name).toEqual([]);
      const run = log.runs[0];
      const rules = run?.tool.driver.rules ?? [];
      expect(rules.map((r) => r.id)).toEqual([...FINDING_CODES]);
      expect(run?.results).toHaveLength(findings.length);
      findings.forEach((f, i) => {
        const r = run?.results?.[i];
        expect(r?.ruleId).toBe(f.code);
        expect(rules[r?.ruleIndex ?? -1]?.id).toBe(f.code);
        expect(r?.level).toBe(LEVEL[f.kind]);
        expect(r?.locations?.[0]?.physicalLocation).toEqual({ artifactLocation: { uri: "runs/the%20run.sse" }, region: { startLine: f.line } });
        expect(r?.message.text).toContain(f.message.slice(0, 20));
      });
      results += findings.length;
    }
    expect(results).toBeGreaterThan(10);
  });

  it("is valid with no findings (empty results), for stdin and for an absolute path", () => {
    for (const file of ["-", "/tmp/a b/run.sse"]) {
      const log = sarifLog(file, [], 0);
      expect(valid(log), file).toEqual([]);
      expect(log.runs[0]?.results).toEqual([]);
    }
    expect(artifactOf("/tmp/a b/run.sse")).toEqual({ uri: "file:///tmp/a%20b/run.sse" });
    expect(artifactOf("-")).toEqual({ description: { text: "the stream read from standard input" } });
  });

  it("the schema check can fail: a result without a message, or a region that starts nowhere, is refused", () => {
    const findings = check(CORPUS.find((c) => c.name === "append to a missing array")?.events ?? []);
    const log = sarifLog("run.sse", findings, 1) as unknown as { runs: { results: Record<string, unknown>[] }[] };
    const result = log.runs[0]?.results[0] as Record<string, unknown>;
    delete result["message"];
    expect(valid(log)).not.toEqual([]);
    const log2 = sarifLog("run.sse", findings, 1) as unknown as { runs: { results: { locations: { physicalLocation: { region: Record<string, unknown> } }[] }[] }[] };
    delete log2.runs[0]?.results[0]?.locations[0]?.physicalLocation.region["startLine"];
    expect(valid(log2)).not.toEqual([]);
  });
});

describe("check --junit", () => {
  const hostile = `<&]]>"'\u0001\u001f\uffff\ud800`;

  it("escapes what XML cannot carry, and what it must escape, in text and attributes", () => {
    const xml = `<a b="${xmlText(hostile + "\n\t", true)}">${xmlText(hostile + "\n")}</a>`;
    const [a] = parseXml(xml);
    expect(a?.attributes["b"]).toBe('<&]]>"\'\\u0001\\u001f\\uffff\\ud800\n\t');
    expect(a?.text).toBe('<&]]>"\'\\u0001\\u001f\\uffff\\ud800\n');
    // Without the escaping the parser refuses it: the check can fail.
    expect(() => parseXml(`<a>${hostile}</a>`)).toThrow();
  });

  it("has a failed test case per event with findings, each finding in its failure, with hostile text read back intact", () => {
    const events = [
      JSON.stringify({ type: "RUN_STARTED", threadId: "t", runId: "r" }),
      JSON.stringify({ type: `X${hostile}` }),
      JSON.stringify({ type: "STATE_DELTA", delta: [{ op: "add", path: `/a${hostile}/-`, value: 1 }, { op: "replace", path: "/b", value: 2 }] }),
      JSON.stringify({ type: "RUN_FINISHED", threadId: "t", runId: "r" }),
    ];
    const checker = new StreamChecker({});
    const findings = [...checker.push(toNdjson(events)), ...checker.end()];
    const file = `dir/${hostile}.ndjson`;
    const els = parseXml(junitXml(file, findings, checker.summary));
    const cases = els.filter((e) => e.name === "testcase");
    const failures = els.filter((e) => e.name === "failure");
    const events2 = new Set(findings.map((f) => f.event));
    expect(cases).toHaveLength(events2.size);
    expect(failures).toHaveLength(events2.size);
    const suite = els.find((e) => e.name === "testsuite");
    expect(suite?.attributes).toMatchObject({ tests: String(events2.size), failures: String(events2.size), errors: "0" });
    expect(suite?.attributes["name"]).toBe(xmlText(file).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&").replace(/&quot;/g, '"').replace(/&apos;/g, "'"));
    const all = failures.map((f) => f.text).join("\n");
    for (const f of findings) expect(all).toContain(f.code);
    // The pointer's control character is shown, escaped; the markup characters come back as they were.
    expect(all).toContain("<&]]>");
    expect(all).toContain("\\u0001");
  });

  it("has one passing test case, and no failure, when nothing is found", () => {
    const checker = new StreamChecker({});
    const findings = [...checker.push(toSse(CORPUS[0]?.events ?? [])), ...checker.end()];
    expect(findings).toEqual([]);
    const els = parseXml(junitXml("run.sse", findings, checker.summary));
    expect(els.filter((e) => e.name === "testcase")).toHaveLength(1);
    expect(els.filter((e) => e.name === "failure")).toHaveLength(0);
    expect(els.find((e) => e.name === "testsuites")?.attributes).toMatchObject({ tests: "1", failures: "0" });
  });
});

describe("check --sarif FILE --junit FILE, through the binary", () => {
  const J = (v: unknown) => JSON.stringify(v);
  const started = J({ type: "RUN_STARTED", threadId: "t", runId: "r" });
  const finished = J({ type: "RUN_FINISHED", threadId: "t", runId: "r" });
  writeFileSync(path.join(work, "dropped.ndjson"), [started, J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/todos/-", value: "milk" }] }), finished].join("\n") + "\n");
  writeFileSync(path.join(work, "clean.ndjson"), [started, finished].join("\n") + "\n");
  const agui = (args: string[], stdin = "") => {
    const r = spawnSync(BINARY, args, { input: stdin, cwd: work, env: childEnv(), timeout: 20_000 });
    return { status: r.status, stdout: r.stdout.toString("utf8"), stderr: r.stderr.toString("utf8") };
  };

  it.each([
    ["dropped.ndjson", 1, 1],
    ["clean.ndjson", 0, 0],
  ])("%s: the same stdout and exit status as without them, and both files written", (stream, status, failed) => {
    const plain = agui(["check", stream]);
    const sarif = path.join(work, `${stream}.sarif`);
    const junit = path.join(work, `${stream}.xml`);
    const r = agui(["check", stream, "--sarif", sarif, "--junit", junit]);
    expect([r.status, r.stdout, r.stderr]).toEqual([plain.status, plain.stdout, ""]);
    expect(r.status).toBe(status);
    const log = JSON.parse(readFileSync(sarif, "utf8")) as { runs: { results: { ruleId: string; level: string; locations: unknown[] }[]; invocations: { exitCode: number }[] }[] };
    expect(valid(log)).toEqual([]);
    expect(log.runs[0]?.invocations[0]?.exitCode).toBe(status);
    expect(log.runs[0]?.results).toHaveLength(failed);
    if (failed) {
      expect(log.runs[0]?.results[0]).toMatchObject({ ruleId: "PATH_NOT_FOUND", level: "error", locations: [{ physicalLocation: { artifactLocation: { uri: "dropped.ndjson" }, region: { startLine: 2 } } }] });
    }
    const els = parseXml(readFileSync(junit, "utf8"));
    expect(els.find((e) => e.name === "testsuites")?.attributes["failures"]).toBe(String(failed));
  });

  it("--json's stdout is unchanged too, and a stream on stdin has no file in its location", () => {
    const input = readFileSync(path.join(work, "dropped.ndjson"), "utf8");
    const sarif = path.join(work, "stdin.sarif");
    const r = agui(["check", "--json", "--sarif", sarif], input);
    expect([r.status, r.stdout]).toEqual([1, agui(["check", "--json"], input).stdout]);
    const log = JSON.parse(readFileSync(sarif, "utf8")) as { runs: { results: { locations: { physicalLocation: { artifactLocation: unknown } }[] }[] }[] };
    expect(valid(log)).toEqual([]);
    expect(log.runs[0]?.results[0]?.locations[0]?.physicalLocation.artifactLocation).toEqual({ description: { text: "the stream read from standard input" } });
  });

  it("a file it cannot write exits 2 with one line; a flag without its FILE is a usage error", () => {
    const r = agui(["check", "clean.ndjson", "--sarif", path.join(work, "no/such/dir/x.sarif")]);
    expect([r.status, r.stdout]).toEqual([2, "2 events, 0 deltas: the client applies every one\n"]);
    expect(r.stderr).toMatch(/^agui-state check: cannot write --sarif [^\n]+\n$/);
    const u = agui(["check", "clean.ndjson", "--junit"]);
    expect([u.status, u.stdout]).toEqual([2, ""]);
    expect(existsSync(path.join(work, "no"))).toBe(false);
  });
});
