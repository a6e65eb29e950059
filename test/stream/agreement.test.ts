import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { StreamChecker } from "../../src/stream/checker.js";
import { printable, type Finding } from "../../src/stream/findings.js";

const plain = (v: unknown): boolean => {
  try {
    structuredClone(v);
  } catch {
    return false;
  }
  return printable(v);
};
import { replayThroughClient, sseBlocks, type Kind } from "./reference.js";
import { CORPUS, LINE_ENDS, stream, toSse, toSseWith, type Case } from "./streams.js";

/**
 * `check` must agree with the real client: over the corpus of field mistakes
 * and over fuzzed streams, the events it flags, and how, are exactly the
 * events @ag-ui/client 1.0.0 fails on (fatal), warns on (dropped) or skips
 * without a word (ignored), and it ends on the state and activities the
 * client holds. The seed is fixed under CI; fast-check prints it otherwise.
 */
const seed = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : process.env["CI"] === "true" ? 20261207 : undefined;
const numRuns = Number(process.env["FC_RUNS"] ?? 200);

// A `wiped` finding says what a snapshot the client applied cost it: the client itself says nothing of it.
const byEvent = (findings: readonly Finding[]): Record<number, Kind[]> => {
  const out: Record<number, Set<Kind>> = {};
  for (const f of findings) if (f.kind !== "wiped") (out[f.event] ??= new Set()).add(f.kind);
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...v].sort()]));
};

async function agree(c: Case, text = toSse(c.events)): Promise<void> {
  const checker = new StreamChecker(structuredClone(c.state));
  const findings = [...checker.push(new TextEncoder().encode(text)), ...checker.end()];
  const real = await replayThroughClient(sseBlocks(text), c.state);
  const theirs = Object.fromEntries([...real.verdicts].map(([k, v]) => [String(k), [...v].sort()]));
  expect(byEvent(findings), `check's findings vs the client's warnings ${JSON.stringify(real.warnings).slice(0, 1500)} and error ${JSON.stringify(real.error)}`).toEqual(theirs);
  // The client emits only states it can copy. A reducer that fast-json-patch left holding
  // undefined or a cycle (UNUSABLE_STATE) or a function (INHERITED_MEMBER) emits nothing
  // more, so only the findings can be compared then.
  if (plain(checker.model.state)) expect(checker.model.state).toEqual(real.state);
  expect(new Map(checker.model.activities)).toEqual(real.activities);
}

describe("check agrees with @ag-ui/client 1.0.0", () => {
  for (const c of CORPUS) it(`on the corpus: ${c.name}`, () => agree(c));

  it("flags something in every corpus stream but those the client applies whole", () => {
    const applied = ["a clean run", "two runs keep the state", "a remove of the root, which the client applies"];
    for (const c of CORPUS) {
      const checker = new StreamChecker(structuredClone(c.state));
      const n = [...checker.push(toSse(c.events)), ...checker.end()].length;
      expect(n > 0, c.name).toBe(!applied.includes(c.name));
    }
  });

  it("on fuzzed streams", async () => {
    await fc.assert(fc.asyncProperty(stream(false), (c) => agree(c)), { numRuns, ...(seed !== undefined ? { seed } : {}) });
  });

  it("on a stream framed with CRLF, which the client reads as one event and fails on", async () => {
    const c = CORPUS.find((k) => k.name === "a clean run") as Case;
    const text = toSseWith(c.events, ["\r\n\r\n"]);
    await agree(c, text);
    const checker = new StreamChecker(structuredClone(c.state));
    const findings = [...checker.push(text), ...checker.end()];
    expect(findings.map((f) => [f.event, f.kind, f.code])).toEqual([[1, "fatal", "SSE_LINE_ENDS"]]);
    expect(findings[0]?.hint).toMatch(/LF/);
  });

  it("on a stream framed with CRLF longer than the client holds unsplit (10 MiB): one fatal finding, and its state", async () => {
    const c = CORPUS.find((k) => k.name === "a clean run") as Case;
    const big = JSON.stringify({ type: "CUSTOM", name: "x", value: "y".repeat(100_000) });
    const events = [...c.events.slice(0, -1), ...Array.from({ length: 110 }, () => big), ...c.events.slice(-1)];
    const text = toSseWith(events, ["\r\n\r\n"]);
    const checker = new StreamChecker(structuredClone(c.state));
    const findings = [...checker.push(text), ...checker.end()];
    expect(findings.map((f) => [f.event, f.kind, f.code])).toEqual([[1, "fatal", "SSE_BUFFER_LIMIT"]]);
    expect(findings[0]?.hint).toMatch(/LF/);
    expect(checker.summary).toEqual({ events: 1, deltas: 0, dropped: 0, ignored: 0, fatal: 1, wiped: 0 });
    const real = await replayThroughClient(sseBlocks(text), c.state);
    expect(real.error?.message).toMatch(/SSE buffer size exceeded/);
    expect(real.state).toEqual(checker.model.state);
  });

  it("on fuzzed streams whose events end their lines with LF, CRLF, CR or a mix", async () => {
    const ends = fc.array(fc.constantFrom(...LINE_ENDS), { minLength: 1, maxLength: 6 });
    await fc.assert(fc.asyncProperty(stream(false), ends, (c, e) => agree(c, toSseWith(c.events, e))), { numRuns, ...(seed !== undefined ? { seed } : {}) });
  });
});
