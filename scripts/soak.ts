// The long soak (`npm run soak`): by default 1,000,000 requests over 20,000
// thread ids against dist/agui-state --max-threads 10000, every answer checked
// against an exact model of the thread store, resident memory sampled every
// 100,000 requests. Prints the curve and a summary; exits 1 if any check fails.
//
//   npx tsx scripts/soak.ts [--requests N] [--ids N] [--max-threads N] [--seed N]
//                           [--window N] [--stats-every N] [--sample-every N]
//                           [--tolerance PCT] [--warmup-turnovers N]
//                           [--node-options "--max-old-space-size=300"] [--binary PATH]
import { defaults, formatCurve, formatHeader, formatRow, formatSummary, runSoak, TABLE_HEAD, type SoakOptions } from "./soak-lib.js";

const USAGE =
  "usage: tsx scripts/soak.ts [--requests N] [--ids N] [--max-threads N] [--seed N] [--window N] [--stats-every N] [--sample-every N] [--tolerance PCT] [--warmup-turnovers N] [--node-options OPTS] [--binary PATH]";

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
    if (flag === "--node-options") {
      o.nodeOptions = raw;
      continue;
    }
    const n = Number(raw.replace(/[_,]/g, ""));
    const int = (min: number): number => {
      if (!Number.isSafeInteger(n) || n < min) throw new Error(`${flag} must be an integer ≥ ${min}, not ${JSON.stringify(raw)}`);
      return n;
    };
    switch (flag) {
      case "--requests":
        o.requests = int(2);
        break;
      case "--ids":
        o.ids = int(1);
        break;
      case "--max-threads":
        o.maxThreads = int(1);
        break;
      case "--seed":
        o.seed = int(0);
        break;
      case "--window":
        o.window = int(1);
        break;
      case "--stats-every":
        o.statsEvery = int(1);
        break;
      case "--sample-every":
        o.sampleEvery = int(1);
        break;
      case "--warmup-turnovers":
        o.warmupTurnovers = int(0);
        break;
      case "--tolerance":
        if (!(n >= 0)) throw new Error(`--tolerance must be a percentage ≥ 0, not ${JSON.stringify(raw)}`);
        o.tolerance = n / 100;
        break;
      default:
        throw new Error(`unknown flag ${flag}\n${USAGE}`);
    }
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
