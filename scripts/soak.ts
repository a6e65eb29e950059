// The long soak (`npm run soak`): by default 1,000,000 requests over 20,000
// thread ids against dist/agui-state --max-threads 10000, every answer checked
// against an exact model of the thread store, resident memory sampled every
// 100,000 requests. Prints the curve and a summary; exits 1 if any check fails.
//
//   npx tsx scripts/soak.ts [--requests N] [--ids N] [--max-threads N] [--seed N]
//                           [--window N] [--stats-every N] [--sample-every N]
//                           [--tolerance PCT] [--warmup-turnovers N]
//                           [--max-heap 256MiB] [--node-options "--max-old-space-size=300"] [--binary PATH]
import { runSoak } from "./soak/driver.js";
import { defaults, type SoakOptions } from "./soak/options.js";
import { formatCurve, formatHeader, formatRow, formatSummary, TABLE_HEAD } from "./soak/report.js";

const USAGE =
  "usage: tsx scripts/soak.ts [--requests N] [--ids N] [--max-threads N] [--seed N] [--window N] [--stats-every N] [--sample-every N] [--tolerance PCT] [--warmup-turnovers N] [--max-heap SIZE] [--node-options OPTS] [--binary PATH]";

type IntegerOption = "requests" | "ids" | "maxThreads" | "seed" | "window" | "statsEvery" | "sampleEvery" | "warmupTurnovers";

/** Each integer flag: the option it sets, and its least value. */
const INTEGER_FLAGS: Record<string, [IntegerOption, number]> = {
  "--requests": ["requests", 2],
  "--ids": ["ids", 1],
  "--max-threads": ["maxThreads", 1],
  "--seed": ["seed", 0],
  "--window": ["window", 1],
  "--stats-every": ["statsEvery", 1],
  "--sample-every": ["sampleEvery", 1],
  "--warmup-turnovers": ["warmupTurnovers", 0],
};

function parse(argv: string[]): SoakOptions {
  const o: SoakOptions = { requests: 1_000_000, ids: 20_000, maxThreads: 10_000, seed: Math.floor(Math.random() * 2 ** 32) };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i] as string;
    if (flag === "--help" || flag === "-h") {
      console.log(USAGE);
      process.exit(0);
    }
    const raw = argv[++i];
    if (raw === undefined) throw new Error(`${flag} needs a value\n${USAGE}`);
    if (flag === "--binary") {
      o.binary = raw;
      continue;
    }
    if (flag === "--max-heap") {
      o.maxHeap = raw;
      continue;
    }
    if (flag === "--node-options") {
      o.nodeOptions = raw;
      continue;
    }
    const n = Number(raw.replace(/[_,]/g, ""));
    const int = (min: number): number => {
      if (!Number.isSafeInteger(n) || n < min) throw new Error(`${flag} must be an integer ≥ ${min}, not ${JSON.stringify(raw)}`);
      return n;
    };
    const key = INTEGER_FLAGS[flag];
    if (key) o[key[0]] = int(key[1]);
    else if (flag === "--tolerance") {
      if (!(n >= 0)) throw new Error(`--tolerance must be a percentage ≥ 0, not ${JSON.stringify(raw)}`);
      o.tolerance = n / 100;
    } else throw new Error(`unknown flag ${flag}\n${USAGE}`);
  }
  return o;
}

async function main(): Promise<number> {
  let o: SoakOptions;
  try {
    o = parse(process.argv.slice(2));
  } catch (e) {
    console.error((e as Error).message);
    return 2;
  }
  console.log(`${formatHeader(defaults(o))}  (replay with --seed ${o.seed >>> 0})`);
  console.log(TABLE_HEAD);
  const report = await runSoak({ ...o, onSample: (s) => console.log(formatRow(s)) });
  console.log("");
  console.log(formatSummary(report));
  if (report.failures.length) {
    console.log("");
    console.log("The curve again, for the record:");
    console.log(formatCurve(report));
  }
  return report.failures.length ? 1 : 0;
}

process.exitCode = await main();
