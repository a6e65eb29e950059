import { isDeepStrictEqual } from "node:util";
import type { Fixture, Thread } from "./replay.js";

/**
 * The checks every path shares: the client's thread through agui-state
 * against the same thread with the framework alone (the reference, served the
 * same recorded bytes with nothing between). What agui-state may change is
 * the client's own key, and nothing else the client ends with.
 */

const STATE_EVENTS = new Set(["STATE_SNAPSHOT", "STATE_DELTA"]);

/**
 * Each SSE event of a wire answer: its type and the bytes of its data (the
 * event's JSON). The id: line agui-state adds to every event (resume,
 * protocol/README.md §16) is no state, and is not counted.
 */
export function events(wire: string): { type: string; bytes: number }[] {
  return wire
    .split(/(?<=\n\n)/)
    .map((block) => block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n"))
    .filter((data) => data !== "")
    .map((data) => ({ type: (JSON.parse(data) as { type: string }).type, bytes: Buffer.byteLength(data, "utf8") }));
}

/** Whether a STATE_SNAPSHOT of the fixture's answers holds the root member `name`. */
export function snapshotsHold(f: Fixture, name: string): boolean {
  return f.runs.some((r) =>
    r.body
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .some((l) => {
        const e = JSON.parse(l.slice(6)) as { type: string; snapshot?: object };
        return e.type === "STATE_SNAPSHOT" && e.snapshot !== undefined && Object.hasOwn(e.snapshot, name);
      }),
  );
}

/** The bytes of a thread's STATE_SNAPSHOT and STATE_DELTA events on the wire, all runs together. */
export const stateBytes = (t: Thread): number => t.runs.flatMap((r) => events(r.wire)).filter((e) => STATE_EVENTS.has(e.type)).reduce((n, e) => n + e.bytes, 0);

/** Whether some run of the framework's answers carries more than one STATE_SNAPSHOT. */
export const snapshotsOften = (f: Fixture): boolean => f.runs.some((r) => events(r.body).filter((e) => e.type === "STATE_SNAPSHOT").length > 1);

/** The value of the client's key the client held going into the thread's last run. */
const keyHeld = (f: Fixture, t: Thread): unknown => (t.runs.at(-1)?.sent.state as Record<string, unknown> | undefined)?.[f.clientKey];

/** What the client must end with through agui-state: the framework's final state, plus the client's key. */
export function expectedState(f: Fixture, direct: Thread): unknown {
  const key = keyHeld(f, direct);
  return key === undefined ? direct.state : { ...(direct.state as object), [f.clientKey]: key };
}

/**
 * The framework's root members named `__proto__`: no STATE_DELTA op can name
 * one (protocol/README.md §3, the client's library refuses the whole delta),
 * so no `own` may hold it (FORBIDDEN_KEY), and under own, where every snapshot
 * goes as a delta, a snapshot's value there is reported (wiped, kept) and the
 * client never holds it; the framework alone, whose snapshot the client parses
 * with JSON.parse, gives it one. Asserted as it stands (langgraph-cli.test.ts),
 * kept out of the other checks.
 */
export const FORBIDDEN_ROOT = "__proto__";
const holdsForbidden = (state: unknown): boolean => typeof state === "object" && state !== null && Object.hasOwn(state, FORBIDDEN_ROOT);
export const unreachable = (state: unknown): string[] => (holdsForbidden(state) ? [`/${FORBIDDEN_ROOT}`] : []);

/** `state` without its root `__proto__` member. */
function withoutForbidden(state: unknown): unknown {
  if (!holdsForbidden(state)) return state;
  return Object.fromEntries(Object.entries(state as object).filter(([k]) => k !== FORBIDDEN_ROOT));
}

/**
 * Every check the thread `ours` (through agui-state) fails against `direct`:
 * [] when it holds. The final state is the framework's plus the client's key
 * (deep equal; a root `__proto__` aside, above); the messages are the framework's; the client warned of
 * nothing; each run ended as it did with the framework alone (the same
 * RUN_ERRORs, none added; rejected where it was); no snapshot went out
 * unrepaired; each request the client sent is the recorded one.
 */
export function againstDirect(f: Fixture, direct: Thread, ours: Thread): string[] {
  const failed: string[] = [];
  const expected = withoutForbidden(expectedState(f, direct));
  if (!isDeepStrictEqual(ours.state, expected)) failed.push(`state ${JSON.stringify(ours.state).slice(0, 600)}, not ${JSON.stringify(expected).slice(0, 600)}`);
  if (!isDeepStrictEqual(ours.messages, direct.messages)) failed.push(`messages ${JSON.stringify(ours.messages).slice(0, 600)}, not ${JSON.stringify(direct.messages).slice(0, 600)}`);
  if (ours.warnings.length > 0) failed.push(`the client warned: ${ours.warnings.join(" | ")}`);
  ours.runs.forEach((r, i) => {
    const d = direct.runs[i];
    if (!isDeepStrictEqual(r.runErrors, d?.runErrors)) failed.push(`run ${i + 1}: RUN_ERRORs ${JSON.stringify(r.runErrors)}, not ${JSON.stringify(d?.runErrors)}`);
    if ((r.rejected === undefined) !== (d?.rejected === undefined)) failed.push(`run ${i + 1}: runAgent ${r.rejected === undefined ? "resolved" : `rejected (${r.rejected})`}, with the framework alone ${d?.rejected === undefined ? "resolved" : `rejected (${d.rejected})`}`);
  });
  // Under own every STATE_SNAPSHOT goes as a STATE_DELTA on the owned members (protocol/README.md §13): one on
  // the wire means the repair did not run there (a middleware that failed open sends the rest as it came).
  ours.runs.forEach((r, i) => {
    if (events(r.wire).some((e) => e.type === "STATE_SNAPSHOT")) failed.push(`run ${i + 1}: a STATE_SNAPSHOT reached the client: the answer went out unrepaired`);
  });
  // The recorded answers were recorded for the requests a client with agui-state sends: through agui-state,
  // the client's own request (what it holds after the run before, and the user's next message) is that one.
  ours.runs.forEach((r, i) => {
    const recorded = f.runs[i]?.request;
    if (!isDeepStrictEqual(withoutForbidden(r.sent.state), withoutForbidden(recorded?.state))) failed.push(`run ${i + 1}: the client sent the state ${JSON.stringify(r.sent.state).slice(0, 300)}, not the recorded ${JSON.stringify(recorded?.state).slice(0, 300)}`);
    if (!isDeepStrictEqual(r.sent.messages, recorded?.messages)) failed.push(`run ${i + 1}: the client sent other messages than the recorded request`);
  });
  if (ours.runs.length !== f.runs.length) failed.push(`${ours.runs.length} runs, not ${f.runs.length}`);
  return failed;
}

/**
 * The framework alone's known failure (the negative control): a run after the
 * first whose answer carries a STATE_SNAPSHOT takes the client's key from the
 * client, though the client sent it. The runs where it did: [] when none.
 */
export function wipedRuns(f: Fixture, direct: Thread): number[] {
  return direct.runs.flatMap((r, i) => {
    const sentKey = (r.sent.state as Record<string, unknown> | undefined)?.[f.clientKey];
    const after = (r.stateAfter as Record<string, unknown> | undefined)?.[f.clientKey];
    return i > 0 && sentKey !== undefined && !isDeepStrictEqual(after, sentKey) ? [i + 1] : [];
  });
}

/** The runs after the first whose recorded answer carries a STATE_SNAPSHOT (1-based). */
export const snapshotRuns = (f: Fixture): number[] => f.runs.flatMap((r, i) => (i > 0 && events(r.body).some((e) => e.type === "STATE_SNAPSHOT") ? [i + 1] : []));

/** One line of bytes for the report: the state events' bytes with the framework alone and through `via`. */
export const bytesLine = (f: Fixture, via: string, direct: Thread, ours: Thread): string =>
  `state bytes, ${f.graph}: framework alone ${stateBytes(direct)}, through ${via} ${stateBytes(ours)} (${((1 - stateBytes(ours) / stateBytes(direct)) * 100).toFixed(0)}% fewer)`;
