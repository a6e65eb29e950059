import jsonpatch from "fast-json-patch";
import { describe, expect, it } from "vitest";
import { parseNdjson } from "../../scripts/harness/frames.js";
import { responses, resultOf, type Response } from "../../scripts/harness/jsonrpc.js";
import { run, SEA } from "../../scripts/harness/process.js";
import { fuzz } from "../../scripts/fuzz/run.js";

/**
 * The short fuzz run: ~20k seeded messages through the real binary, in both
 * framings, with every invariant of scripts/fuzz/ checked after each stream.
 * A fresh seed each run unless FUZZ_SEED is set, or CI=true, where the seed is
 * fixed so that a CI run is a repeatable gate (`npm run fuzz` explores fresh
 * seeds); a failure names the seed.
 * `npm run fuzz -- --long` is the long version.
 *
 * Below it, the bugs found while building the fuzzer (at 1f38eed), each reduced to the bytes
 * that show it. They were kept as `it.fails` while they stood; all were fixed
 * in 60b7e94, and each test now guards its fix. The fuzzer generates all of
 * these inputs by default (`FUZZ_BIN=<old build> npm run fuzz` finds them).
 */

const SEED = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : process.env["CI"] === "true" ? 20261130 : Math.floor(Math.random() * 2 ** 31);
describe("fuzzing the running process", () => {
  it("keeps every invariant over ~20k hostile messages, NDJSON and LSP", async () => {
    console.error(`[fuzz] seed ${SEED} (replay: FUZZ_SEED=${SEED} npx vitest run test/hardening/fuzz.test.ts, or npm run fuzz -- --seed ${SEED})`);
    const reports = await fuzz({ seed: SEED, streams: 4, messages: 5_000, huge: 2 });
    const faults = reports.flatMap((r) => r.faults.map((f) => `stream seed ${r.seed} (${r.framing}): ${f}`));
    expect(reports.reduce((a, r) => a + r.messages, 0)).toBeGreaterThanOrEqual(20_000);
    expect(new Set(reports.map((r) => r.framing))).toEqual(new Set(["ndjson", "lsp"]));
    // Enough of the streams did real work for the checks to mean something.
    expect(reports.reduce((a, r) => a + r.deltas, 0), "deltas replayed on replicas").toBeGreaterThan(1000);
    expect(faults, `fuzz seed ${SEED} broke an invariant; replay with FUZZ_SEED=${SEED}`).toEqual([]);
  });
});

/** Sends NDJSON lines to a fresh process, ends stdin, and returns the responses (batches flattened). */
async function send(...lines: string[]): Promise<Response[]> {
  const r = await run(SEA, [], lines.map((l) => `${l}\n`).join(""));
  expect(r.code).toBe(0);
  return responses(parseNdjson(r.stdout).flatMap((f) => (Array.isArray(f) ? f : [f])));
}

const byId = (rs: Response[], id: number): Response | undefined => rs.find((r) => r.id === id);

describe("bugs found while building the fuzzer", () => {
  // The replies of a batch were serialized together after its last member ran, and diffToolState's
  // delta held the very objects it put in the mirror (ownsInput). A later member that changed such an
  // object rewrote the earlier delta: the client received `add /toolState/k {}` and then
  // `remove /toolState/k/a`, which fails, so @ag-ui/client dropped that delta.
  it("a batch member's delta is not changed by later members of the same batch", async () => {
    const rs = await send(
      '{"jsonrpc":"2.0","id":1,"method":"openRun","params":{"threadId":"t","toolState":{}}}',
      '[{"jsonrpc":"2.0","id":2,"method":"diffToolState","params":{"threadId":"t","set":{"k":{"a":1}}}},{"jsonrpc":"2.0","id":3,"method":"applyOps","params":{"threadId":"t","ops":[{"op":"remove","path":"/toolState/k/a"}]}}]',
    );
    expect((resultOf(byId(rs, 2)) as { delta: unknown }).delta).toEqual([{ op: "add", path: "/toolState/k", value: { a: 1 } }]);
    let client: unknown = { toolState: {} };
    for (const id of [2, 3]) client = jsonpatch.applyPatch(client, (resultOf(byId(rs, id)) as { delta: jsonpatch.Operation[] }).delta, true, false).newDocument;
    expect(client).toEqual({ toolState: { k: {} } });
  });

  // parseJson put its UnsafeInteger marker where the tokenizer saw the literal, walking the parsed
  // value by the literal's path. With a member name given twice the path led through the earlier,
  // discarded value: `"a":{"__proto__":{...}},"a":{}` walked into Object.prototype and set
  // Object.prototype.ifVersion. From then on every request with params failed (openRun: "/ifVersion
  // must be integer"), in every thread, until the process restarted.
  it("an unsafe integer under a repeated member name cannot reach Object.prototype", async () => {
    const rs = await send(
      '{"jsonrpc":"2.0","id":1,"method":"normalize","params":{"ops":[],"a":{"__proto__":{"ifVersion":12345678901234567890}},"a":{}}}',
      '{"jsonrpc":"2.0","id":2,"method":"openRun","params":{"threadId":"t"}}',
    );
    expect(byId(rs, 2)).toMatchObject({ result: { threadId: "t", version: 0 } });
  });

  // The same walk: when the discarded value was deeper than the kept one, it met undefined and threw;
  // the TypeError was answered as a parse error with id null ("Cannot set properties of undefined"),
  // so a valid request with id 7 never got its response.
  it("a valid request with a repeated member name is answered with its own id", async () => {
    const rs = await send('{"jsonrpc":"2.0","id":7,"method":"stats","params":{"x":{"y":{"z":12345678901234567890}},"x":{}}}');
    expect(rs.map((r) => r.id)).toEqual([7]);
  });

  // A literal beyond a double's range (1e400, -1e999) parsed to ±Infinity, was stored, and went out
  // as null: a number silently changed, against protocol/README.md §3.
  it("a number that overflows a double is refused, not stored as null", async () => {
    const rs = await send(
      '{"jsonrpc":"2.0","id":1,"method":"openRun","params":{"threadId":"t","state":{}}}',
      '{"jsonrpc":"2.0","id":2,"method":"applyOps","params":{"threadId":"t","ops":[{"op":"add","path":"/e","value":1e400}]}}',
      '{"jsonrpc":"2.0","id":3,"method":"getState","params":{"threadId":"t"}}',
    );
    expect(byId(rs, 2)).toMatchObject({ error: { code: -32602 } });
    expect(byId(rs, 3)).toMatchObject({ result: { version: 0, state: {} } });
  });

  // diffObjects replaced the whole object when any of its keys was forbidden, even one that did not
  // change. At the root that was `replace ""`, which wipes the members the client keeps for itself
  // (protocol/README.md §1), against protocol/README.md §6 (diffState at the root: no `replace ""`); only `replace /a` is needed.
  it("diffState at a root with an unchanged __proto__ member does not replace the root", async () => {
    const rs = await send(
      '{"jsonrpc":"2.0","id":1,"method":"openRun","params":{"threadId":"t","state":{"__proto__":1,"a":2}}}',
      '{"jsonrpc":"2.0","id":2,"method":"diffState","params":{"threadId":"t","value":{"__proto__":1,"a":3}}}',
    );
    expect((resultOf(byId(rs, 2)) as { delta: unknown }).delta).toEqual([{ op: "replace", path: "/a", value: 3 }]);
  });
});
