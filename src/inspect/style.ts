/** The inspector page's style sheet: inline, so that the page and the report are one file each, and allowed by its hash (html.ts). */
export const STYLE = `
:root{--bg:#fbfbfa;--fg:#1d2327;--muted:#68707a;--line:#dde1e5;--pick:#e8f0fe;--mended:#1a7f37;--discarded:#b3261e;--kept:#8a5a00;--passed:#57606a;--wiped:#7b3fb0;font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
*{box-sizing:border-box}body{margin:0}
header{display:flex;gap:12px;align-items:center;padding:8px 14px;border-bottom:1px solid var(--line);background:#fff}
h1{font-size:15px;margin:0}h2{font-size:14px;margin:0 0 6px}h3{font-size:13px;margin:10px 0 6px}h4{font-size:12px;margin:6px 0;color:var(--muted)}
#app{height:100vh;display:flex;flex-direction:column;overflow-wrap:anywhere}.body{flex:1;display:flex;min-height:0}
#streams{width:260px;border-right:1px solid var(--line);overflow:auto;padding:10px}
#streams ul{list-style:none;margin:0;padding:0}#streams li{padding:6px 8px;border-radius:6px;cursor:pointer;margin-bottom:4px;border:1px solid transparent}
#streams li.picked{background:var(--pick);border-color:#b6ccf5}
main{flex:1;min-width:0;display:flex;flex-direction:column;padding:10px 14px}
.columns{flex:1;display:flex;gap:14px;min-height:0}
.timeline{width:46%;overflow:auto;border:1px solid var(--line);border-radius:6px;background:#fff}
.detail{flex:1;overflow:auto;min-width:0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:3px 6px;border-bottom:1px solid var(--line);vertical-align:top}th,td.num{white-space:nowrap}
th{position:sticky;top:0;background:#f3f4f6;font-weight:600}
tbody tr{cursor:pointer}tbody tr:hover{background:#f6f8fa}tr.picked{background:var(--pick)}
.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:0 6px;margin:0 2px;border-radius:9px;font-size:11px;border:1px solid currentColor;white-space:nowrap}
.badge.outcome-mended{color:var(--mended)}.badge.outcome-discarded{color:var(--discarded)}.badge.outcome-kept{color:var(--kept)}.badge.outcome-passed{color:var(--passed)}
.badge.kind-wiped{color:var(--wiped)}.badge.kind-fatal,.badge.kind-dropped{color:var(--discarded)}.badge.kind-ignored{color:var(--kept)}
li.op.outcome-mended{border-left:3px solid var(--mended);padding-left:4px}li.op.outcome-discarded{border-left:3px solid var(--discarded);padding-left:4px}li.op.outcome-kept,li.op.outcome-passed{border-left:3px solid var(--kept);padding-left:4px}
.counts .group{display:inline-flex;flex-wrap:wrap;align-items:center;gap:2px;margin-right:8px}.counts .label{color:var(--muted);font-size:11px}td .counts .group{margin:0}.legend{margin:2px 0 6px}
.status-open,.live-live{color:#0969da}.status-complete{color:var(--mended)}.status-broken,.live-error,.live-offline{color:var(--discarded)}
.muted{color:var(--muted)}.small{font-size:11px}.note{background:#fff8c5;border:1px solid #e3d27a;padding:4px 8px;border-radius:6px;margin:6px}
.sides{display:flex;gap:10px}.side{flex:1;min-width:0;background:#fff;border:1px solid var(--line);border-radius:6px;padding:4px 8px}
pre,code{font:12px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre-wrap;overflow-wrap:anywhere}
pre{margin:0;max-height:260px;overflow:auto}
ol.ops{margin:0;padding-left:24px}ol.ops li{margin:2px 0}
ul.findings{list-style:none;padding:0;margin:0}ul.findings li{padding:4px 0;border-bottom:1px dashed var(--line)}
ul.tree{list-style:none;margin:0;padding-left:16px;font:12px/1.45 ui-monospace,monospace}#state>ul.tree{padding-left:0}
summary{cursor:pointer}.k{color:#0550ae}.k.index{color:var(--muted)}.v.string{color:#0a3069}.v.number{color:#953800}.v.boolean,.v.null{color:#8250df}.size{color:var(--muted)}
#state,#diff,#event{background:#fff;border:1px solid var(--line);border-radius:6px;padding:4px 10px 10px;margin-bottom:10px}
ul.changes{list-style:none;padding:0;margin:0;font:12px/1.45 ui-monospace,monospace}.change.added .sign{color:var(--mended)}.change.removed .sign{color:var(--discarded)}.change.changed .sign{color:var(--kept)}
button{font:inherit;padding:2px 10px;border:1px solid var(--line);border-radius:6px;background:#fff;cursor:pointer;margin-left:auto}
`;
