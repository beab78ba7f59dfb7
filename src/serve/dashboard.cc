#include "serve/dashboard.h"

namespace bulkhead::serve {

const char* const kDashboardHtml = R"html(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>bulkhead serve</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:sans-serif;margin:24px;color:#222}
h1{font-size:20px;margin:0 0 4px}
#server{color:#666;margin-bottom:16px}
table{border-collapse:collapse;min-width:900px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:14px}
th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.READY{color:#186a3b;font-weight:bold}.UNAVAILABLE,.bad{color:#b03a2e;font-weight:bold}
.LOADING,.UNLOADING,.notready{color:#9a7d0a;font-weight:bold}
.reason{color:#666;font-size:12px;max-width:420px;overflow-wrap:anywhere}
#error{color:#b03a2e}
</style></head>
<body>
<h1>bulkhead serve</h1>
<div id="server">loading…</div>
<table id="models"><thead><tr><th>model</th><th>version</th><th>state</th><th>ready</th><th>devices</th>
<th>isolation</th><th>instances</th><th>requests/s</th><th>requests</th><th>failures</th><th>refused</th>
<th>queue</th><th>worker restarts</th><th>last check</th></tr></thead><tbody></tbody></table>
<p id="error"></p>
<script>
"use strict";
let last = null;
function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}
async function refresh() {
  try {
    const r = await fetch("/status.json", {cache: "no-store"});
    const s = await r.json();
    const now = performance.now();
    document.getElementById("server").textContent =
      "bulkhead " + s.version + " · " + s.models.length + " model version(s) · " +
      (s.ready ? "ready" : "not ready") + " · updated " + new Date().toLocaleTimeString();
    const body = document.querySelector("#models tbody");
    body.replaceChildren();
    for (const m of s.models) {
      const tr = document.createElement("tr");
      cell(tr, m.name);
      cell(tr, m.version || "–");
      cell(tr, m.state, m.state);
      cell(tr, m.version ? (m.ready ? "yes" : "no") : "–", m.ready ? "" : "notready");
      cell(tr, (m.devices || []).join(", "));
      cell(tr, m.isolation || "");
      cell(tr, m.instances ?? "", "num");
      let rate = "";
      const key = m.name + "/" + m.version;
      if (last && last.t < now && key in last.requests && m.requests !== undefined)
        rate = ((m.requests - last.requests[key]) * 1000 / (now - last.t)).toFixed(1);
      cell(tr, rate, "num");
      cell(tr, m.requests ?? "", "num");
      cell(tr, m.failures ?? "", m.failures ? "num bad" : "num");
      cell(tr, m.refused ?? "", "num");
      cell(tr, m.waiting ?? "", "num");
      cell(tr, m.worker_restarts ?? "", "num");
      const c = cell(tr, m.check || "–", m.check && m.check !== "clean" ? "bad" : "");
      if (m.reason) {
        const tr2 = document.createElement("tr");
        const td = cell(tr2, m.reason, "reason");
        td.colSpan = 14;
        body.appendChild(tr);
        body.appendChild(tr2);
        continue;
      }
      body.appendChild(tr);
    }
    last = {t: now, requests: Object.fromEntries(s.models.map(m => [m.name + "/" + m.version, m.requests]))};
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "cannot reach the server: " + e;
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body></html>
)html";

}  // namespace bulkhead::serve
