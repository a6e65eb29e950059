import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { ROOT } from "../../scripts/harness/fixtures.js";

/**
 * The README convention (docs/contributing.md, "How the README is tested"): the
 * line right before every fenced block of README.md and docs/*.md is a marker,
 *
 *   <!-- readme: SCENARIO KIND [ARGS] -->   a block the tests run, in SCENARIO
 *   <!-- readme: ci -->                     set-up commands that .ci/run runs
 *   <!-- readme: show REASON -->            shown only, and why it cannot run
 *
 * KIND is `run` (sh, must exit 0), `serve PORT...` (sh: the lines up to the last
 * one ending in `&` start servers, the rest runs once every PORT accepts),
 * `file NAME` (written to NAME), `output` (the stdout of the `run` or `serve`
 * right before it) or `transcript` (sh, `$ ` prompts, each followed by its
 * stdout). A block without a marker is an error, so nothing runnable escapes.
 */
export const SCENARIOS = ["start", "python", "go", "clojure", "tree"] as const;
export type Scenario = (typeof SCENARIOS)[number];
export const KINDS = ["run", "serve", "file", "output", "transcript"] as const;
export type Kind = (typeof KINDS)[number];

export interface Block {
  /** The file, relative to the repository root, and the 1-based line of the opening fence. */
  file: string;
  line: number;
  lang: string;
  body: string;
  /** The marker's words after `readme:`; empty when the block has none. */
  marker: string[];
}

export interface Step {
  block: Block;
  scenario: Scenario;
  kind: Kind;
  args: string[];
}

const FENCE = /^(`{3,})(\S*)\s*$/;
const MARKER = /^<!--\s*readme:\s*(.*?)\s*-->\s*$/;

/** Every fenced block of `text`, with the marker on the line right before it. */
export function parseBlocks(file: string, text: string): Block[] {
  const lines = text.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i] as string);
    if (!open) continue;
    const fence = open[1] as string;
    let end = i + 1;
    while (end < lines.length && (lines[end] as string).trimEnd() !== fence) end++;
    if (end >= lines.length) throw new Error(`${file}:${i + 1}: a fenced block that never closes`);
    const marker = MARKER.exec(i > 0 ? (lines[i - 1] as string) : "");
    blocks.push({
      file,
      line: i + 1,
      lang: open[2] ?? "",
      body: lines.slice(i + 1, end).map((l) => l + "\n").join(""),
      marker: marker ? (marker[1] as string).split(/\s+/).filter(Boolean) : [],
    });
    i = end;
  }
  return blocks;
}

/** What is wrong with `blocks`' markers: one line per problem, none when every block is marked well. */
export function markerProblems(blocks: readonly Block[]): string[] {
  const problems: string[] = [];
  let previous: Step | undefined;
  for (const b of blocks) {
    const at = `${b.file}:${b.line}`;
    const [first, kind, ...args] = b.marker;
    if (!first) problems.push(`${at}: a \`\`\`${b.lang} block with no <!-- readme: ... --> marker before it`);
    else if (first === "show" && !kind) problems.push(`${at}: "show" needs a reason why the block cannot run`);
    else if (first === "ci" && b.lang !== "sh") problems.push(`${at}: a "ci" block must be sh`);
    else if (first !== "show" && first !== "ci") {
      if (!(SCENARIOS as readonly string[]).includes(first)) problems.push(`${at}: unknown scenario "${first}"`);
      else if (!(KINDS as readonly string[]).includes(kind ?? "")) problems.push(`${at}: unknown kind "${kind ?? ""}"`);
      else if ((kind === "run" || kind === "serve" || kind === "transcript") && b.lang !== "sh") problems.push(`${at}: a ${kind} block must be sh`);
      else if (kind === "file" && args.length !== 1) problems.push(`${at}: "file" takes one name`);
      else if (kind === "serve" && (args.length === 0 || !args.every((p) => /^\d+$/.test(p)))) problems.push(`${at}: "serve" takes the ports it waits for`);
      else if (kind === "serve" && !b.body.split("\n").some((l) => l.trimEnd().endsWith("&"))) problems.push(`${at}: a serve block starts its servers with a line ending in &`);
      else if (kind === "output" && !(previous && previous.block === blocks[blocks.indexOf(b) - 1] && previous.scenario === first && (previous.kind === "run" || previous.kind === "serve"))) {
        problems.push(`${at}: an output block must come right after a run or serve block of its scenario`);
      }
    }
    previous = first && kind && (SCENARIOS as readonly string[]).includes(first) ? { block: b, scenario: first as Scenario, kind: kind as Kind, args } : undefined;
  }
  return problems;
}

/** The blocks a scenario runs, in the order of the files and of the blocks in each. */
export function steps(blocks: readonly Block[], scenario: Scenario): Step[] {
  return blocks.flatMap((b) => {
    const [first, kind, ...args] = b.marker;
    return first === scenario ? [{ block: b, scenario, kind: kind as Kind, args }] : [];
  });
}

/** README.md and every docs/*.md of the checkout at `root`, the files the convention covers. */
export function documents(root = ROOT): { file: string; text: string }[] {
  const docs = readdirSync(path.join(root, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`);
  return ["README.md", ...docs].map((file) => ({ file, text: readFileSync(path.join(root, file), "utf8") }));
}

export function allBlocks(root = ROOT): Block[] {
  return documents(root).flatMap((d) => parseBlocks(d.file, d.text));
}
