/**
 * What vscode-jsonrpc's MessageConnection costs per request, next to the
 * hand-written dispatcher, both over in-memory streams in one process with the
 * same handler (escapePointer). Alternates A, B, A, B and reports medians.
 *   npx tsx bench/connection-overhead.ts
 */
import { PassThrough } from "node:stream";
import pino from "pino";
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";
import { startServer as serve } from "../src/rpc/node/server.js";
import { StateService } from "../src/service/state-service.js";
import { StreamService } from "../src/service/stream-service.js";
import { LOADED_PIPELINE } from "../scripts/harness/paired.js";

const N = 20_000;
const ROUNDS = 5;
const frame = (body: string) => `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const requests = Array.from({ length: N }, (_, i) => frame(JSON.stringify({ jsonrpc: "2.0", id: i, method: "escapePointer", params: { path: ["a/b", String(i)] } })));

/** Pipes N requests through and resolves when N responses have come out; returns CPU µs per request. */
function run(setup: (input: PassThrough, output: PassThrough) => void): Promise<number> {
  const input = new PassThrough();
  const output = new PassThrough();
  setup(input, output);
  return new Promise((resolve) => {
    let seen = 0;
    const cpu = process.cpuUsage();
    output.on("data", (c: Buffer) => {
      seen += c.toString("latin1").split("Content-Length").length - 1;
      if (seen >= N) {
        const used = process.cpuUsage(cpu);
        resolve((used.user + used.system) / N);
      }
    });
    for (const r of requests) input.write(r);
  });
}

const service = new StateService();
const connection = (input: PassThrough, output: PassThrough) => {
  const conn = createMessageConnection(new StreamMessageReader(input), new StreamMessageWriter(output));
  conn.onRequest("escapePointer", (params: { path: string[] }) => {
    const out = service.escapePointer(params);
    return out.ok ? out.value : { pointer: "" };
  });
  conn.listen();
};
const ours = (input: PassThrough, output: PassThrough) => {
  serve({ input, output, framing: "lsp", service, streams: new StreamService({ limits: service.limits, pipeline: LOADED_PIPELINE }), log: pino({ level: "silent" }) });
};

const a: number[] = [];
const b: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  a.push(await run(connection));
  b.push(await run(ours));
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;
console.log(`MessageConnection: ${median(a).toFixed(1)} µs CPU/request (min ${Math.min(...a).toFixed(1)}, max ${Math.max(...a).toFixed(1)})`);
console.log(`hand dispatch:     ${median(b).toFixed(1)} µs CPU/request (min ${Math.min(...b).toFixed(1)}, max ${Math.max(...b).toFixed(1)})`);
console.log(`ratio: ${(median(a) / median(b)).toFixed(2)}x`);
