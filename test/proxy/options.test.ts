import { describe, expect, it } from "vitest";
import { parseListen, parseProxyArgs, PROXY_HELP } from "../../src/cli/proxy.js";
import { UsageError } from "../../src/cli/options.js";
import { spawnProxy } from "./proxy-process.js";

/** `agui-state proxy`'s flags: what they accept, and the usage errors the CLI turns into exit 2. */

describe("agui-state proxy flags", () => {
  it("defaults --listen to 127.0.0.1:8787, --grace to 10 s and the log level to info", () => {
    const o = parseProxyArgs(["--upstream", "http://127.0.0.1:8000/base"], {});
    expect(o).toMatchObject({ host: "127.0.0.1", port: 8787, graceMs: 10_000, logLevel: "info" });
    expect(o.upstream.href).toBe("http://127.0.0.1:8000/base");
  });

  it("reads HOST:PORT, a bracketed IPv6 host, and port 0", () => {
    expect(parseListen("0.0.0.0:0")).toEqual({ host: "0.0.0.0", port: 0 });
    expect(parseListen("[::1]:8787")).toEqual({ host: "::1", port: 8787 });
    expect(parseListen("localhost:65535")).toEqual({ host: "localhost", port: 65535 });
  });

  it.each([
    [[], /--upstream URL is required/],
    [["--upstream", "not a url"], /--upstream: not a URL/],
    [["--upstream", "ftp://example.com"], /expected an http or https URL/],
    [["--upstream", "http://h/?q=1"], /no query or fragment/],
    [["--upstream", "http://h", "--listen", "8787"], /--listen: expected HOST:PORT/],
    [["--upstream", "http://h", "--listen", "h:65536"], /--listen: expected HOST:PORT/],
    [["--upstream", "http://h", "--grace", "soon"], /--grace/],
    [["--upstream", "http://h", "--log-level", "loud"], /--log-level/],
    [["--upstream", "http://h", "--bogus"], /bogus/],
    [["--upstream", "http://h", "--own", "toolState"], /--own: expected a JSON Pointer/],
    [["--upstream", "http://h", "--own", ""], /--own: expected a JSON Pointer/],
    [["--upstream", "http://h", "--snapshots", "all"], /--snapshots: expected pass or delta/],
  ])("refuses %j with a UsageError", (argv, message) => {
    expect(() => parseProxyArgs(argv, {})).toThrow(UsageError);
    expect(() => parseProxyArgs(argv, {})).toThrow(message);
  });

  it("takes the log level from AGUI_STATE_LOG_LEVEL unless --log-level is given", () => {
    expect(parseProxyArgs(["--upstream", "http://h"], { AGUI_STATE_LOG_LEVEL: "debug" }).logLevel).toBe("debug");
    expect(parseProxyArgs(["--upstream", "http://h", "--log-level", "warn"], { AGUI_STATE_LOG_LEVEL: "debug" }).logLevel).toBe("warn");
  });

  it("documents every flag in its help", () => {
    for (const flag of ["--upstream", "--listen", "--grace", "--log-level", "--own", "--snapshots", "--join-keys"]) expect(PROXY_HELP).toContain(flag);
  });

  it("reads the repair policy: --own repeatable and parsed once, --snapshots, --join-keys, --lifecycle; none of them by default (issues 23, 40)", () => {
    expect(parseProxyArgs(["--upstream", "http://h"], {}).policy).toEqual({ own: [], snapshots: "pass", joinKeys: false, lifecycle: "pass" });
    expect(parseProxyArgs(["--upstream", "http://h", "--own", "/toolState", "--own", "/a~1b/c", "--snapshots", "delta", "--join-keys", "--lifecycle", "repair"], {}).policy).toEqual({ own: [["toolState"], ["a/b", "c"]], snapshots: "delta", joinKeys: true, lifecycle: "repair" });
    expect(parseProxyArgs(["--upstream", "http://h"], { AGUI_STATE_LIFECYCLE: "repair" }).policy.lifecycle).toBe("repair");
    expect(parseProxyArgs(["--upstream", "http://h", "--lifecycle", "pass"], { AGUI_STATE_LIFECYCLE: "repair" }).policy.lifecycle).toBe("pass");
    expect(() => parseProxyArgs(["--upstream", "http://h", "--lifecycle", "fix"], {})).toThrow('--lifecycle: expected repair or pass, got "fix"');
  });

  it("makes the binary exit 2 with one line on stderr, and print nothing, when --upstream is missing", async () => {
    const child = spawnProxy(["--listen", "127.0.0.1:0"]);
    expect((await child.waitForExit()).code).toBe(2);
    expect(child.stdout.length).toBe(0);
    expect(child.stderr).toBe("agui-state: proxy: --upstream URL is required; see agui-state proxy --help; usage: agui-state proxy --upstream URL [--listen HOST:PORT] [flags]\n");
  });
});
