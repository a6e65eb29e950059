import { writeFileSync } from "node:fs";
import { StreamChecker } from "../stream/checker.js";
import { formatFindings, formatSummary } from "../stream/format.js";
import { CI_OPTIONS, ciOutputs } from "./ci-outputs.js";
import { UsageError } from "./options.js";
import { ownedPaths } from "./repair-flags.js";
import { guardedRead, input, streamArgs, Unreadable, writer } from "./stream-command.js";

/**
 * `agui-state check [FILE|-] [--state FILE] [--own POINTER]... [--json]`: replays an AG-UI event
 * stream as @ag-ui/client 1.0.0 would and reports every event it would not
 * apply (protocol/README.md §13). Exit 0: it applies everything; 1: something
 * is dropped, ignored or fatal; 2: a usage error or unreadable input.
 *
 * What check shares with fix (its arguments, the stream, a `--state`) is in
 * stream-command.ts.
 */
export function checkCommand(argv: string[]): Promise<number> {
  return guardedRead("check", async () => {
    const { file, state, flag: json, values } = streamArgs("check", argv, "json", { html: { type: "string" }, own: { type: "string", multiple: true }, ...CI_OPTIONS });
    const own = ownedPaths(values);
    const htmlFile = values["html"] as string | undefined;
    if (htmlFile === "") throw new UsageError("check: --html needs a FILE to write");
    const ci = ciOutputs(values);
    const report = htmlFile === undefined ? undefined : await import("../inspect/report.js").then((m) => new m.Report(file === "-" ? "(stdin)" : file, state ?? {}));
    const checker = new StreamChecker(state, report?.stream.observe, own);
    const out = writer(process.stdout);
    const emit = async (findings: ReturnType<StreamChecker["push"]>): Promise<boolean> => {
      ci?.add(findings);
      if (!json) return out(formatFindings(findings));
      let text = "";
      for (const f of findings) text += JSON.stringify(f) + "\n";
      return out(text);
    };
    for await (const chunk of input(file)) {
      report?.read(chunk);
      if (!(await emit(checker.push(chunk)))) return 1;
    }
    await emit(checker.end());
    const s = checker.summary;
    await out(json ? JSON.stringify({ summary: s }) + "\n" : formatSummary(s, checker.model.stopped?.event) + "\n");
    if (report && htmlFile !== undefined) {
      report.stream.close(checker.model.stopped === undefined);
      try {
        writeFileSync(htmlFile, report.html());
      } catch (e) {
        throw new Unreadable(`cannot write --html ${htmlFile}: ${(e as Error).message}`);
      }
    }
    const status = s.dropped + s.ignored + s.fatal + s.wiped > 0 ? 1 : 0;
    ci?.write(file, s, status);
    return status;
  });
}
