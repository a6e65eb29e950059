import { expect } from "vitest";

/** A rejoin of the run at `url`: the original request (its body, or `b`) sent again with Last-Event-ID and these headers. */
export type Asker = (id: string, headers: Record<string, string>, b?: string) => Promise<Response>;

export const rejoiner =
  (url: string, body: string): Asker =>
  (id, headers, b = body) =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", "last-event-id": id, ...headers }, body: b });

/**
 * The refusals every server owes a rejoin (protocol/README.md §16), for a run started with `creds`
 * in thread "t9" (the body's), whose event `last` was sent: other credentials, missing cookies,
 * another thread, a forged id and a malformed one all get 410 with one and the same body.
 */
export async function expectRefusals(ask: Asker, last: string, body: string, creds: { authorization: string; cookie: string }): Promise<void> {
  const refused = [
    await ask(last, { ...creds, authorization: "Bearer mallory" }),
    await ask(last, { authorization: creds.authorization }),
    await ask(last, creds, body.replace('"t9"', '"t10"')),
    await ask(`${last.split(".").slice(0, 2).join(".")}.AAAAAAAAAAAAAAAA`, creds),
    await ask("nonsense", creds),
  ];
  const bodies = await Promise.all(refused.map((r) => r.text()));
  expect(refused.map((r) => r.status)).toEqual([410, 410, 410, 410, 410]);
  expect(new Set(bodies).size).toBe(1);
  expect(JSON.parse(bodies[0] as string)).toMatchObject({ error: { code: "resume_unknown" } });
}
