import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { expect } from "vitest";

/**
 * The resume edge's conformance table (test/fixtures/resume-edge/cases.json, protocol/README.md §16),
 * played over HTTP against a server with resume on: the proxy here, and, in the same way, each
 * middleware's own suite. One table, so that no server can decide a rule another decides otherwise.
 */
export interface EdgeRequest {
  method: string;
  path: string;
  headers: [string, string][];
  body?: unknown;
}

export interface EdgeCase {
  name: string;
  why: string;
  start?: EdgeRequest;
  request: EdgeRequest;
  expect: { status: number; app: boolean; events?: string[]; ids?: boolean; headers?: Record<string, string>; absent?: string[]; body?: string };
}

export interface EdgeTable {
  app: { status: number; headers: [string, string][]; events: object[] };
  gone: { status: number; headers: Record<string, string>; body: string };
  cases: EdgeCase[];
}

export const EDGE_TABLE: EdgeTable = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, "../fixtures/resume-edge/cases.json"), "utf8")) as EdgeTable;

/** The table's app: every request it gets is counted and answered with the same event stream. */
export async function startEdgeApp(): Promise<{ url: string; calls: () => number; close: () => Promise<void> }> {
  let calls = 0;
  const { app } = EDGE_TABLE;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      calls++;
      res.writeHead(app.status, app.headers.flat());
      res.end(app.events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join(""));
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls: () => calls, close: () => new Promise((done) => server.close(() => done())) };
}

const send = (base: string, r: EdgeRequest, values: Record<string, string> = {}): Promise<Response> =>
  fetch(`${base}${r.path}`, {
    method: r.method,
    headers: r.headers.map(([n, v]): [string, string] => [n, v.replace(/\$(opening|last|forged)/g, (m) => values[m] ?? m)]),
    ...(r.body !== undefined ? { body: JSON.stringify(r.body) } : {}),
  });

/** The `id:` values of an SSE text, in order, and the `type` of each data block. */
function read(text: string): { ids: string[]; types: string[]; blocks: string[] } {
  const blocks = text.split(/\n\n/).filter((b) => b !== "");
  const ids = blocks.flatMap((b) => [...b.matchAll(/^id: (.*)$/gm)].map((m) => m[1] as string));
  const data = blocks.filter((b) => /^data:/m.test(b));
  const types = data.map((b) => (JSON.parse(/^data: (.*)$/m.exec(b)?.[1] ?? "{}") as { type?: string }).type ?? "");
  return { ids, types, blocks: data };
}

/** Plays one case against the server at `base`, whose app is counted by `calls`. */
export async function playEdgeCase(base: string, calls: () => number, c: EdgeCase): Promise<void> {
  const values: Record<string, string> = {};
  if (c.start) {
    const started = read(await (await send(base, c.start)).text());
    const opening = started.ids[0] ?? "";
    values["$opening"] = opening;
    values["$last"] = started.ids[started.ids.length - 1] ?? "";
    values["$forged"] = `${opening.slice(0, -1)}${opening.endsWith("A") ? "B" : "A"}`;
  }
  const before = calls();
  const res = await send(base, c.request, values);
  const text = await res.text();
  const e = c.expect;
  expect(res.status, c.name).toBe(e.status);
  expect(calls() > before, `${c.name}: the app called`).toBe(e.app);
  const got = read(text);
  if (e.events !== undefined) expect(got.types, c.name).toEqual(e.events);
  if (e.ids === true) for (const b of got.blocks) expect(b, c.name).toMatch(/^id: [A-Za-z0-9_-]+\.\d+\.[A-Za-z0-9_-]+\n/);
  for (const [name, value] of Object.entries(e.headers ?? {})) expect(res.headers.get(name), `${c.name}: ${name}`).toBe(value);
  for (const name of e.absent ?? []) expect(res.headers.get(name), `${c.name}: ${name}`).toBeNull();
  if (e.body !== undefined) expect(text, c.name).toBe(e.body === "$gone" ? EDGE_TABLE.gone.body : e.body);
  if (e.body === "$gone") for (const [name, value] of Object.entries(EDGE_TABLE.gone.headers)) expect(res.headers.get(name), `${c.name}: ${name}`).toBe(value);
}
