import { describe, expect, it } from "vitest";
import { newRun, parseId, RunIds } from "../../src/resume/ids.js";

/** Event ids as protocol/README.md §16 gives them: `<run>.<seq>.<nonce>`, numbered from 1, no two alike. */
describe("RunIds", () => {
  it("numbers a run's ids from 1, each parsed back to its run and number, with no nonce twice across many pools and a new key", () => {
    const run = newRun();
    const ids = new RunIds(run);
    const nonces = new Set<string>();
    // 1,200,000 ids: past the 1,024 pools of 744 nonces after which the generator takes a new key.
    for (let seq = 1; seq <= 1_200_000; seq++) {
      const line = ids.next();
      nonces.add(line.slice(line.length - 12, -1));
      if (seq % 10_000 !== 1) continue;
      expect(line).toMatch(/^id: [A-Za-z0-9_-]{12}\.[1-9][0-9]*\.[A-Za-z0-9_-]{11}\n$/);
      expect(parseId(line.slice(4, -1))).toEqual({ run, seq });
    }
    expect(nonces.size).toBe(1_200_000);
  });

  it("gives every run a handle of its own", () => {
    const runs = new Set(Array.from({ length: 10_000 }, newRun));
    expect(runs.size).toBe(10_000);
  });
});
