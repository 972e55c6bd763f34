// The ataman dashboard (docs/DASHBOARD.md): reads the node's JSON
// endpoints every REFRESH_MS and draws one panel per question. Every
// fetch goes to this page's own origin; a token, when the node needs one,
// is kept in sessionStorage and sent as "Authorization: Bearer", never in
// a URL. A panel whose fetch fails shows why and keeps its last figures,
// greyed; the other panels go on.
"use strict";

const REFRESH_MS = 2000;
const FETCH_TIMEOUT_MS = 5000;
const SPARK_POINTS = 120;
const TOKEN_KEY = "ataman-token";

// The last copy figures seen, for the move's rate: {at_ms, bytes, keys}.
let lastCopy = null;
let copyRate = null;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function table(headers, rows) {
  const t = el("table");
  const head = el("tr");
  for (const h of headers) head.appendChild(el("th", h.text || h, h.num ? "num" : ""));
  t.appendChild(head);
  for (const row of rows) {
    const tr = el("tr");
    for (const [i, cell] of row.entries()) {
      if (cell instanceof Node) {
        const td = el("td", null, headers[i].num ? "num" : "");
        td.appendChild(cell);
        tr.appendChild(td);
      } else {
        tr.appendChild(el("td", cell, headers[i].num ? "num" : ""));
      }
    }
    t.appendChild(tr);
  }
  return t;
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

function micros(us) {
  if (us === null || us === undefined) return "-";
  if (us < 1000) return "\u2264" + us + " \u00b5s";
  if (us < 1000000) return "\u2264" + (us / 1000).toFixed(us < 10000 ? 1 : 0) + " ms";
  return "\u2264" + (us / 1000000).toFixed(1) + " s";
}

function seconds(s) {
  if (!isFinite(s)) return "-";
  if (s < 90) return Math.round(s) + " s";
  if (s < 5400) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

// Why a fetch failed, said for a person.
class FetchError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

async function getJson(path) {
  const headers = { "Accept": "application/json" };
  const t = token();
  if (t) headers["Authorization"] = "Bearer " + t;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), FETCH_TIMEOUT_MS);
  let answer;
  try {
    answer = await fetch(path, { headers, signal: ctl.signal, cache: "no-store" });
  } catch (e) {
    throw new FetchError(path + ": no answer (" + (e.name === "AbortError" ? "timed out" : e.message) + ")", 0);
  } finally {
    clearTimeout(timer);
  }
  if (!answer.ok) {
    const text = (await answer.text()).trim().slice(0, 200);
    throw new FetchError(path + " answered " + answer.status + (text ? ": " + text : ""), answer.status);
  }
  return answer.json();
}

function askToken(message, bad) {
  const form = document.getElementById("token-form");
  const msg = document.getElementById("token-message");
  msg.textContent = message;
  msg.className = bad ? "bad" : "";
  form.hidden = false;
}

// Draws `panel` from `path`'s JSON with `draw`; on failure says why.
async function panel(id, path, draw) {
  const body = document.getElementById(id + "-body");
  const error = document.getElementById(id + "-error");
  try {
    const doc = await getJson(path);
    const fresh = el("div");
    draw(fresh, doc);
    body.replaceChildren(...fresh.childNodes);
    body.classList.remove("stale");
    error.textContent = "";
    return true;
  } catch (e) {
    body.classList.add("stale");
    if (e.status === 401) {
      error.textContent = token() ? "the token was refused (401): enter another" : "this node needs a token (401)";
      askToken(token() ? "The token was refused: it is unknown to this node." : "This node needs a token with the read role.", !!token());
    } else if (e.status === 403) {
      error.textContent = "the token lacks the read role (403)";
      askToken("This token lacks the read role.", true);
    } else {
      error.textContent = e.message || String(e);
    }
    return false;
  }
}

function drawHealth(out, h) {
  const status = el("p");
  status.appendChild(el("strong", h.status, h.status === "ok" ? "ok" : h.status === "degraded" ? "warn" : "bad"));
  status.appendChild(document.createTextNode(" \u00b7 quorum " + h.quorum + " \u00b7 " + h.answering + " of " + h.members + " members answering \u00b7 R=" + h.replication_factor));
  out.appendChild(status);
  if (h.transition) out.appendChild(el("p", "transition: reads on version " + h.transition.from + ", writes on " + h.transition.to, "warn"));
  out.appendChild(table(["node", "answering"], (h.nodes || []).map(n =>
    [n.url, el("span", n.answering === null ? "not called yet" : n.answering ? "yes" : "no", n.answering ? "ok" : "bad")])));
}

function drawMembers(out, c) {
  document.getElementById("served-by").textContent = "served by " + c.self;
  out.appendChild(el("p", "layout version " + c.layout_version + " (reads on " + c.read_version + ")"));
  out.appendChild(table(["node", "member", "link", {text: "sent", num: 1}, {text: "failed", num: 1}], (c.nodes || []).map(n => [
    n.url + (n.url === c.self ? " (this node)" : ""),
    n.member ? "yes" : "no",
    el("span", n.state, n.state === "up" || n.state === "self" ? "ok" : "warn"),
    n.sent, n.failed])));
  const hints = el("div");
  hints.id = "hints";
  hints.appendChild(el("h3", "hinted handoff"));
  hints.appendChild(table(["for node", {text: "hints pending", num: 1}, {text: "bytes", num: 1}, {text: "delivered", num: 1}],
    (c.nodes || []).map(n => [n.url, n.hints_pending, bytes(n.hint_bytes), n.hints_delivered])));
  document.getElementById("ae-hints").replaceChildren(hints);
}

function sum(list, field) {
  return (list || []).reduce((a, m) => a + (m[field] || 0), 0);
}

function drawLayout(out, l) {
  const v = el("p");
  v.appendChild(el("strong", "version " + l.version, ""));
  v.id = "layout-version";
  v.dataset.version = l.version;
  v.appendChild(document.createTextNode(" \u00b7 R=" + l.replication_factor + " \u00b7 " + (l.nodes || []).length + " nodes \u00b7 " +
    (l.settled ? "settled" : "moving to version " + Math.max(l.next || 0, ...(l.live_versions || [l.version])) +
      " (live versions " + (l.live_versions || []).join(", ") + ")")));
  out.appendChild(v);
  const moving = l.moving || [];
  const toCopy = sum(moving, "bytes_to_copy"), copied = sum(moving, "bytes_copied");
  const keysToCopy = sum(moving, "keys_to_copy"), keysCopied = sum(moving, "keys_copied");
  const now = Date.now();
  if (lastCopy && now > lastCopy.at_ms && copied >= lastCopy.bytes) {
    const rate = (copied - lastCopy.bytes) * 1000 / (now - lastCopy.at_ms);
    copyRate = copyRate === null ? rate : 0.5 * copyRate + 0.5 * rate;
  }
  lastCopy = { at_ms: now, bytes: copied };
  if (l.settled) { copyRate = null; return; }
  const move = el("div");
  move.id = "move";
  const left = Math.max(toCopy - copied, 0);
  const pct = toCopy > 0 ? Math.min(100, 100 * copied / toCopy) : (l.settled ? 100 : 0);
  move.dataset.keysCopied = keysCopied;
  move.dataset.keysToCopy = keysToCopy;
  move.appendChild(el("p", "move: " + keysCopied + " of " + keysToCopy + " keys, " + bytes(copied) + " of " + bytes(toCopy) + " copied (" + pct.toFixed(0) + "%)"));
  const bar = el("div", null, "bar");
  const fill = el("div");
  fill.style.width = pct.toFixed(1) + "%";
  bar.appendChild(fill);
  move.appendChild(bar);
  const rate = copyRate === null ? "measuring" : bytes(copyRate) + "/s";
  const eta = copyRate > 0 ? seconds(left / copyRate) : (left === 0 ? "0 s" : "-");
  const speed = el("p", "rate " + rate + " \u00b7 time left " + eta);
  speed.id = "move-rate";
  speed.dataset.bytesPerS = copyRate === null ? "" : String(copyRate);
  speed.dataset.secondsLeft = copyRate > 0 ? String(left / copyRate) : "";
  move.appendChild(speed);
  if (moving.length) {
    move.appendChild(table(["into node", {text: "keys copied", num: 1}, {text: "of", num: 1}, {text: "bytes copied", num: 1}, {text: "of", num: 1}],
      moving.map(m => [m.url, m.keys_copied, m.keys_to_copy, bytes(m.bytes_copied), bytes(m.bytes_to_copy)])));
  }
  for (const w of l.waiting_for || []) move.appendChild(el("p", "waiting for " + w.node + ": " + w.reason, "warn"));
  out.appendChild(move);
}

function spark(values) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 " + SPARK_POINTS + " 28");
  svg.setAttribute("preserveAspectRatio", "none");
  const max = Math.max(1, ...values);
  const start = SPARK_POINTS - values.length;
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", values.map((v, i) => (start + i) + "," + (27 - 26 * v / max).toFixed(1)).join(" "));
  svg.appendChild(line);
  return svg;
}

function drawRates(out, r) {
  const rows = [], disks = [];
  for (const n of r.nodes || []) {
    if (n.error) {
      rows.push([n.node, el("span", "no answer: " + n.error, "bad"), "", "", "", "", "", ""]);
      disks.push([n.node, el("span", "no answer", "bad"), "", "", "", ""]);
      continue;
    }
    const col = name => n.columns.indexOf(name);
    const kinds = n.columns.filter(c => c.endsWith("_per_s")).map(col);
    const totals = n.points.map(p => kinds.reduce((a, k) => a + p[k], 0));
    const last = n.points[n.points.length - 1];
    const total = totals.length ? totals[totals.length - 1] : 0;
    const cell = el("span", total.toFixed(1));
    cell.className = "rate";
    cell.dataset.perS = total;
    rows.push([n.node, cell,
      last ? last[col("get_per_s")].toFixed(1) : "-", last ? last[col("put_per_s")].toFixed(1) : "-",
      last ? last[col("resp_per_s")].toFixed(1) : "-",
      micros(last ? last[col("p50_us")] : null), micros(last ? last[col("p99_us")] : null),
      spark(totals.slice(-SPARK_POINTS))]);
    const d = n.disk;
    const free = el("span", d.free_bytes === null || d.free_bytes === undefined ? "unknown" :
      bytes(d.free_bytes) + " of " + bytes(d.total_bytes) + " (" + (100 * d.free_bytes / Math.max(1, d.total_bytes)).toFixed(0) + "%)",
      d.free_bytes !== null && d.free_bytes < 0.1 * d.total_bytes ? "bad" : "");
    free.className += " free";
    free.dataset.freeBytes = d.free_bytes === null || d.free_bytes === undefined ? "" : String(d.free_bytes);
    const wal = el("span", bytes(d.wal_bytes), "wal");
    wal.dataset.walBytes = d.wal_bytes === undefined ? "" : String(d.wal_bytes);
    disks.push([n.node, bytes(d.sstable_bytes), bytes(d.memtable_bytes), wal, bytes(d.hint_bytes), free]);
  }
  const of = ((r.nodes || []).find(n => n.percentiles_of) || {}).percentiles_of || [];
  const said = of.map(w => w === "http_entity" ? "HTTP entity requests" : w === "resp_key_command" ? "RESP commands on keys" : w);
  const note = el("p", "p50 and p99 over the last second, of " + (said.length ? said.join(" and ") : "entity requests") +
    " (a histogram bucket's upper bound)");
  note.id = "percentiles-of";
  out.appendChild(note);
  out.appendChild(table(["node", {text: "requests/s", num: 1}, {text: "get/s", num: 1}, {text: "put/s", num: 1}, {text: "resp/s", num: 1},
    {text: "p50", num: 1}, {text: "p99", num: 1}, "last " + SPARK_POINTS + " s"], rows));
  const disk = document.getElementById("disk-body");
  disk.replaceChildren(table(["node", {text: "sstables", num: 1}, {text: "memtables", num: 1}, {text: "WAL", num: 1},
    {text: "hints", num: 1}, {text: "free on the data directory's file system", num: 1}], disks));
  disk.classList.remove("stale");
}

function drawHot(out, h) {
  out.appendChild(el("p", h.samples + " samples over " + h.window_ms + " ms (1 in " + h.sample_every + " requests) \u00b7 no unlisted key above " + (100 * h.unlisted_share_max).toFixed(2) + "%"));
  for (const n of h.nodes || []) if (n.error) out.appendChild(el("p", n.node + " did not answer: " + n.error, "bad"));
  out.appendChild(table(["key", {text: "share", num: 1}, {text: "\u00b1", num: 1}, "replicas"], (h.keys || []).map(k =>
    [el("code", k.key, "hot-key"), (100 * k.share).toFixed(2) + "%", (100 * k.share_error).toFixed(2) + "%", (k.replicas || []).join(" ")])));
}

function drawSlow(out, s) {
  const took = us => micros(us).replace("\u2264", "");
  for (const n of s.nodes || []) {
    if (n.error) { out.appendChild(el("p", n.node + " did not answer: " + n.error, "bad")); continue; }
    out.appendChild(el("p", n.node + ": " + n.len + " of at most " + n.len_max + " entries \u00b7 " +
      (n.threshold_us < 0 ? "recording off" : "threshold " + took(n.threshold_us))));
  }
  out.appendChild(table(["node", "id", "when", {text: "took", num: 1}, "command", "key", "client", {text: "queue", num: 1}, "replicas (answer after asked)", "slowest"],
    (s.entries || []).slice(0, 20).map(e => {
      const st = e.stages || {};
      return [el("span", e.node, "slow-node"), e.id, new Date(e.unix_time_s * 1000).toLocaleTimeString(), took(e.duration_us), e.command,
        el("code", e.key + (e.key_truncated ? "\u2026" : ""), "slow-key"), e.client,
        st.queue_us === null || st.queue_us === undefined ? "-" : took(st.queue_us),
        (st.replicas || []).map(r => r.node + " " + took(r.answer_us)).join(", "),
        st.slowest_replica || "-"];
    })));
}

function drawRepair(out, a) {
  const last = a.last;
  const p = el("p");
  p.appendChild(el("strong", a.state, a.state === "running" ? "warn" : "ok"));
  p.appendChild(document.createTextNode(" \u00b7 round " + a.round + (a.refilling ? " \u00b7 refilling" : "") +
    (last ? " \u00b7 last round " + (last.ok ? "ok" : "failed") + ", " + ((last.finished_ms - last.started_ms) / 1000).toFixed(1) + " s" : " \u00b7 no round yet")));
  out.appendChild(p);
  if (last) {
    out.appendChild(table(["peer", "ok", {text: "differing", num: 1}, {text: "fetched", num: 1}, {text: "pushed", num: 1}],
      last.peers.map(q => [q.url, el("span", q.ok ? "yes" : q.error, q.ok ? "ok" : "bad"), q.buckets_differing, q.keys_fetched, q.keys_pushed])));
  }
  const hints = el("div");
  hints.id = "ae-hints";
  const old = document.getElementById("ae-hints");
  if (old) hints.replaceChildren(...old.childNodes);
  out.appendChild(hints);
}

async function refresh() {
  await Promise.all([
    panel("health", "/v0/cluster/health", drawHealth),
    panel("ae", "/v0/repair", drawRepair),
  ]);
  await Promise.all([
    panel("members", "/v0/cluster", drawMembers),
    panel("layout", "/v0/layout", drawLayout),
    panel("rates", "/v0/recent?cluster=1", drawRates).then(ok => {
      if (!ok) {
        document.getElementById("disk-error").textContent = document.getElementById("rates-error").textContent;
        document.getElementById("disk-body").classList.add("stale");
      } else {
        document.getElementById("disk-error").textContent = "";
      }
    }),
    panel("hot", "/v0/hotkeys?cluster=1&limit=10", drawHot),
    panel("slow", "/v0/slowlog?cluster=1&limit=20", drawSlow),
  ]);
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
}

async function loop() {
  try {
    await refresh();
  } finally {
    setTimeout(loop, REFRESH_MS);
  }
}

function start() {
  const form = document.getElementById("token-form");
  const forget = document.getElementById("forget");
  forget.hidden = !token();
  form.addEventListener("submit", ev => {
    ev.preventDefault();
    const t = document.getElementById("token").value.trim();
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    document.getElementById("token").value = "";
    form.hidden = true;
    forget.hidden = !token();
    refresh();
  });
  forget.addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    forget.hidden = true;
    refresh();
  });
  loop();
}

document.addEventListener("DOMContentLoaded", start);
