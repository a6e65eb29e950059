import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { StreamChecker } from "../../src/stream/checker.js";
import { CLIENT_SSE_LIMIT, EventReader } from "../../src/stream/events.js";
import { stopsHere } from "../../src/stream/findings.js";
import { StreamFixer, type Finding, type Reported } from "../../src/stream/fixer.js";
import { replayThroughClient, sseBlocks } from "./reference.js";
import { CORPUS, LINE_ENDS, stream, toNdjson, toSse, toSseWith, type Case } from "./streams.js";

/**
 * The fix guarantee: the fixed stream, replayed through the real
 * @ag-ui/client 1.0.0, gives no warning, no error and skips nothing, and ends
 * on exactly the state and activities fix's mirror holds; what fix cannot
 * mend (a lifecycle break, an event other than a delta that the schema
 * refuses, an unknown type) it counts as unfixed, and only then may the
 * client still complain.
 */
const seed = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : process.env["CI"] === "true" ? 20261208 : undefined;
const numRuns = Number(process.env["FC_RUNS"] ?? 200);
const opts = { numRuns, ...(seed !== undefined ? { seed } : {}) };

function fix(text: string, state: Case["state"], chunk = Infinity): { out: string; fixer: StreamFixer; findings: Reported[] } {
  const findings: Reported[] = [];
  const fixer = new StreamFixer({ state: structuredClone(state), onFinding: (f) => findings.push(f) });
  let out = "";
  const bytes = new TextEncoder().encode(text);
  for (let i = 0; i < bytes.length; i += chunk) out += fixer.push(bytes.subarray(i, Math.min(bytes.length, i + chunk)));
  return { out: out + fixer.end(), fixer, findings };
}

/** The data of each event in a stream, in order. */
const eventsOf = (text: string): string[] => {
  const r = new EventReader();
  return [...r.push(text), ...r.end()].flatMap((i) => (i.data === undefined ? [] : [i.data]));
};

async function guarantee(c: Case, text = toSse(c.events)): Promise<void> {
  const { out, fixer } = fix(text, c.state);
  const real = await replayThroughClient(sseBlocks(out), c.state);
  if (fixer.unfixed === 0) {
    expect(real.warnings).toEqual([]);
    expect(real.error).toBeUndefined();
    expect([...real.verdicts]).toEqual([]);
    expect(real.state).toEqual(fixer.state);
    expect(real.activities).toEqual(new Map(fixer.activities));
  } else {
    // What fix left as it was still trips the client: fix said so.
    expect(real.verdicts.size).toBeGreaterThan(0);
  }
  // check agrees: the fixed stream holds nothing but what fix could not mend.
  const checker = new StreamChecker(structuredClone(c.state));
  // A snapshot fix passes as sent (no --own) still wipes what it wipes: `wiped` is not a thing fix mends by default.
  const left = [...checker.push(out), ...checker.end()].filter((f) => f.kind !== "wiped");
  if (fixer.unfixed === 0) expect(left).toEqual([]);
  // Fixing twice changes nothing more.
  expect(fix(out, c.state).out).toBe(out);
}

describe("fix", () => {
  for (const c of CORPUS) it(`makes the corpus stream apply: ${c.name}`, () => guarantee(c));

  it("makes fuzzed well-framed streams apply, with nothing left unfixed", async () => {
    await fc.assert(
      fc.asyncProperty(stream(true), async (c) => {
        expect(fix(toSse(c.events), c.state).fixer.unfixed).toBe(0);
        await guarantee(c);
      }),
      opts,
    );
  });

  it("makes fuzzed streams apply, or says what it could not mend", async () => {
    await fc.assert(fc.asyncProperty(stream(false), (c) => guarantee(c)), opts);
  });

  it("passes an event longer than the client accepts (10 MiB), and the rest of the stream, on as it came, and says so", async () => {
    const J = (e: unknown) => JSON.stringify(e);
    const state = { ui: "kept" };
    const head = toSse([J({ type: "RUN_STARTED", threadId: "t", runId: "r" }), J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/todos/-", value: "milk" }] })]);
    // Longer than the limit by more than a chunk, so that the limit is passed before the event's end arrives.
    const endless = "data: " + J({ type: "CUSTOM", name: "big", value: "y".repeat(CLIENT_SSE_LIMIT + 200_000) });
    // After it, a delta fix would mend, were it still reading: it goes out as it came.
    const rest = "\n" + toSse([J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/more/-", value: 1 }] }), J({ type: "RUN_FINISHED", threadId: "t", runId: "r" })]);
    const { out, fixer, findings } = fix(head + endless + rest, state, 65536);
    const fixedHead = fix(head, state).out;
    expect(out).toBe(fixedHead + endless + rest);
    expect(findings.map((f) => [f.event, (f as Finding).kind, f.code, f.outcome])).toEqual([
      [2, "dropped", "PATH_NOT_FOUND", "mended"],
      [3, "fatal", "SSE_BUFFER_LIMIT", "passed"],
    ]);
    expect(fixer.unfixed).toBe(1);
    expect(fixer.state).toEqual({ ui: "kept", todos: ["milk"] });
    // The real client, given the output in 64 KiB reads as a socket gives it: the mended delta applies,
    // then its SSE parser gives up at the long event.
    const reads = [...sseBlocks(fixedHead), ...Array.from({ length: Math.ceil((endless + rest).length / 65536) }, (_, i) => (endless + rest).slice(i * 65536, (i + 1) * 65536))];
    const real = await replayThroughClient(reads, state);
    expect(real.warnings).toEqual([]);
    expect(real.error?.message).toMatch(/SSE buffer size exceeded/);
    expect(real.state).toEqual(fixer.state);
  });

  it("takes an event longer than 10 MiB that does end the same way, however the stream is cut", () => {
    const J = (e: unknown) => JSON.stringify(e);
    const events = [
      J({ type: "RUN_STARTED", threadId: "t", runId: "r" }),
      J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/todos/-", value: "milk" }] }),
      J({ type: "CUSTOM", name: "big", value: "y".repeat(CLIENT_SSE_LIMIT) }),
      J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/more/-", value: 1 }] }),
      J({ type: "RUN_FINISHED", threadId: "t", runId: "r" }),
    ];
    const text = toSse(events);
    const runs = [Infinity, 1024 * 1024, 65536].map((chunk) => fix(text, {}, chunk));
    const head = fix(toSse(events.slice(0, 2)), {}).out;
    for (const r of runs) {
      expect(r.out).toBe(head + toSse(events.slice(2)));
      expect(r.findings.map((f) => [f.event, f.code, f.outcome])).toEqual([
        [2, "PATH_NOT_FOUND", "mended"],
        [3, "SSE_BUFFER_LIMIT", "passed"],
      ]);
    }
  });

  it("writes a stream framed with CRLF, CR or a mix with LF line ends, which the client reads event by event", async () => {
    const ends = fc.array(fc.constantFrom(...LINE_ENDS), { minLength: 1, maxLength: 6 });
    await fc.assert(
      fc.asyncProperty(stream(true), ends, fc.integer({ min: 1, max: 64 }), async (c, e, chunk) => {
        const text = toSseWith(c.events, e);
        const { out } = fix(text, c.state);
        expect(out).not.toMatch(/\r/);
        // The same events as the input read by the SSE spec, however the input is cut.
        expect(eventsOf(out)).toEqual(eventsOf(fix(toSse(c.events), c.state).out));
        expect(fix(text, c.state, chunk).out).toBe(out);
        await guarantee(c, text);
      }),
      opts,
    );
  });

  it("reports nothing on a stream the client applies whole, passes its other events byte for byte, and lands on the same state", async () => {
    await fc.assert(
      fc.asyncProperty(stream(true), async (c) => {
        const text = toSse(c.events);
        // Ops the client applies but fix refuses by design end elsewhere, so they are left out here:
        // those naming the root (fast-json-patch lets them leave null, or a cycle; §11, §5 rule 7)
        // and those through prototype keys (§3; fast-json-patch reads inherited members).
        if (/"(path|from)":""|__proto__|constructor|prototype/.test(text + JSON.stringify(c.state))) return;
        const checker = new StreamChecker(structuredClone(c.state));
        if ([...checker.push(text), ...checker.end()].length > 0) return;
        const { out, findings, fixer } = fix(text, c.state);
        expect(findings).toEqual([]);
        // Deltas may still be re-expressed (protocol/README.md §5 rule 7: no op names the root), never anything else.
        const others = (t: string) => sseBlocks(t).filter((b) => !/"type":"(STATE|ACTIVITY)_DELTA"/.test(b));
        expect(others(out)).toEqual(others(text));
        expect(fixer.state).toEqual(checker.model.state);
        expect(new Map(fixer.activities)).toEqual(new Map(checker.model.activities));
      }),
      opts,
    );
  });

  it("words its findings as check does, up to the first event it changes", () => {
    fc.assert(
      fc.property(stream(false), (c) => {
        const text = toSse(c.events);
        const checker = new StreamChecker(structuredClone(c.state));
        const checked = [...checker.push(text), ...checker.end()];
        // One block at a time: fix writes each event as soon as it is complete, so each block's output is its own.
        const findings: Reported[] = [];
        const fixer = new StreamFixer({ state: structuredClone(c.state), onFinding: (f) => findings.push(f) });
        const blocks = sseBlocks(text);
        const changed = blocks.findIndex((b) => fixer.push(b) !== b) + 1 || Infinity;
        // Until then fix's mirror is what the client holds, so the findings match, up to the event
        // where the client's run fails (check stops there; fix goes on). At that event, a delta fix
        // sends on may also meet a lifecycle break, which fix adds after check's findings.
        const limit = Math.min(changed, checker.model.stopped?.event ?? Infinity);
        const before = (fs: Reported[]) => fs.filter((f) => f.event < limit);
        expect(before(findings)).toEqual(before(checked));
        // At that event fix says what it did (the outcome), and its hints do not send the reader to fix.
        const asChecked = (f: Reported): Reported => ({ ...f, outcome: "passed", ...(f.hint !== undefined ? { hint: f.hint.replace(/ \(`fix` [^)]*\)$/, "") } : {}) });
        const at = (fs: Reported[]) => fs.filter((f) => f.event === limit);
        const ours = at(findings);
        const theirs = at(checked).map(asChecked);
        const same = (a: Reported, b: Reported) => JSON.stringify(asChecked(a)) === JSON.stringify(b);
        // Each of check's findings is fix's too, in check's words, but for an op fix sent as itself
        // (one that fails only against the client's state, which fix has mended by then): never
        // the op the client stops at, which fix always reports.
        for (const t of theirs) if (!ours.some((o) => same(o, t))) expect(t.index !== undefined && !stopsHere(t)).toBe(true);
        // What fix adds: a lifecycle break, a wipe, a snapshot it left out, or an op it changed that
        // check does not name (in the core's words, or its rule's), never one it sent as it came.
        for (const o of ours.filter((o) => !theirs.some((t) => same(o, t)))) {
          if (o.index === undefined) expect(o.code).toMatch(/^(FIRST_EVENT|AFTER_RUN_FINISHED|AFTER_RUN_ERROR|LIFECYCLE|SNAPSHOT_WIPE|ROOT_NOT_OBJECT)$/);
          else expect(o.outcome).toMatch(/^(mended|discarded)$/);
        }
      }),
      opts,
    );
  });

  it("gives the same events in NDJSON as in SSE, and the same for any chunking", () => {
    fc.assert(
      fc.property(stream(false), fc.integer({ min: 1, max: 64 }), (c, chunk) => {
        const sse = fix(toSse(c.events), c.state).out;
        const nd = fix(toNdjson(c.events), c.state, chunk).out;
        expect(eventsOf(nd)).toEqual(eventsOf(sse));
        expect(fix(toSse(c.events), c.state, chunk).out).toBe(sse);
      }),
      opts,
    );
  });
});
