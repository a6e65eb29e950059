import { formatFindings, formatSummary } from "../stream/format.js";
import { StreamFixer, type Reported } from "../stream/fixer.js";
import { guardedRead, input, streamArgs, writer } from "./stream-command.js";
import { REPAIR_OPTIONS, repairPolicy } from "./repair-flags.js";

/**
 * `agui-state fix [FILE|-] [--state FILE] [--report] [--own POINTER]...
 * [--snapshots pass|delta] [--join-keys]`: writes the stream to stdout with
 * every delta made to apply (stream/fixer.ts), each event as soon as its
 * input is complete, and snapshots as the repair flags say (repair-flags.ts).
 * `--report` writes the findings to stderr, each with what fix did.
 * Exit 0, or 1 when an event the client refuses could not be mended and went
 * out as it came (a lifecycle break, an event the schema refuses that is not
 * a delta, an unknown event type); 2 for a usage error, or input that cannot
 * be read or is malformed (exit.ts).
 */
export function fixCommand(argv: string[]): Promise<number> {
  return guardedRead("fix", async () => {
    const { file, state, flag: report, values } = streamArgs("fix", argv, "report", REPAIR_OPTIONS);
    const policy = repairPolicy(values, process.env);
    const err = writer(process.stderr);
    // The findings of each chunk's events, written once the chunk is done: an event's come out together.
    let found: Reported[] = [];
    const fixer = new StreamFixer({ ...(state ? { state } : {}), policy, ...(report ? { onFinding: (f) => void found.push(f) } : {}) });
    const reported = async (): Promise<void> => {
      if (found.length === 0) return;
      const text = formatFindings(found, "fix");
      found = [];
      await err(text);
    };
    const out = writer(process.stdout);
    for await (const chunk of input(file)) {
      const text = fixer.push(chunk);
      await reported();
      // The reader went away (EPIPE): there is no one left to write to.
      if (!(await out(text))) return 0;
    }
    const text = fixer.end();
    await reported();
    await out(text);
    if (report) await err(formatSummary(fixer.summary, undefined, fixer.outcomes) + "\n");
    return fixer.unfixed > 0 ? 1 : 0;
  });
}
