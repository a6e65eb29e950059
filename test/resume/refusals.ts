import { expect } from "vitest";

/** A rejoin of the run at `url`: the original request (its body, or `b`) sent again with Last-Event-ID and these headers. */
export type Asker = (id: string, headers: Record<string, string>, b?: string) => Promise<Response>;

export const rejoiner =
  (url: string, body: string): Asker =>
  (id, headers, b = body) =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", "last-event-id": id, ...headers }, body: b });

/**
 * The refusals every server owes a rejoin (protocol/README.md §16), for a run started with `creds`
 * in thread "t9" (the body's), whose event `last` was sent: another Authorization, none (the cookie
 * alone: the default credential is Authorization, and cookies count only when the operator names
 * them), another thread, a forged id and a malformed one all get 410 with one and the same body.
 */
export async function expectRefusals(ask: Asker, last: string, body: string, creds: { authorization: string; cookie: string }): Promise<void> {
  const refused = [
    await ask(last, { ...creds, authorization: "Bearer mallory" }),
    await ask(last, { cookie: creds.cookie }),
    await ask(last, creds, body.replace('"t9"', '"t10"')),
    await ask(`${last.split(".").slice(0, 2).join(".")}.AAAAAAAAAAA`, creds),
    await ask("nonsense", creds),
  ];
  const bodies = await Promise.all(refused.map((r) => r.text()));
  expect(refused.map((r) => r.status)).toEqual([410, 410, 410, 410, 410]);
  expect(new Set(bodies).size).toBe(1);
  expect(JSON.parse(bodies[0] as string)).toMatchObject({ error: { code: "resume_unknown" } });
}

/**
 * Only the requester rejoins, end to end (§16), as the Python and Go middleware's tests check it, for
 * a run at `url` started with `creds`, held after its event `last` went out: every refusal above and a
 * reload with other credentials (204) leave the app called once; then, the run let go (`release`),
 * the requester's rejoin gets exactly the events after `last` and the rest of the run: a whole run's
 * (`whole`, one more call of the app) but its first two.
 */
export async function expectOnlyRequester(o: { url: string; body: string; creds: { authorization: string; cookie: string }; last: string; calls: () => Promise<number>; release: () => Promise<unknown>; whole: () => Promise<string> }): Promise<void> {
  const ask = rejoiner(`${o.url}/agent`, o.body);
  await expectRefusals(ask, o.last, o.body, o.creds);
  const connect = await fetch(`${o.url}/agent/connect`, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer mallory" }, body: o.body });
  expect(connect.status).toBe(204);
  expect(await o.calls()).toBe(1);
  await o.release();
  const ok = await ask(o.last, o.creds);
  expect(ok.status).toBe(200);
  expect(ok.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const rest = await ok.text();
  const all = await o.whole();
  const types = (s: string) => [...s.matchAll(/"type":\s*"([A-Z_]+)"/g)].map((m) => m[1]);
  expect(types(rest)).toEqual(types(all).slice(2));
  // The run above, and the one that gave `whole`.
  expect(await o.calls()).toBe(2);
}
