import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { documents } from "./blocks.js";

/**
 * Every relative link of README.md and docs/*.md points at a file of the
 * repository, and every `#anchor` at a heading of the file it names, as GitHub
 * spells heading anchors. Moving a section, or a file, cannot leave a link
 * behind.
 */

/** GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`. */
export function slug(heading: string): string {
  return heading
    .replace(/`/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The anchors of a Markdown text's headings; a repeated heading gets -1, -2, … as on GitHub. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of withoutCode(text).matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = slug(m[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The text with fenced blocks and inline code blanked, so that links and headings in code do not count. */
function withoutCode(text: string): string {
  return text.replace(/^(`{3,})[^\n]*\n[\s\S]*?^\1\s*$/gm, "").replace(/`[^`\n]*`/g, "``");
}

/** Every link target of a Markdown text: `[x](target)` and `![x](target)`, titles dropped. */
export function links(text: string): string[] {
  return [...withoutCode(text).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1] as string);
}

describe("the link reader", () => {
  it("spells anchors as GitHub does", () => {
    expect(slug("Go: net/http middleware")).toBe("go-nethttp-middleware");
    expect(slug("A server you cannot change: proxy")).toBe("a-server-you-cannot-change-proxy");
    expect(slug("The `start` options")).toBe("the-start-options");
    expect([...anchors("# A\n## B\n## B\n```\n## C\n```\n")]).toEqual(["a", "b", "b-1"]);
  });

  it("reads links and images, and none in code", () => {
    expect(links('[a](x.md) ![b](y.png "t") `[c](z.md)`\n```\n[d](w.md)\n```\n[e](#f)')).toEqual(["x.md", "y.png", "#f"]);
  });
});

describe("README.md and docs/*.md", () => {
  const docs = documents();

  it("have links to check", () => {
    expect(docs.map((d) => d.file)).toContain("docs/install.md");
    expect(docs.flatMap((d) => links(d.text)).length).toBeGreaterThan(30);
  });

  for (const doc of docs) {
    it(`${doc.file}: every relative link points at a file, and every anchor at a heading`, () => {
      const broken: string[] = [];
      for (const target of links(doc.text)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:: not ours to check
        const [file = "", anchor] = target.split("#", 2);
        const resolved = file ? path.resolve(ROOT, path.dirname(doc.file), decodeURIComponent(file)) : path.join(ROOT, doc.file);
        if (!resolved.startsWith(ROOT + path.sep) && resolved !== ROOT) broken.push(`${target}: outside the repository`);
        else if (!existsSync(resolved)) broken.push(`${target}: no such file`);
        else if (anchor !== undefined) {
          if (statSync(resolved).isDirectory() || !resolved.endsWith(".md")) broken.push(`${target}: an anchor into a file that is not Markdown`);
          else if (!anchors(readFileSync(resolved, "utf8")).has(anchor)) broken.push(`${target}: no heading with that anchor`);
        }
      }
      expect(broken).toEqual([]);
    });
  }
});
