import { readFileSync } from "node:fs";
import pkg from "../../package.json" with { type: "json" };
import { EXIT } from "./exit.js";
import { help, isHelpTopic, usageLine } from "./help.js";
import { diffCommand, escapeCommand, normalizeCommand, parseCommand, type Io } from "./oneshot.js";
import { HelpWanted, parseFlags, parseServeArgs, UsageError } from "./options.js";
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

/**
 * A usage error is one line on stderr, the problem then the command's usage
 * line, and exit 2; `--help` among the flags prints the command's help.
 */
const usageFailed =
  (command: string | undefined) =>
  (e: unknown): void => {
    if (e instanceof HelpWanted) return void process.stdout.write(help(command));
    if (!(e instanceof UsageError)) {
      process.stderr.write(internalError(command, e));
      process.exitCode = EXIT.internal;
      return;
    }
    process.stderr.write(`agui-state: ${e.message}; usage: ${usageLine(command)}\n`);
    process.exitCode = EXIT.refused;
  };

/**
 * What stderr says of anything a command throws but a usage error: a bug of
 * ours, never the input's (that is a value with a code, exit 1 or 2), so it
 * says so, with the stack to report, and exits 70 (exit.ts) rather than
 * Node's 1 for an uncaught error, which would read as "the input had problems".
 */
export function internalError(command: string | undefined, e: unknown): string {
  const what = e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e);
  return `agui-state${command === undefined ? "" : ` ${command}`}: internal error (a bug in agui-state, not a problem with the input; please report it with what follows): ${what}\n`;
}

/** The command an argv runs: serve when it starts with a flag or is empty, undefined for an unknown one. */
function commandOf(first: string | undefined): string | undefined {
  if (first === undefined || first === "serve" || (first.startsWith("-") && first !== "--version" && first !== "-v")) return "serve";
  return isHelpTopic(first) || first === "help" ? first : undefined;
}

/**
 * The command line: `agui-state [serve] [flags]` runs the sidecar; the other
 * subcommands are one-shot tools for shell pipelines. Every command follows
 * one table of exit statuses (exit.ts): a usage error or input it cannot
 * take exits 2 with one line on stderr.
 */
export function runCli(argv: string[]): void {
  const [first, ...rest] = argv;
  const failed = usageFailed(commandOf(first));
  try {
    run(first, rest, argv, failed);
  } catch (e) {
    failed(e);
  }
}

/** Runs one command line; a UsageError or HelpWanted thrown here, or passed to `failed`, is reported by runCli. */
function run(first: string | undefined, rest: string[], argv: string[], failed: (e: unknown) => void): void {
  if (first === "--version" || first === "-v") {
    parseFlags(first, rest, {}, false);
    return void process.stdout.write(`${pkg.version}\n`);
  }
  if (first === "help") {
    const { positionals } = parseFlags("help", rest, {});
    const topic = positionals[0];
    if (positionals.length > 1) throw new UsageError("help takes at most one COMMAND");
    if (topic !== undefined && !isHelpTopic(topic)) throw new UsageError(`help: no command ${JSON.stringify(topic)}; see agui-state --help`);
    return void process.stdout.write(help(topic));
  }
  if (wantsHelp(argv)) return void process.stdout.write(help());
  const stream = first !== undefined ? STREAM[first] : undefined;
  if (stream) {
    if (wantsHelp(rest)) return void process.stdout.write(help(first));
    void stream()
      .then((command) => command(rest))
      .then((code) => void (process.exitCode = code), failed);
    return;
  }
  if (first === "proxy") {
    if (wantsHelp(rest)) return void process.stdout.write(help(first));
    // proxyCommand manages the process's lifetime and exit code itself.
    void import("./proxy.js").then(({ proxyCommand }) => proxyCommand(rest)).catch(failed);
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
  // A bug of ours in serving is said as one, with exit 70, and at once: the
  // server may already be reading stdin, which would keep the process waiting.
  void serveCommand(options).catch((e: unknown) => {
    failed(e);
    process.exit();
  });
}
