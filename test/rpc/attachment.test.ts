import { describe, expect, it } from "vitest";
import type { Frame } from "../../src/rpc/common/frame.js";
import { AutoDecoder, LspDecoder, type FrameDecoder } from "../../src/rpc/node/framing.js";
import { startPeer } from "../../scripts/harness/peer.js";
import { SEA, run } from "../../scripts/harness/process.js";

/**
 * protocol/README.md §2, attachments (issue 41: a 1 MB-state run cost the sidecar twice the CPU of
 * `fix` on the same bytes, in the JSON-RPC envelope around its texts): an LSP frame's
 * `Agui-Text-Length: M` carries M bytes after the body, fixStream's text or openStream's request
 * body as itself. Decoded, and through the real binary.
 */

function decode(decoder: FrameDecoder, bytes: Buffer, chunk = bytes.length): Frame[] {
  const out: Frame[] = [];
  for (let i = 0; i < bytes.length; i += chunk) decoder.push(bytes.subarray(i, i + chunk), (f) => out.push(f));
  return out;
}

/** LSP frames read back from bytes: each body and, where `Agui-Text-Length` says, its attachment. */
function frames(out: Buffer): { json: unknown; attachment?: string }[] {
  const got: { json: unknown; attachment?: string }[] = [];
  let at = 0;
  while (at < out.length) {
    const end = out.indexOf("\r\n\r\n", at);
    const head = out.toString("latin1", at, end);
    const length = Number(/Content-Length: (\d+)/i.exec(head)?.[1]);
    const attached = /Agui-Text-Length: (\d+)/i.exec(head)?.[1];
    const body = end + 4;
    const json: unknown = JSON.parse(out.toString("utf8", body, body + length));
    at = body + length + Number(attached ?? 0);
    got.push(attached === undefined ? { json } : { json, attachment: out.toString("utf8", body + length, at) });
  }
  return got;
}

/** An LSP frame with an attachment. */
function attached(body: string, attachment: Buffer | string, extra = ""): Buffer {
  const a = typeof attachment === "string" ? Buffer.from(attachment, "utf8") : attachment;
  return Buffer.concat([Buffer.from(`Content-Length: ${Buffer.byteLength(body)}\r\n${extra}Agui-Text-Length: ${a.length}\r\n\r\n`, "latin1"), Buffer.from(body, "utf8"), a]);
}

const lsp = (body: string): Buffer => Buffer.from(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, "utf8");
const rpc = (id: number, method: string, params: unknown): string => JSON.stringify({ jsonrpc: "2.0", id, method, params });

describe("the decoder", () => {
  it("splits a frame into its body and its attachment, at every chunk size, with multi-byte text on both sides", () => {
    const input = Buffer.concat([attached('{"a":"é"}', "data: ü\n\n"), lsp('{"b":1}'), attached("{}", "")]);
    for (const chunk of [1, 2, 3, 7, 1000]) {
      for (const d of [new LspDecoder(1000), new AutoDecoder(1000)]) {
        expect(decode(d, input, chunk), `chunk ${chunk}`).toEqual([
          { kind: "text", text: '{"a":"é"}', attachment: "data: ü\n\n" },
          { kind: "text", text: '{"b":1}' },
          { kind: "text", text: "{}", attachment: "" },
        ]);
      }
    }
  });

  it("reports an attachment that is not UTF-8, a bad length, and a frame past the limit with its attachment, and goes on", () => {
    expect(decode(new LspDecoder(1000), Buffer.concat([attached("{}", Buffer.from([0x22, 0xff])), lsp("[1]")]))).toEqual([{ kind: "bad-utf8" }, { kind: "text", text: "[1]" }]);
    const bad = Buffer.from("Content-Length: 2\r\nAgui-Text-Length: x9\r\n\r\n{}Content-Length: 3\r\n\r\n[2]", "latin1");
    expect(decode(new LspDecoder(1000), bad)).toEqual([{ kind: "bad-header", detail: 'bad Agui-Text-Length "x9"' }, { kind: "text", text: "[2]" }]);
    const frames = decode(new LspDecoder(100), Buffer.concat([attached('{"jsonrpc":"2.0","id":3}', "x".repeat(90)), lsp("[3]")]), 16);
    expect(frames[0]).toMatchObject({ kind: "oversized", bytes: 24 + 90 });
    expect(frames[1]).toEqual({ kind: "text", text: "[3]" });
  });
});

describe("through the binary", () => {
  // A text with what JSON must escape (quotes, backslashes, control characters, non-ASCII, astral).
  const events = Array.from({ length: 3000 }, (_, i) => `data: {"type":"STATE_DELTA","delta":[{"op":"add","path":"/k${i}","value":"é\\"\\\\\\u0001😀 ${i}"}]}\n\n`).join("");
  const stream = `data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n${events}data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n`;

  it("fixStream's text as an attachment answers exactly as the same text in the JSON", async () => {
    const s = startPeer({ framing: "lsp" });
    const open = async (id: number): Promise<string> => ((await s.callRaw(id, lsp(rpc(id, "openStream", { framing: "sse" })))) as { result: { streamId: string } }).result.streamId;
    const [a, b] = [await open(1), await open(2)];
    const inJson = await s.callRaw(3, lsp(rpc(3, "fixStream", { streamId: a, text: stream })));
    const asAttachment = await s.callRaw(4, attached(rpc(4, "fixStream", { streamId: b }), stream));
    expect(Buffer.byteLength(stream)).toBeGreaterThan(200_000);
    expect({ ...asAttachment, id: 3 }).toEqual(inJson);
    expect((inJson as { result: { text: string } }).result.text).toBe(stream);
    s.end();
    expect((await s.waitForExit()).code).toBe(0);
  });

  it("with Agui-Reply-Text: attachment, fixStream's and closeStream's text come back as the reply's attachment, and nothing else changes", async () => {
    const open = (id: number) => lsp(rpc(id, "openStream", { framing: "sse" }));
    const input = Buffer.concat([
      open(1),
      attached(rpc(2, "fixStream", { streamId: "s1" }), stream, "Agui-Reply-Text: attachment\r\n"),
      Buffer.from(`Content-Length: ${rpc(3, "closeStream", { streamId: "s1" }).length}\r\nAgui-Reply-Text: attachment\r\n\r\n${rpc(3, "closeStream", { streamId: "s1" })}`),
      open(4),
      lsp(rpc(5, "fixStream", { streamId: "s2", text: stream })),
      Buffer.from(`Content-Length: 2\r\nAgui-Reply-Text: json\r\n\r\n{}`),
    ]);
    const r = await run(SEA, [], input);
    expect(r.code, r.stderr).toBe(0);
    const [, fixed, closed, , plain, bad] = frames(r.stdout);
    expect(fixed?.attachment).toBe(stream);
    expect(fixed?.json).toEqual({ ...(plain?.json as { result: object }), id: 2, result: { ...(plain?.json as { result: { text: string } }).result, text: undefined } });
    expect((fixed?.json as { result: object }).result).not.toHaveProperty("text");
    expect(closed).toMatchObject({ json: { id: 3, result: { summary: { events: 3002 } } }, attachment: "" });
    expect(bad?.json).toMatchObject({ id: null, error: { code: -32600, message: expect.stringContaining("Agui-Reply-Text") as string } });
  });

  it("openStream's request body as an attachment is the baseline", async () => {
    const s = startPeer({ framing: "lsp" });
    const body = JSON.stringify({ threadId: "t", runId: "r", state: { ui: "ü".repeat(100_000), n: 1 }, messages: [] });
    const request = { method: "POST", path: "/agent", headers: [["content-type", "application/json"]] };
    const response = { status: 200, headers: [["content-type", "text/event-stream"]] };
    const opened = (await s.callRaw(1, attached(rpc(1, "openStream", { request, response, own: ["/n"], resume: false }), body))) as { result: { streamId: string; baseline?: unknown } };
    expect(opened.result.baseline).toBeUndefined();
    const fixed = (await s.callRaw(2, lsp(rpc(2, "fixStream", { streamId: opened.result.streamId, text: 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\ndata: {"type":"STATE_SNAPSHOT","snapshot":{"n":2}}\n\n' })))) as { result: { text: string; findings: { pointer?: string }[] } };
    // A diff against the baseline (issue 41): the client's `ui` stands, `n` is replaced.
    expect(fixed.result.text).toContain('{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2}]}');
    expect(fixed.result.findings.map((f) => f.pointer)).toEqual(["/ui"]);
    s.end();
    expect((await s.waitForExit()).code).toBe(0);
  });

  it("refuses an attachment where it has no place, with a stable code, and serves on", async () => {
    const s = startPeer({ framing: "lsp" });
    const err = async (id: number, bytes: Buffer): Promise<unknown> => ((await s.callRaw(id, bytes)) as { error: unknown }).error;
    expect(await err(1, attached(rpc(1, "escapePointer", { path: ["a"] }), "x"))).toMatchObject({ code: -32602, data: { reason: "UNKNOWN_PARAM", field: "" } });
    expect(await err(2, attached(rpc(2, "fixStream", { streamId: "s9", text: "y" }), "x"))).toMatchObject({ code: -32602, data: { reason: "CONFLICTING_PARAMS", field: "/text" } });
    expect(await err(3, attached(rpc(3, "openStream", { response: { status: 200, headers: [] } }), "{}"))).toMatchObject({ code: -32602, data: { reason: "MISSING", field: "/request" } });
    await s.write(attached(`[${rpc(4, "escapePointer", { path: ["a"] })}]`, "x"));
    await s.until(() => s.orphans.length === 1, "the batch's -32600");
    expect(s.orphans[0]).toMatchObject({ id: null, error: { code: -32600 } });
    await s.write(attached(rpc(5, "fixStream", { streamId: "s1" }), Buffer.from([0xc3, 0x28])));
    await s.until(() => s.orphans.length === 2, "the -32700");
    expect(s.orphans[1]).toMatchObject({ id: null, error: { code: -32700 } });
    expect(await s.callRaw(6, lsp(rpc(6, "escapePointer", { path: ["a/b"] })))).toMatchObject({ result: { pointer: "/a~1b" } });
    s.end();
    expect((await s.waitForExit()).code).toBe(0);
  });
});
