import type { Summary } from "../stream/client.js";
import type { Finding } from "../stream/findings.js";
import { findingText } from "./sarif.js";

/**
 * `check --junit FILE` (protocol/README.md §13): the findings as JUnit XML,
 * the test report most CI systems show. One test case per event that has
 * findings, failed, with one `<failure>` naming them all (JUnit's schema
 * allows one per test case); when nothing is found, one passing test case
 * says so, so that the suite is never empty.
 */

/**
 * Text for XML 1.0 (§2.2): characters XML cannot carry at all (most C0
 * controls, U+FFFE, U+FFFF, lone surrogates) become a visible `\uXXXX`; then
 * `&`, `<`, `>` and the quotes are escaped, so the text is safe in content
 * and in an attribute alike (`]]>` included). In an attribute, line ends and
 * tabs are written as references, which attribute normalization would
 * otherwise turn into spaces.
 */
export function xmlText(text: string, attribute = false): string {
  // eslint-disable-next-line no-control-regex -- the characters XML 1.0 forbids are control characters
  const legal = text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  const escaped = legal.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");
  return attribute ? escaped.replace(/\n/g, "&#10;").replace(/\r/g, "&#13;").replace(/\t/g, "&#9;") : escaped;
}

const attr = (name: string, value: string | number): string => ` ${name}="${xmlText(String(value), true)}"`;

/** The JUnit XML for a check of `file` (its name as given; "-" for stdin) that found `findings`. */
export function junitXml(file: string, findings: readonly Finding[], summary: Summary): string {
  const source = file === "-" ? "stdin" : file;
  const byEvent = new Map<number, Finding[]>();
  for (const f of findings) {
    const list = byEvent.get(f.event);
    if (list) list.push(f);
    else byEvent.set(f.event, [f]);
  }
  const cases: string[] = [];
  for (const [event, list] of byEvent) {
    const first = list[0] as Finding;
    const name = `line ${first.line}, event ${event} (${first.type || "no type"})`;
    const codes = [...new Set(list.map((f) => f.code))].join(" ");
    const message = `${first.kind}: ${first.code}${list.length > 1 ? ` and ${list.length - 1} more` : ""}`;
    const body = list.map((f) => `${f.code}: ${findingText(f)}`).join("\n");
    cases.push(`    <testcase${attr("name", name)}${attr("classname", `agui-state check ${source}`)}${attr("file", source)}${attr("line", first.line)}>\n      <failure${attr("message", message)}${attr("type", codes)}>${xmlText(body)}</failure>\n    </testcase>\n`);
  }
  if (cases.length === 0) {
    const name = `${summary.events} events, ${summary.deltas} deltas: the client applies every one`;
    cases.push(`    <testcase${attr("name", name)}${attr("classname", `agui-state check ${source}`)}${attr("file", source)}/>\n`);
  }
  const failures = byEvent.size;
  const counts = `${attr("tests", cases.length)}${attr("failures", failures)}${attr("errors", 0)}`;
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites${attr("name", "agui-state check")}${counts}>\n  <testsuite${attr("name", source)}${counts}${attr("skipped", 0)}>\n${cases.join("")}  </testsuite>\n</testsuites>\n`;
}
