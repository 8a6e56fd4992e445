// The live dashboard: polls /metrics (Prometheus text) and the most recent trace, and redraws
// without reloading. Plain JavaScript, no libraries: it is served from inside the binary.
"use strict";

const REFRESH_MS = 1000;
const HISTORY = 60;
let previous = null;        // {time, samples} of the last poll
const history = new Map();  // model key -> recent throughputs

// "name{a="x",b="y"} 12.5" -> {name, labels, value}
function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)$/);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const p of m[3].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    out.push({ name: m[1], labels, value: parseFloat(m[4]) });
  }
  return out;
}

function pick(samples, name, match) {
  return samples.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v));
}
function sum(samples, name, match) { return pick(samples, name, match).reduce((a, s) => a + s.value, 0); }

// Prometheus' histogram_quantile over cumulative buckets [{le, count}].
function quantile(q, buckets) {
  buckets = buckets.filter((b) => isFinite(b.count)).sort((a, b) => a.le - b.le);
  if (!buckets.length) return NaN;
  const total = buckets[buckets.length - 1].count;
  if (total <= 0) return NaN;
  const rank = q * total;
  let lowerLe = 0, lowerCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return lowerLe;
      const inBucket = b.count - lowerCount;
      return inBucket > 0 ? lowerLe + (b.le - lowerLe) * (rank - lowerCount) / inBucket : b.le;
    }
    lowerLe = b.le; lowerCount = b.count;
  }
  return lowerLe;
}

function bucketsOf(samples, base, match) {
  return pick(samples, base + "_bucket", match).map((s) => ({ le: s.labels.le === "+Inf" ? Infinity : parseFloat(s.labels.le), count: s.value }));
}

// Bucket deltas between two polls; the cumulative ones when nothing new came.
function windowBuckets(now, before) {
  if (!before) return now;
  const old = new Map(before.map((b) => [b.le, b.count]));
  const diff = now.map((b) => ({ le: b.le, count: b.count - (old.get(b.le) || 0) }));
  return diff.length && diff[diff.length - 1].count > 0 ? diff : [];
}

const fmt = (v, d = 1) => (isFinite(v) ? v.toFixed(d) : "–");
// Names (models, steps, tracks) go into markup: escaped, whatever they hold.
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

function spark(values) {
  const max = Math.max(1e-9, ...values);
  const pts = values.map((v, i) => `${(i / Math.max(1, HISTORY - 1)) * 140},${24 - (v / max) * 22 - 1}`).join(" ");
  return `<svg class="spark" viewBox="0 0 140 24"><polyline points="${pts}"/></svg>`;
}

function renderModels(samples, dt) {
  const tbody = document.querySelector("#models tbody");
  const models = pick(samples, "streamline_inference_request_success_total", {});
  const rows = [];
  for (const m of models) {
    const match = { model: m.labels.model, version: m.labels.version };
    const key = `${match.model}/${match.version}`;
    const inferences = sum(samples, "streamline_inference_count_total", match);
    const before = previous ? sum(previous.samples, "streamline_inference_count_total", match) : inferences;
    const rate = dt > 0 ? Math.max(0, inferences - before) / dt : 0;
    const h = history.get(key) || [];
    h.push(rate);
    while (h.length > HISTORY) h.shift();
    history.set(key, h);
    const now = bucketsOf(samples, "streamline_inference_request_duration_ms", match);
    const was = previous ? bucketsOf(previous.samples, "streamline_inference_request_duration_ms", match) : null;
    const win = windowBuckets(now, was);
    const failures = sum(samples, "streamline_inference_request_failure_total", match);
    rows.push(`<tr data-model="${esc(match.model)}">
      <td>${esc(match.model)}</td><td>${esc(match.version)}</td>
      <td class="requests">${m.value}</td>
      <td class="throughput">${fmt(rate)}</td>
      <td class="p50">${fmt(quantile(0.5, win), 2)}</td>
      <td class="p99">${fmt(quantile(0.99, win), 2)}</td>
      <td class="queue">${sum(samples, "streamline_inference_pending_requests", match)}</td>
      <td class="failures${failures > 0 ? " bad" : ""}">${failures}</td>
      <td>${spark(h)}</td></tr>`);
  }
  tbody.innerHTML = rows.join("") || `<tr><td colspan="9" class="muted">no model is ready</td></tr>`;
}

function bars(el, entries, unit) {
  const max = Math.max(1e-9, ...entries.map((e) => e.value));
  el.innerHTML = entries.map((e) => `<div class="bar"><span class="label">${esc(e.label)}</span>
    <span class="fill" style="width:${(e.value / max) * 220}px"></span><span>${fmt(e.value, unit ? 1 : 0)}${unit}</span></div>`).join("")
    || `<span class="muted">nothing yet</span>`;
}

function renderBatches(samples) {
  const entries = [];
  for (const m of pick(samples, "streamline_inference_batch_size_count", {})) {
    const match = { model: m.labels.model, version: m.labels.version };
    const b = bucketsOf(samples, "streamline_inference_batch_size", match).sort((x, y) => x.le - y.le);
    let below = 0, lowerLe = 0;
    for (const x of b) {
      const n = x.count - below;
      if (n > 0) entries.push({ label: `${match.model} ${x.le === Infinity ? ">" + lowerLe : "≤" + x.le}`, value: n });
      below = x.count; lowerLe = x.le;
    }
  }
  bars(document.getElementById("batches"), entries, "");
}

function renderInstances(samples, dt) {
  const entries = [];
  for (const s of pick(samples, "streamline_instance_busy_us_total", {})) {
    const old = previous ? sum(previous.samples, "streamline_instance_busy_us_total", s.labels) : s.value;
    const busy = dt > 0 ? Math.min(100, (100 * Math.max(0, s.value - old)) / (dt * 1e6)) : 0;
    entries.push({ label: `${s.labels.model} #${s.labels.instance}`, value: busy });
  }
  bars(document.getElementById("instances"), entries, " %");
}

function renderTrace(doc) {
  const events = doc.traceEvents || [];
  const slices = events.filter((e) => e.ph === "X");
  const info = document.getElementById("trace-info");
  const box = document.getElementById("timeline");
  if (!slices.length) { box.innerHTML = ""; return; }
  const names = new Map(events.filter((e) => e.ph === "M" && e.name === "thread_name").map((e) => [e.tid, e.args.name]));
  const t0 = Math.min(...slices.map((e) => e.ts));
  const t1 = Math.max(...slices.map((e) => e.ts + e.dur));
  const span = Math.max(1e-3, t1 - t0);
  const width = Math.max(400, box.clientWidth - 150);
  const req = slices.find((e) => e.cat === "request");
  info.textContent = req ? `${req.name}: ${fmt(req.dur / 1000, 3)} ms, trace id ${req.args.trace_id}` : "";
  const tids = [...new Set(slices.map((e) => e.tid))].sort((a, b) => a - b);
  box.innerHTML = tids.map((tid) => {
    const inner = slices.filter((e) => e.tid === tid && !(e.cat === "request" && e.tid === 0 && e.name.startsWith("request")))
      .map((e) => `<div class="slice ${esc(e.cat)}" title="${esc(e.name)} ${fmt(e.dur / 1000, 3)} ms"
        style="left:${((e.ts - t0) / span) * width}px;width:${Math.max(1, (e.dur / span) * width)}px">${esc(e.name)}</div>`).join("");
    const track = esc(names.get(tid) || tid);
    return `<div class="track" data-track="${track}"><span class="name">${track}</span>${inner}</div>`;
  }).join("");
}

async function refresh() {
  try {
    const text = await (await fetch("/metrics", { cache: "no-store" })).text();
    const samples = parseMetrics(text);
    const time = performance.now() / 1000;
    const dt = previous ? time - previous.time : 0;
    renderModels(samples, dt);
    renderBatches(samples);
    renderInstances(samples, dt);
    previous = { time, samples };
    document.getElementById("server").textContent = location.host;
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.polls = String((parseInt(document.body.dataset.polls || "0", 10)) + 1);
  } catch (e) {
    document.getElementById("server").textContent = "server unreachable: " + e;
  }
  try {
    renderTrace(await (await fetch("/dashboard/trace.json", { cache: "no-store" })).json());
  } catch (e) { /* no trace yet */ }
}

refresh();
setInterval(refresh, REFRESH_MS);
