import { JsonPatchOperationSchema, JsonPointerSchema } from "@ag-ui/core/schemas";
import { describe, expect, it } from "vitest";
import { isPointer, parsePointer } from "../../src/core/index.js";
import { opProblem } from "../../src/stream/schema.js";
import { Rng } from "../../scripts/soak/rng.js";

/**
 * The hand-written fast checks of the schema stage against the schemas they
 * stand in for: @ag-ui/core 1.0.0's own zod objects, on random input.
 */

function randomPointer(rng: Rng): string {
  const alphabet = ["/", "/", "~", "~0", "~1", "0", "1", "2", "a", "-", "é", " "];
  let p = rng.chance(0.8) ? "/" : "";
  for (let k = rng.int(8); k > 0; k--) p += rng.pick(alphabet);
  return p;
}

describe("the schema stage's fast checks", () => {
  it("isPointer and parsePointer agree with @ag-ui/core's JsonPointerSchema", () => {
    const rng = new Rng(7001);
    const fixed = ["", "/", "~", "/~", "/~0", "/~1", "/~2", "/~01", "/a~", "a", "//", "/a/b~1c", "~0"];
    const cases = [...fixed, ...Array.from({ length: 5000 }, () => randomPointer(rng))];
    let refused = 0;
    for (const p of cases) {
      const zod = JsonPointerSchema.safeParse(p).success;
      if (!zod) refused++;
      expect(isPointer(p), JSON.stringify(p)).toBe(zod);
      expect(parsePointer(p).ok, JSON.stringify(p)).toBe(zod);
    }
    // Both answers occur often enough for the agreement to mean something.
    expect(refused).toBeGreaterThan(500);
    expect(cases.length - refused).toBeGreaterThan(500);
  });

  it("opProblem passes exactly the ops JsonPatchOperationSchema parses", () => {
    const rng = new Rng(7002);
    const names = ["add", "remove", "replace", "move", "copy", "test", "bogus", 5, undefined];
    const pointers = () => (rng.chance(0.8) ? randomPointer(rng) : rng.pick([3, null, undefined]));
    const values = [undefined, null, 0, "", [], {}];
    let passed = 0;
    for (let n = 0; n < 5000; n++) {
      const op: Record<string, unknown> = {};
      const name = rng.pick(names);
      if (name !== undefined || rng.chance(0.5)) op["op"] = name;
      if (rng.chance(0.9)) op["path"] = pointers();
      if (rng.chance(0.5)) op["from"] = pointers();
      if (rng.chance(0.7)) op["value"] = rng.pick(values);
      if (rng.chance(0.1)) op["extra"] = 1;
      const zod = JsonPatchOperationSchema.safeParse(op).success;
      if (zod) passed++;
      expect(opProblem(op) === undefined, JSON.stringify(op)).toBe(zod);
    }
    expect(passed).toBeGreaterThan(500);
    expect(5000 - passed).toBeGreaterThan(500);
  });
});
