/**
 * What the recorder asks each graph of graphs.py: the endpoint, one sentence
 * on what the graph exercises, and each of the thread's two runs. Run 1 sends
 * the client's own `ui` member and one user message; run 2 sends what the
 * client holds after run 1 (see record.ts) plus, unless `resume` is set, a new
 * user message.
 */

export interface RunSpec {
  /** The user message this run adds; none when the run answers an interrupt. */
  text?: string;
  /** RunAgentInput.forwardedProps, e.g. LangGraph's resume command. */
  forwardedProps?: Record<string, unknown>;
}

export interface GraphSpec {
  graph: string;
  path: string;
  about: string;
  runs: [RunSpec, RunSpec];
}

/** The member the client keeps for itself: LangGraph's schema has no `ui`. */
export const CLIENT_KEY = "ui";
export const CLIENT_UI = { theme: "dark", panel: { open: true, width: 320 }, draft: "unsent text" };

const chat = (first: string, second: string): [RunSpec, RunSpec] => [{ text: first }, { text: second }];

export const SPECS: readonly GraphSpec[] = [
  { graph: "recipe", path: "/recipe", runs: chat("Make me a pasta recipe.", "Make it vegetarian, with basil."),
    about: "The AG-UI dojo's shared-state recipe: four nodes fill and then revise a `recipe` object, each node's exit sending the whole state." },
  { graph: "recipe-no-raw", path: "/recipe-no-raw", runs: chat("Make me a pasta recipe.", "Make it vegetarian, with basil."),
    about: "The recipe graph served with `emit_raw_events=False`: the same state events without the RAW events and `rawEvent` copies." },
  { graph: "predictive", path: "/predictive", runs: chat("Plan a two-day trip.", "Add a third day."),
    about: "Predictive state: a scripted chat model streams a `write_document` tool call under `predict_state` metadata, then the node writes `document`." },
  { graph: "nested", path: "/nested", runs: chat("Draft the survey.", "Trim it further."),
    about: "A nested document whose later nodes remove keys, drop a section and shrink lists, on both runs." },
  { graph: "odd-keys", path: "/odd-keys", runs: chat("Write the odd keys.", "Again."),
    about: "State members and keys `raster-ops/dataset`, `a~b`, `~1`, `/`, the empty key, non-ASCII keys and `__proto__`; a later node removes one." },
  { graph: "bigint", path: "/bigint", runs: chat("Store the ids.", "Add a counter."),
    about: "Integers past 2^53 (2**53 + 1, a 64-bit snowflake id, a 19-digit timestamp) written by run 1 and sent back by the client in run 2's state." },
  { graph: "interrupt", path: "/interrupt", runs: [{ text: "Migrate the database." }, { forwardedProps: { command: { resume: "yes" } } }],
    about: "LangGraph's `interrupt()`: run 1 stops at the `ask` node; run 2 resumes it with `forwardedProps.command.resume` and runs to the end." },
  { graph: "raise", path: "/raise", runs: chat("Collect the items.", "Try again."),
    about: "A node writes state and the next node raises: what the integration sends when the graph fails." },
  { graph: "table", path: "/table", runs: chat("Load the table.", "Reprice and restock again."),
    about: "About 1 MB of state: a 4000-row `table`; run 1 loads it and reprices three rows in one node, run 2 reprices three and restocks two in two nodes (served with `emit_raw_events=False`)." },
  { graph: "slow", path: "/slow", runs: chat("Run the pipeline.", "Run it again."),
    about: "A slow graph: three nodes that each sleep 50-100 ms before writing, so the state events are spread in time." },
  { graph: "subgraph", path: "/subgraph", runs: chat("Research tide tables.", "Now moon phases."),
    about: "A subgraph: the parent's `research` node is a compiled graph over the same keys, entered and left within each run." },
  { graph: "todo", path: "/todo", runs: chat("Add my errands.", "Add two more."),
    about: "A todo list grown over nodes: items added, one marked done and one dropped, with a summary, on each run." },
];
