/** Statistics for `npm run bench`: every figure is a median of alternating rounds, with its min and max. */

export interface Stat {
  median: number;
  min: number;
  max: number;
}

export function stat(xs: number[]): Stat {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)] as number, min: s[0] as number, max: s[s.length - 1] as number };
}

/** Runs A and B alternately, `rounds` times each, so both see the same machine noise. */
export async function alternate(rounds: number, a: () => Promise<number>, b: () => Promise<number>): Promise<[Stat, Stat]> {
  const xs: number[] = [];
  const ys: number[] = [];
  for (let i = 0; i < rounds; i++) {
    xs.push(await a());
    ys.push(await b());
  }
  return [stat(xs), stat(ys)];
}
