import fc from "fast-check";
import { formatPointer, fromEntries, isObject, type Json, type JsonObject } from "../../src/core/index.js";

/** Member names that break naive pointer code: escapes, empty, "-", digits, prototype keys. */
export const KEYS = ["a", "b", "/", "~", "~1", "a/b", "m~n", "", "-", "0", "1", "10", "__proto__", "constructor", "prototype", "toString"];

export const key = fc.constantFrom(...KEYS);

const scalar = fc.oneof(fc.constant(null), fc.boolean(), fc.integer({ min: -1000, max: 1000 }), fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Object.is(d, -0)), fc.string({ maxLength: 6 }), key);


export const json: fc.Arbitrary<Json> = fc.letrec<{ value: Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.array(fc.tuple(key, tie("value")), { maxLength: 4 }).map(fromEntries),
  ),
})).value;

export const jsonObject: fc.Arbitrary<JsonObject> = fc.array(fc.tuple(key, json), { maxLength: 5 }).map(fromEntries);

/** Every path that exists in a value, root included. */
export function paths(v: Json, base: string[] = []): string[][] {
  const out = [base];
  if (Array.isArray(v)) v.forEach((x, i) => out.push(...paths(x, [...base, String(i)])));
  else if (isObject(v)) for (const k of Object.keys(v)) out.push(...paths(v[k] as Json, [...base, k]));
  return out;
}

/** The value at a path that `paths` gave for `v`. */
export function valueIn(v: Json, path: readonly string[]): Json {
  let at = v;
  for (const k of path) at = (Array.isArray(at) ? at[Number(k)] : isObject(at) ? at[k] : null) as Json;
  return at;
}

/**
 * Ops against a given state: mostly aimed at paths that exist (or one step
 * beyond them), some deliberately broken.
 */
export function opsFor(state: Json): fc.Arbitrary<unknown[]> {
  const existing = paths(state);
  const target = fc.oneof(
    fc.constantFrom(...existing),
    fc.tuple(fc.constantFrom(...existing), fc.oneof(key, fc.constantFrom("-", "5", "01", "99"))).map(([p, k]) => [...p, k]),
  );
  const asPointer = (p: string[]) => fc.oneof(fc.constant<unknown>(formatPointer(p)), fc.constant<unknown>(p));
  // Writes of what is already there, which change nothing and are not sent (protocol/README.md §5 rule 8):
  // a replace or add of a location's own value, a copy or move between two locations.
  // Only JSON values are written back: a model of the state may hold what a client's library let in (a
  // function copied from `/constructor`), which has no JSON text.
  const inside = existing.filter((p) => p.length > 0 && JSON.stringify(valueIn(state, p)) !== undefined);
  const echo = inside.length
    ? fc.oneof(
        fc.tuple(fc.constantFrom("add", "replace"), fc.constantFrom(...inside)).chain(([name, p]) => fc.record({ op: fc.constant(name), path: asPointer(p), value: fc.constant(JSON.parse(JSON.stringify(valueIn(state, p))) as Json) })),
        fc.tuple(fc.constantFrom("copy", "move"), fc.constantFrom(...inside), fc.constantFrom(...inside)).chain(([name, a, b]) => fc.record({ op: fc.constant(name), from: asPointer(a), path: asPointer(b) })),
      )
    : fc.constant<unknown>({ op: "test", path: "", value: {} });
  const op = fc.oneof(
    echo,
    fc.record({ op: fc.constantFrom("add", "replace", "test"), path: target.chain(asPointer), value: json }),
    fc.record({ op: fc.constant("remove"), path: target.chain(asPointer) }),
    fc.record({ op: fc.constantFrom("move", "copy"), from: target.chain(asPointer), path: target.chain(asPointer) }),
    // Broken on purpose: bad pointers, unknown ops, missing members.
    fc.constantFrom<unknown>({ op: "add", path: "no-slash", value: 1 }, { op: "spam", path: "" }, { op: "add", path: "/~2" }, { op: "copy", path: "/x" }, null, { op: "remove", path: "" }),
  );
  return fc.array(op, { maxLength: 8 });
}
