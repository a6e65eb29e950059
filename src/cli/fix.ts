import { formatFinding, formatSummary } from "../stream/format.js";
import { StreamFixer } from "../stream/fixer.js";
import { guardedRead, input, streamArgs, writer } from "./check.js";

/**
 * `agui-state fix [FILE|-] [--state FILE] [--report]`: writes the stream to
 * stdout with every delta made to apply (stream/fixer.ts), each event as soon
 * as its input is complete. `--report` writes check's findings to stderr.
 * Exit 0, or 1 when an event the client refuses could not be mended and went
 * out as it came (a lifecycle break, an event the schema refuses that is not
 * a delta, an unknown event type); 2 for a usage error or unreadable input.
 */
export function fixCommand(argv: string[]): Promise<number> {
  return guardedRead("fix", async () => {
    const { file, state, flag: report } = streamArgs("fix", argv, "report");
    const err = writer(process.stderr);
    const fixer = new StreamFixer({ state, ...(report ? { onFinding: (f) => void err(formatFinding(f) + "\n") } : {}) });
    const out = writer(process.stdout);
    for await (const chunk of input(file)) {
      // The reader went away (EPIPE): there is no one left to write to.
      if (!(await out(fixer.push(chunk)))) return 0;
    }
    await out(fixer.end());
    if (report) await err(formatSummary(fixer.summary) + "\n");
    return fixer.unfixed > 0 ? 1 : 0;
  });
}
