import { createHash } from "node:crypto";
import { STYLE } from "./style.js";

/**
 * The inspector's one page, as HTML: the same shell for the live page
 * (`proxy --inspect`, GET /) and the static report (`check --html`), which
 * also carries its data. The script is src/inspect/page/, compiled by
 * scripts/build.mjs into the bundle as a string: the page needs no file and
 * no network beyond the inspector's own API.
 */

// scripts/build.mjs defines it; a source run (tsx) that reaches here has no page to serve.
declare const __AGUI_INSPECTOR_JS__: string | undefined;

function script(): string {
  if (typeof __AGUI_INSPECTOR_JS__ !== "string") throw new Error("the inspector's page is built into dist/agui-state.cjs by scripts/build.mjs; run the built binary");
  return __AGUI_INSPECTOR_JS__;
}

const hash = (text: string): string => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`;

/**
 * JSON that is safe inside a <script type="application/json"> element: no
 * "</script", no "<!--", and no line separators that older parsers split on
 * (HTML's script data state, WHATWG HTML §13.2.5.4).
 */
export function embedJson(value: unknown): string {
  return (JSON.stringify(value) ?? "null").replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

/**
 * The page. `report`: the data of a static report (check --html); absent,
 * the page reads the inspector's API. The Content-Security-Policy allows only
 * this script and this style (by hash) and requests to the page's own origin:
 * even if some text escaped the page's rendering, it could run nothing.
 */
export function pageHtml(report?: unknown): { html: string; csp: string } {
  const js = script();
  const csp = `default-src 'none'; script-src ${hash(js)}; style-src ${hash(STYLE)}; connect-src ${report === undefined ? "'self'" : "'none'"}; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
  const data = report === undefined ? "" : `<script type="application/json" id="report">${embedJson(report)}</script>\n`;
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
${report === undefined ? "" : `<meta http-equiv="Content-Security-Policy" content="${csp}">\n`}<title>agui-state inspector</title>
<style>${STYLE}</style>
</head>
<body>
<noscript>The inspector needs JavaScript.</noscript>
${data}<script>${js}</script>
</body>
</html>
`;
  return { html, csp };
}
