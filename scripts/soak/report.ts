import { mib } from "./curve.js";
import type { Sample, SoakReport, SoakSettings } from "./options.js";

/** The soak's printout: its settings, the RSS curve as a table, and a summary ending in PASS or FAIL. */

const num = (n: number): string => n.toLocaleString("en-US");

export function formatHeader(o: SoakSettings): string {
  return `soak: ${num(o.requests)} requests over ${num(o.ids)} thread ids, --max-threads ${num(o.maxThreads)}, seed ${o.seed}, ${o.window} in flight, stats every ${num(o.statsEvery)}${o.maxHeap ? `, --max-heap ${o.maxHeap}` : ""}${o.nodeOptions ? `, NODE_OPTIONS=${o.nodeOptions}` : ""}`;
}

export function formatRow(s: Sample): string {
  return `| ${num(s.requests).padStart(9)} | ${mib(s.rssKiB).padStart(7)} | ${num(s.threads).padStart(7)} | ${num(s.stateBytes).padStart(11)} | ${num(s.evicted).padStart(7)} | ${(s.elapsedMs / 1000).toFixed(1).padStart(6)} |`;
}

export const TABLE_HEAD = "|  requests | RSS MiB | threads |  stateBytes | evicted | time s |\n|----------:|--------:|--------:|------------:|--------:|-------:|";

export function formatCurve(r: SoakReport): string {
  return [TABLE_HEAD, ...r.curve.map(formatRow)].join("\n");
}

export function formatSummary(r: SoakReport): string {
  const errs = Object.entries(r.errors)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}: ${num(v)}`)
    .join(", ");
  const methods = Object.entries(r.methods)
    .sort(([, a], [, b]) => b - a)
    .map(([k, v]) => `${k} ${num(v)}`)
    .join(", ");
  const lines = [
    `requests sent ${num(r.sent)}, responses ${num(r.responses)}, unanswered ${num(r.sent - r.responses)}; sidecar exit code ${r.exitCode}`,
    `mix: ${methods}`,
    `threads opened ${num(r.created)}, closed ${num(r.closed)}, live at the end ${num(r.live)}, evicted ${num(r.evictions)} (= opened − live − closed)`,
    `${num(r.statsCalls)} stats calls: threads, evicted, requests and stateBytes (exactly) checked against the model at each`,
    `errors by code (every one predicted by the model): ${errs || "none"}`,
    `duration ${(r.durationMs / 1000).toFixed(1)} s (${num(Math.round(r.sent / (r.durationMs / 1000)))} requests/s); peak RSS (VmHWM) ${mib(r.peakRssKiB)} MiB`,
  ];
  if (r.churnRatio !== undefined) {
    lines.push(
      `B11, memory under churn: (peak RSS ${mib(r.peakRssKiB)} MiB − empty process ${mib(r.emptyRssKiB)} MiB) / live state ${mib(r.liveStateBytes / 1024)} MiB (stats.stateBytes at the end) = ${r.churnRatio.toFixed(2)}×`,
    );
  }
  const pct = (x: number): string => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)}%`;
  const end = r.curve[r.curve.length - 1];
  if (r.fullAt !== undefined && r.fullSample && r.fullGrowth !== undefined && end) {
    lines.push(`store full (${num(r.options.maxThreads)} live threads) from request ${num(r.fullAt)}; RSS ${mib(r.fullSample.rssKiB)} MiB at ${num(r.fullSample.requests)} → ${mib(end.rssKiB)} MiB at the end: ${pct(r.fullGrowth)}, V8's heap warm-up included (reported, not checked)`);
  }
  if (r.plateauAt !== undefined && r.baseline && r.growth !== undefined && end) {
    const post = r.curve.filter((c) => c.requests >= (r.plateauAt as number));
    const peak = Math.max(...post.map((c) => c.rssKiB));
    lines.push(
      `plateau from request ${num(r.plateauAt)} (store full and turned over ${r.options.warmupTurnovers}×): RSS ${mib(r.baseline.rssKiB)} MiB at ${num(r.baseline.requests)} → ${mib(end.rssKiB)} MiB at ${num(end.requests)}: ${pct(r.growth)} (${r.options.checkMemory ? `tolerance ${(r.options.tolerance * 100).toFixed(0)}%` : "reported, not checked"}); highest sample on the plateau ${mib(peak)} MiB; least-squares trend ${pct(r.slopePer100k ?? 0)} per 100k requests`,
    );
  }
  if (r.options.nodeOptions) lines.push(`sidecar NODE_OPTIONS: ${r.options.nodeOptions} (Node's own warnings on stderr: ${r.nodeWarnings})`);
  lines.push(r.failures.length ? `FAIL:\n  - ${r.failures.join("\n  - ")}` : "PASS");
  return lines.join("\n");
}
