import { describe, expect, it } from "vitest";
import { encode, lsp, ndjson, parseFrames, parseNdjson } from "../../scripts/harness/frames.js";
import { request, responses, resultOf } from "../../scripts/harness/jsonrpc.js";
import { COMMANDS, logged, logSoFar, parseLog, run, start, type Command } from "../../scripts/harness/process.js";
import { escape, escaped, exchanger, FRAMINGS } from "./wire.js";
/** Shutdown (protocol/README.md §2): the end of stdin, SIGTERM and SIGINT, and a parent that closes or stops reading the pipes. */

describe.each(COMMANDS)("$name", { timeout: 20_000 }, (cmd: Command) => {
  const exchange = exchanger(cmd);

  describe("shutdown (protocol/README.md §2)", () => {
    it("exits 0 with nothing on stdout when stdin ends before any input", async () => {
      const r = await run(cmd, [], "");
      expect(r).toMatchObject({ code: 0, signal: null });
      expect(r.stdout.length).toBe(0);
    });

    it("answers all 50 requests written in one chunk when stdin ends right after them, then exits 0", async () => {
      const ids = Array.from({ length: 50 }, (_, i) => i + 1);
      const r = await run(cmd, [], ndjson(...ids.map((i) => escape(i, `k${i}`))));
      expect(r.code, r.stderr).toBe(0);
      const got = responses(parseNdjson(r.stdout));
      expect(got.map((x) => x.id).sort((a, b) => Number(a) - Number(b))).toEqual(ids);
      for (const x of got) expect(x).toEqual(escaped(x.id, `k${String(x.id)}`));
    });

    it("answers all 50 large replies when stdin ends at once and the parent reads stdout late, deciding to exit only once they are read", async () => {
      // 50 x ~64 KB of OpenRPC document: far past what the pipe and this side's
      // paused stream hold, so the process must wait for the parent to drain stdout.
      const s = start(cmd, ["--log-level", "debug"]);
      s.child.stdout.pause();
      s.end(ndjson(...Array.from({ length: 50 }, (_, i) => request(i + 1, "rpc.discover"))));
      // Every request handled, and its reply queued inside the process: nothing can let it finish but a read.
      await s.until(() => logged(s.stderr, "request") === 50, "the debug record of every request");
      expect(logged(s.stderr, "exiting")).toBe(0);
      const unread = s.stderr.length;
      s.child.stdout.resume();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      // It decided to exit after the parent read the replies, and because its input had ended.
      expect(logSoFar(s.stderr.slice(unread)).filter((r) => r.msg === "exiting")).toEqual([expect.objectContaining({ why: "end", requests: 50 })]);
      const got = responses(parseNdjson(s.stdout));
      expect(got.map((x) => x.id)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
      for (const x of got) expect(resultOf(x)).toMatchObject({ openrpc: expect.any(String) });
    });

    it.each(FRAMINGS)("on SIGTERM with %s requests in flight, exits 0 on a frame boundary with no id answered twice", async (framing) => {
      const n = 3000;
      const s = start(cmd);
      await s.write(encode(framing, ...Array.from({ length: n }, (_, i) => escape(i + 1, `k${i + 1}`))));
      await s.until(() => s.stdout.length > 0, "a first reply");
      s.child.kill("SIGTERM");
      // More input after the signal must not matter.
      void s.write(encode(framing, escape(n + 1, "late")));
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      const got = responses(parseFrames(framing, s.stdout));
      expect(got.length).toBeGreaterThan(0);
      const seen = new Set<unknown>();
      for (const x of got) {
        expect(seen.has(x.id), `id ${String(x.id)} answered twice`).toBe(false);
        seen.add(x.id);
        expect(x).toEqual(escaped(x.id, x.id === n + 1 ? "late" : `k${String(x.id)}`));
      }
    });

    it.each(["SIGTERM", "SIGINT"] as const)("on %s while idle (stdin open, nothing sent), exits 0 with stdin still open", async (signal) => {
      const s = start(cmd);
      // Wait until it is serving: an answered request proves the handlers are installed.
      await s.write(ndjson(escape(1, "a")));
      await s.until(() => s.stdout.length > 0, "a reply");
      s.child.kill(signal);
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      expect(s.child.stdin.writableEnded).toBe(false);
      expect(parseNdjson(s.stdout)).toEqual([escaped(1, "a")]);
    });

    it("on SIGTERM before any input at all, exits 0 with stdin still open", async () => {
      const s = start(cmd, ["--log-level", "debug"]);
      // Nothing on the wire says "ready" before any input. The "serving" debug
      // line is logged once the signal handlers are installed (src/cli/serve.ts), so it is the cue.
      await s.until(() => logged(s.stderr, "serving") === 1, "the serving log line");
      s.child.kill("SIGTERM");
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      expect(logSoFar(s.stderr).filter((r) => r.msg === "exiting")).toEqual([expect.objectContaining({ why: "stopped" })]);
      expect(s.stdout.length).toBe(0);
    });

    // Regression (reported and fixed): records once reached stderr out of order
    // at exit (the "request" record after "exiting"), when a synchronous flush
    // at exit overtook an asynchronous write still in flight. src/log-sink.ts
    // now writes in order and never synchronously. The runs are concurrent
    // because load made the reordering show in most runs.
    it("writes its log records to stderr in the order they were logged, through a SIGTERM shutdown (20 runs)", async () => {
      const runs = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const s = start(cmd, ["--log-level", "debug"]);
          await s.write(ndjson(escape(1, "a")));
          await s.until(() => s.stdout.length > 0, "a reply");
          s.child.kill("SIGTERM");
          expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
          return parseLog(s.stderr);
        }),
      );
      for (const records of runs) {
        const times = records.map((r) => Date.parse(String(r["time"])));
        expect(times.every((t) => Number.isFinite(t))).toBe(true);
        expect(times, JSON.stringify(records.map((r) => r.msg))).toEqual([...times].sort((a, b) => a - b));
      }
    });

    /** No uncaught error: no stack, no EPIPE, no error-level record, and stderr still pino JSON only. */
    const quiet = (stderr: string): void => {
      expect(stderr).not.toMatch(/EPIPE|Uncaught|\n\s+at /);
      for (const rec of parseLog(stderr)) expect(rec.level, JSON.stringify(rec)).toBeLessThan(50);
    };

    it("exits 0 quietly, without a stack trace, when the parent closes its stdout and keeps writing", async () => {
      const s = start(cmd, ["--log-level", "debug"]);
      s.child.stdout.destroy();
      for (let i = 1; i <= 100 && s.exited === undefined; i++) await s.write(ndjson(escape(i, "a")));
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      quiet(s.stderr);
      // It exited because its output closed, with its input still open.
      expect(logSoFar(s.stderr).filter((r) => r.msg === "exiting")).toEqual([expect.objectContaining({ why: "output-closed" })]);
    });

    it("exits 0 quietly when the parent closes its stdout in the middle of a large burst of replies", async () => {
      const s = start(cmd, ["--log-level", "debug"]);
      await s.write(ndjson(...Array.from({ length: 50 }, (_, i) => request(i + 1, "rpc.discover"))));
      await s.until(() => s.stdout.length > 0, "the first bytes of the replies");
      s.child.stdout.destroy();
      await s.write(ndjson(escape(51, "more")));
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      quiet(s.stderr);
      expect(logSoFar(s.stderr).filter((r) => r.msg === "exiting")).toEqual([expect.objectContaining({ why: "output-closed" })]);
    });

    it("keeps answering when the parent closes its stderr, with debug logging on", async () => {
      const s = start(cmd, ["--log-level", "debug"]);
      s.child.stderr.destroy();
      // One request at a time, each sent once the previous one is answered, so each has its log record written alone.
      for (let i = 1; i <= 20; i++) {
        await s.write(ndjson(escape(i, `k${i}`)));
        await s.until(() => s.stdout.includes(`"/k${i}"`), `reply ${i}`);
      }
      s.end();
      expect(await s.waitForExit()).toMatchObject({ code: 0, signal: null });
      expect(parseNdjson(s.stdout)).toEqual(Array.from({ length: 20 }, (_, i) => escaped(i + 1, `k${i + 1}`)));
    });

    it("on SIGTERM while the parent is not reading stdout, waits until every reply is read, then exits 0", async () => {
      const s = start(cmd, ["--log-level", "debug"]);
      s.child.stdout.pause();
      await s.write(ndjson(...Array.from({ length: 50 }, (_, i) => request(i + 1, "rpc.discover"))));
      await s.until(() => logged(s.stderr, "request") === 50, "the debug record of every request");
      s.child.kill("SIGTERM");
      // The signal was taken (it logs that it stops reading), yet with replies unread it does not exit.
      await s.until(() => logSoFar(s.stderr).some((r) => r["signal"] === "SIGTERM"), "the record of the signal");
      expect(logged(s.stderr, "exiting")).toBe(0);
      const unread = s.stderr.length;
      s.child.stdout.resume();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      expect(logSoFar(s.stderr.slice(unread)).filter((r) => r.msg === "exiting")).toEqual([expect.objectContaining({ why: "stopped", requests: 50 })]);
      expect(responses(parseNdjson(s.stdout)).map((r) => r.id)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    });

    it.each(FRAMINGS)("drops a %s message cut off at EOF without any half-written reply, and exits 0", async (framing) => {
      const s = start(cmd);
      await s.write(encode(framing, escape(1, "a")));
      await s.until(() => s.stdout.length > 0, "the first reply");
      const whole = encode(framing, escape(2, "b"));
      await s.write(whole.subarray(0, whole.length - 10));
      s.end();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      expect(parseFrames(framing, s.stdout)).toEqual([escaped(1, "a")]);
    });

    it("drops an LSP header cut off at EOF, and exits 0", async () => {
      expect(await exchange(Buffer.concat([lsp(escape(1, "a")), Buffer.from("Content-Len")]), "lsp")).toEqual([escaped(1, "a")]);
    });
  });
});
