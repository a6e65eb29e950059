import { writeFileSync } from "node:fs";
import type { Summary } from "../stream/client.js";
import type { Finding } from "../stream/findings.js";
import { junitXml } from "./junit.js";
import { UsageError } from "./options.js";
import { sarifLog } from "./sarif.js";
import { Unreadable } from "./stream-command.js";

/** `check --sarif FILE` and `--junit FILE`'s flags. */
export const CI_OPTIONS = { sarif: { type: "string" }, junit: { type: "string" } } as const;

/**
 * The reports `check` writes for CI beside its normal output (protocol/README.md
 * §13): the findings are gathered as they go to stdout, and the files are
 * written at the end, even when there are none. They change neither stdout
 * nor the exit status; a file that cannot be written exits 2, as --html's.
 */
export function ciOutputs(values: Record<string, unknown>): { add(findings: readonly Finding[]): void; write(file: string, summary: Summary, exitCode: number): void } | undefined {
  const sarif = values["sarif"] as string | undefined;
  const junit = values["junit"] as string | undefined;
  for (const [flag, target] of [["--sarif", sarif], ["--junit", junit]] as const) if (target === "") throw new UsageError(`check: ${flag} needs a FILE to write`);
  if (sarif === undefined && junit === undefined) return undefined;
  const all: Finding[] = [];
  const put = (flag: string, target: string, text: () => string): void => {
    try {
      writeFileSync(target, text());
    } catch (e) {
      throw new Unreadable(`cannot write ${flag} ${target}: ${(e as Error).message}`);
    }
  };
  return {
    add: (findings) => void all.push(...findings),
    write: (file, summary, exitCode) => {
      if (sarif !== undefined) put("--sarif", sarif, () => JSON.stringify(sarifLog(file, all, exitCode), null, 2) + "\n");
      if (junit !== undefined) put("--junit", junit, () => junitXml(file, all, summary));
    },
  };
}
