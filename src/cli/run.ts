import { readFileSync } from "node:fs";
import pkg from "../../package.json" with { type: "json" };
import { EXIT } from "./exit.js";
import { help, isHelpTopic } from "./help.js";
import { diffCommand, escapeCommand, normalizeCommand, parseCommand, type Io } from "./oneshot.js";
import { parseServeArgs, UsageError } from "./options.js";
import { serveCommand } from "./serve.js";

const io: Io = {
  readStdin: () => readFileSync(0, "utf8"),
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

const ONESHOT: Record<string, (argv: string[], io: Io) => number> = {
  normalize: normalizeCommand,
  diff: diffCommand,
  escape: escapeCommand,
  parse: parseCommand,
};

/**
 * Commands loaded on demand: esbuild keeps a dynamic import's module lazy in
 * the bundle (wrapped, run only when imported), so the sidecar's start never
 * runs @ag-ui/core's schemas, zod or fast-json-patch, which only the stream
 * commands use.
 */
const STREAM: Record<string, () => Promise<(argv: string[]) => Promise<number>>> = {
  check: async () => (await import("./check.js")).checkCommand,
  fix: async () => (await import("./fix.js")).fixCommand,
};

const wantsHelp = (argv: string[]) => argv[0] === "--help" || argv[0] === "-h";

const usageFailed = (e: unknown): void => {
  if (!(e instanceof UsageError)) throw e;
  process.stderr.write(`agui-state: ${e.message}\n`);
  process.exitCode = EXIT.refused;
};

function guarded(fn: () => void): void {
  try {
    fn();
  } catch (e) {
    usageFailed(e);
  }
}

/**
 * The command line: `agui-state [serve] [flags]` runs the sidecar; the other
 * subcommands are one-shot tools for shell pipelines. Every command follows
 * one table of exit statuses (exit.ts): a usage error or input it cannot
 * take exits 2 with one line on stderr.
 */
export function runCli(argv: string[]): void {
  const [first, ...rest] = argv;
  guarded(() => {
    if (first === "--version" || first === "-v") return void process.stdout.write(`${pkg.version}\n`);
    if (first === "help" && rest[0] !== undefined && !isHelpTopic(rest[0])) throw new UsageError(`help: no command ${JSON.stringify(rest[0])}; see agui-state --help`);
    if (first === "help" || wantsHelp(argv)) return void process.stdout.write(help(rest[0]));
    const stream = first !== undefined ? STREAM[first] : undefined;
    if (stream) {
      if (wantsHelp(rest)) return void process.stdout.write(help(first));
      void stream()
        .then((command) => command(rest))
        .then((code) => void (process.exitCode = code), usageFailed);
      return;
    }
    if (first === "proxy") {
      if (wantsHelp(rest)) return void process.stdout.write(help(first));
      // proxyCommand manages the process's lifetime and exit code itself.
      void import("./proxy.js").then(({ proxyCommand }) => proxyCommand(rest)).catch(usageFailed);
      return;
    }
    const oneshot = first !== undefined ? ONESHOT[first] : undefined;
    if (oneshot) {
      if (wantsHelp(rest)) return void process.stdout.write(help(first));
      process.exitCode = oneshot(rest, io);
      return;
    }
    const serveArgs = first === "serve" ? rest : argv;
    if (wantsHelp(serveArgs)) return void process.stdout.write(help("serve"));
    if (first !== undefined && first !== "serve" && !first.startsWith("-")) throw new UsageError(`unknown command ${JSON.stringify(first)}; see agui-state --help`);
    const options = parseServeArgs(serveArgs, process.env);
    if (process.stdin.isTTY) {
      process.stderr.write(`agui-state ${pkg.version}: reading JSON-RPC 2.0 from stdin, one message per line. Try:\n  {"jsonrpc":"2.0","id":1,"method":"escapePointer","params":{"path":["toolState","raster-ops/dataset"]}}\n(Ctrl-D to end; agui-state --help for more)\n`);
    }
    void serveCommand(options);
  });
}
