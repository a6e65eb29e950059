import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { Ajv } from "ajv";
import { describe, expect, it } from "vitest";
import { openrpc, ParamsValidator } from "../../src/rpc/validate.js";
import { paired } from "../helpers/paired.js";
import { ROOT } from "../helpers/fixtures.js";

interface Example {
  description: string;
  setup: unknown[];
  request: { id: unknown; method: string; params?: unknown };
  response: { id: unknown; result?: unknown; error?: { code: number; data?: unknown } };
  ignore?: string[];
}

const dir = path.join(ROOT, "protocol/examples");
const files = readdirSync(dir).filter((m) => statSync(path.join(dir, m)).isDirectory()).flatMap((m) => readdirSync(path.join(dir, m)).filter((f) => f.endsWith(".json")).map((f) => `${m}/${f}`));
const load = (f: string) => JSON.parse(readFileSync(path.join(dir, f), "utf8")) as Example;

/** Deletes the member a JSON pointer names, if it is there. */
function drop(doc: unknown, pointer: string): void {
  const tokens = pointer.split("/").slice(1).map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
  const last = tokens.pop() as string;
  let cur = doc as Record<string, unknown> | undefined;
  for (const t of tokens) cur = cur?.[t] as Record<string, unknown> | undefined;
  if (cur && typeof cur === "object") {
    if (Array.isArray(cur)) cur.splice(Number(last), 1);
    else delete cur[last];
  }
}

const doc = openrpc as unknown as {
  methods: { name: string; params: { name: string; required?: boolean; schema: unknown }[]; result: { schema: unknown }; examples?: { name: string; "x-file"?: string }[] }[];
  components: { schemas: Record<string, unknown> };
  "x-error-data": Record<string, { code: number; schema: unknown }>;
};
const ajv = new Ajv({ strict: false });
ajv.addSchema({ $id: "openrpc", components: doc.components }, "openrpc");
const rebase = (s: unknown): unknown => JSON.parse(JSON.stringify(s).replace(/"\$ref":"#\//g, '"$ref":"openrpc#/'));

describe("protocol/examples replayed against the server", () => {
  it("has at least one example for every method", () => {
    const methods = new Set(files.map((f) => f.split("/")[0]));
    expect([...methods].sort()).toEqual(doc.methods.map((m) => m.name).sort());
  });

  for (const f of files) {
    it(`${f}: the server answers exactly as the example says`, async () => {
      const ex = load(f);
      const p = paired();
      for (const s of ex.setup) p.input.write(JSON.stringify(s) + "\n");
      p.input.write(JSON.stringify(ex.request) + "\n");
      p.input.end();
      await p.server.done;
      const lines = p.text().trim().split("\n");
      const actual = JSON.parse(lines[lines.length - 1] as string) as unknown;
      const expected = structuredClone(ex.response) as unknown;
      for (const ptr of ex.ignore ?? []) {
        drop(actual, ptr);
        drop(expected, ptr);
      }
      if (ex.response.error) drop(actual, "/error/message");
      expect(actual).toEqual(expected);
    });

    it(`${f}: the example's params, result and error data fit the document's schemas`, () => {
      const ex = load(f);
      const method = doc.methods.find((m) => m.name === ex.request.method);
      expect(method, ex.request.method).toBeDefined();
      if (!method) return;
      const problem = new ParamsValidator().check(method.name, ex.request.params ?? {});
      if (ex.response.result !== undefined) {
        expect(problem).toBeUndefined();
        expect(ajv.validate(rebase(method.result.schema) as object, ex.response.result), JSON.stringify(ajv.errors)).toBe(true);
      } else {
        const err = Object.values(doc["x-error-data"]).find((e) => e.code === ex.response.error?.code);
        expect(err, `error code ${ex.response.error?.code} is in x-error-data`).toBeDefined();
        expect(ajv.validate(rebase(err?.schema) as object, ex.response.error?.data), JSON.stringify(ajv.errors)).toBe(true);
      }
    });
  }

  it("the document's example pairings are the example files: same names, params and results", () => {
    for (const m of doc.methods) {
      const own = files.filter((f) => f.startsWith(`${m.name}/`));
      const pairings = (m.examples ?? []) as { name: string; params: { name: string; value: unknown }[]; result?: { value: unknown } }[];
      expect(pairings.map((e) => e.name).sort(), m.name).toEqual(own.map((f) => path.basename(f, ".json")).sort());
      for (const e of pairings) {
        const ex = load(`${m.name}/${e.name}.json`);
        expect(Object.fromEntries(e.params.map((x) => [x.name, x.value])), `${m.name}/${e.name} params`).toEqual(ex.request.params ?? {});
        if (e.result) expect(e.result.value, `${m.name}/${e.name} result`).toEqual(ex.response.result);
      }
    }
  });
});
