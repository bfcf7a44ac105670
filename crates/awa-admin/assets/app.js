// The Awa dashboard: one page over the JSON API (/api/...). No framework,
// no build step. Every value from the server is put into the page as text
// (textContent), never as markup, so a hostile queue name or error message
// stays text.
"use strict";

const TOKEN_KEY = "awa-admin-token";
const REFRESH_MS = 5000;
const STATES = ["available", "scheduled", "retryable", "snoozed", "buffered", "running", "completed",
  "failed", "cancelled", "dead_lettered"];

let info = null;
let timer = null;

function token() { return sessionStorage.getItem(TOKEN_KEY); }

// Element helper: el("td", {class: "num"}, "3", child, ...).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

async function api(path, options) {
  const opts = Object.assign({ headers: {} }, options || {});
  const t = token();
  if (t) opts.headers["Authorization"] = "Bearer " + t;
  if (opts.json !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(opts.json);
  }
  const res = await fetch(path, opts);
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
  if (!res.ok) {
    const message = body && body.error ? body.error.message : ("HTTP " + res.status);
    const err = new Error(message);
    err.status = res.status;
    throw err;
  }
  return body;
}

function canAct() { return info && !info.read_only && !!token(); }

function banner(kind, text) {
  const b = document.getElementById("banner");
  b.replaceChildren();
  if (text) b.append(el("div", { class: "banner " + kind, "data-banner": kind }, text));
}

function age(secs) {
  if (secs === null || secs === undefined) return "–";
  if (secs < 60) return secs.toFixed(1) + " s";
  if (secs < 3600) return (secs / 60).toFixed(1) + " min";
  return (secs / 3600).toFixed(1) + " h";
}

function time(iso) { return iso ? new Date(iso).toLocaleString() : "–"; }

function table(headers, rows, attrs) {
  const head = el("tr", {}, ...headers.map(h => el("th", { class: h.num ? "num" : null, title: h.title || null }, h.label || h)));
  return el("div", { class: "table-wrap" }, el("table", attrs || {}, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// Completed jobs per minute as a small inline SVG line.
function sparkline(points, label) {
  const w = 120, h = 24;
  const max = Math.max(1, ...points);
  const step = points.length > 1 ? w / (points.length - 1) : w;
  const coords = points.map((p, i) => (i * step).toFixed(1) + "," + (h - 2 - (p / max) * (h - 4)).toFixed(1));
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", coords.join(" "));
  svg.append(line);
  return svg;
}

async function act(button, path, json, confirmText) {
  if (confirmText && !window.confirm(confirmText)) return;
  button.disabled = true;
  try {
    await api(path, { method: "POST", json });
    banner("info", "Done: " + path.replace("/api/", ""));
  } catch (e) {
    banner("bad", e.message);
  }
  render();
}

function actionButton(text, path, json, extra) {
  const b = el("button", Object.assign({ type: "button", disabled: !canAct() }, extra || {}), text);
  b.addEventListener("click", () => act(b, path, json, extra && extra["data-confirm"]));
  return b;
}

// ---- views ---------------------------------------------------------------

async function viewQueues() {
  const data = await api("/api/queues");
  const rows = data.queues.map(q => {
    const cell = s => el("td", { class: "num", "data-queue": q.queue, "data-state": s }, q.counts[s]);
    const done = q.throughput.map(m => m.completed);
    return el("tr", { "data-queue-row": q.queue },
      el("td", {}, el("a", { href: "#/jobs?queue=" + encodeURIComponent(q.queue) }, q.queue),
        q.paused ? el("span", { class: "muted", "data-paused": q.queue }, " (paused)") : null),
      cell("available"), cell("scheduled"), cell("retryable"), cell("buffered"), cell("running"),
      cell("completed"),
      cell("failed"), cell("dead_lettered"),
      el("td", { class: "num", "data-oldest": q.queue }, age(q.oldest_available_secs)),
      el("td", { "data-spark": q.queue }, sparkline(done, "completed per minute, last " + data.throughput_minutes + " minutes")),
      el("td", {}, q.paused
        ? actionButton("Resume", "/api/queues/" + encodeURIComponent(q.queue) + "/resume")
        : actionButton("Pause", "/api/queues/" + encodeURIComponent(q.queue) + "/pause")));
  });
  const num = label => ({ label, num: true });
  return [el("h2", {}, "Queues"),
    rows.length ? table(["Queue", num("Available"), num("Scheduled"), num("Retryable"),
      Object.assign(num("Buffered"), { title: "claimed by a worker, waiting for a free slot: not started" }),
      Object.assign(num("Running"), { title: "claimed and started" }),
      num("Completed"), num("Failed"), num("DLQ"), num("Oldest"), "Done/min (" + data.throughput_minutes + " min)", ""],
      rows, { id: "queues" }) : el("p", { class: "muted" }, "No queues yet.")];
}

function params() {
  const hash = location.hash || "";
  const i = hash.indexOf("?");
  return new URLSearchParams(i < 0 ? "" : hash.slice(i + 1));
}

// "host:pid · 1.2 s", or the instance id when the registry forgot it.
function holderText(h) {
  if (!h) return "";
  if (h.host === null || h.host === undefined) return h.instance_id + " (gone)";
  return h.host + ":" + h.pid + " · " + age(h.heartbeat_age_secs);
}

// A bulk action over the current filter: ask the server how many jobs
// match (dry run), show that count in the confirmation, then act.
function bulkButton(text, path, selection, verb, extra) {
  const b = el("button", Object.assign({ type: "button", disabled: !canAct() }, extra || {}), text);
  b.addEventListener("click", async () => {
    b.disabled = true;
    try {
      const dry = await api(path, { method: "POST", json: Object.assign({}, selection, { dry_run: true }) });
      if (dry.matched === 0) { banner("info", "No jobs match: nothing to " + verb + "."); return; }
      const what = dry.matched + " " + (selection.state || "unfinished") + " job" + (dry.matched === 1 ? "" : "s") +
        " of queue " + selection.queue;
      if (!window.confirm(verb.charAt(0).toUpperCase() + verb.slice(1) + " " + what + "?")) return;
      const done = await api(path, { method: "POST", json: selection });
      const n = (done.retried || done.cancelled || []).length;
      banner("info", "Done: " + verb + " " + n + " of " + what + (done.kept && done.kept.length
        ? "; " + done.kept.length + " kept (their unique key is held by a newer job)" : ""));
    } catch (e) {
      banner("bad", e.message);
    } finally {
      b.disabled = !canAct();
      render();
    }
  });
  return b;
}

async function viewJobs() {
  const p = params();
  const query = new URLSearchParams();
  for (const k of ["queue", "state", "kind", "args_contains", "before"]) if (p.get(k)) query.set(k, p.get(k));
  query.set("limit", "50");
  const data = await api("/api/jobs?" + query);
  const input = (name, label, extra) => el("label", {}, label, el("input", Object.assign({ name, value: p.get(name) || "" }, extra || {})));
  const state = el("select", { name: "state" }, el("option", { value: "" }, "any"),
    ...STATES.map(s => el("option", { value: s, selected: p.get("state") === s }, s)));
  const form = el("form", { class: "filters", id: "job-filters" }, input("queue", "Queue"),
    el("label", {}, "State", state), input("kind", "Kind"),
    input("args_contains", "Args contain", { placeholder: '{"user": 42}' }),
    el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", ev => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, v);
    location.hash = "#/jobs?" + q;
  });
  const rows = data.jobs.map(j => el("tr", { "data-job-id": j.id },
    el("td", { class: "num" }, el("a", { href: "#/job/" + j.id }, j.id)),
    el("td", {}, j.queue), el("td", {}, j.kind), el("td", { "data-job-state": j.id }, j.state),
    el("td", { class: "num" }, j.attempt + "/" + j.max_attempts), el("td", {}, time(j.at)),
    el("td", { "data-job-holder": j.id }, holderText(j.holder)),
    el("td", { class: "wrap" }, j.last_error || "")));
  const out = [el("h2", {}, "Jobs"), form];
  // Bulk actions act on the filter as it is applied (one queue at least).
  if (p.get("queue")) {
    const selection = { queue: p.get("queue") };
    for (const k of ["state", "kind"]) if (p.get(k)) selection[k] = p.get(k);
    let argsOk = true;
    if (p.get("args_contains")) {
      try { selection.args_contains = JSON.parse(p.get("args_contains")); } catch (_) { argsOk = false; }
    }
    const st = selection.state;
    const bulk = [];
    if (argsOk && (st === "failed" || st === "cancelled")) {
      bulk.push(bulkButton("Retry all matching", "/api/jobs/retry", selection, "retry", { "data-action": "retry-matching" }));
    }
    if (argsOk && !["completed", "failed", "cancelled", "dead_lettered"].includes(st)) {
      bulk.push(bulkButton("Cancel all matching", "/api/jobs/cancel", selection, "cancel", { class: "danger", "data-action": "cancel-matching" }));
    }
    if (bulk.length) out.push(el("div", { class: "actions", id: "bulk-actions" }, ...bulk));
  }
  out.push(rows.length ? table([{ label: "ID", num: true }, "Queue", "Kind", "State", { label: "Attempt", num: true }, "At", "Holder", "Last error"], rows, { id: "jobs" })
      : el("p", { class: "muted", id: "no-jobs" }, "No jobs match."));
  if (data.next_before) {
    const q = new URLSearchParams(query);
    q.delete("limit");
    q.set("before", data.next_before);
    out.push(el("p", {}, el("a", { href: "#/jobs?" + q, id: "next-page" }, "Older jobs →")));
  }
  return out;
}

async function viewJob(id) {
  const data = await api("/api/jobs/" + encodeURIComponent(id));
  const j = data.job;
  const kv = (k, v) => [el("dt", {}, k), el("dd", { "data-field": k }, v)];
  const fields = [kv("id", j.id), kv("queue", j.queue), kv("kind", j.kind), kv("state", j.state),
    kv("attempt", j.attempt + " of " + j.max_attempts), kv("priority", j.priority + " (1 runs first, 4 last)"),
    kv("run lease", j.run_lease), kv("created", time(j.created_at)), kv("at", time(j.at)),
    kv("last error", j.last_error || "–"),
    kv("args", el("pre", {}, JSON.stringify(j.args, null, 2))),
    kv("metadata", el("pre", {}, j.metadata ? JSON.stringify(j.metadata, null, 2) : "–"))];
  if (data.progress) {
    const pr = data.progress;
    fields.push(...kv("progress", (pr.percent === null ? "?" : pr.percent + "%") + (pr.message ? " – " + pr.message : "")));
    fields.push(...kv("checkpoint", el("pre", {}, pr.checkpoint ? JSON.stringify(pr.checkpoint, null, 2) : "–")));
  }
  if (j.holder) {
    const h = j.holder;
    fields.push(...kv("holder", h.host ? h.host + " pid " + h.pid + " (" + h.instance_id + "), last heartbeat " + age(h.heartbeat_age_secs) + " ago"
      : h.instance_id + " (no longer registered)"));
  }
  const terminal = ["completed", "failed", "cancelled", "dead_lettered"].includes(j.state);
  const actions = [];
  if (!terminal) actions.push(actionButton("Cancel job", "/api/jobs/" + j.id + "/cancel", undefined, { class: "danger", "data-action": "cancel", "data-confirm": "Cancel job " + j.id + "?" }));
  if (j.state === "failed" || j.state === "cancelled") actions.push(actionButton("Retry job", "/api/jobs/" + j.id + "/retry", undefined, { "data-action": "retry", "data-confirm": "Put job " + j.id + " back as fresh work?" }));
  if (j.state === "dead_lettered") actions.push(actionButton("Retry from the DLQ", "/api/dlq/retry", { job_id: j.id }, { "data-action": "retry" }));
  return [el("h2", {}, "Job " + j.id), el("dl", { class: "kv", id: "job-detail" }, ...fields.flat()),
    el("div", { class: "actions" }, ...actions),
    el("h2", {}, "Attempts (" + (j.attempts || []).length + ")"), timeline(j.attempts || [])];
}

// The attempts of a job, oldest first: number, outcome, when and how long,
// where, and the error.
function timeline(attempts) {
  if (!attempts.length) return el("p", { class: "muted", id: "attempts" }, "Not run yet.");
  const secs = a => a.started_at && a.ended_at ? ((new Date(a.ended_at) - new Date(a.started_at)) / 1000).toFixed(3) + " s" : null;
  return el("ol", { class: "timeline", id: "attempts" }, ...attempts.map(a => {
    const where = a.runtime ? (a.runtime.host ? a.runtime.host + " pid " + a.runtime.pid : "runtime " + a.runtime.id) : null;
    const when = a.started_at ? time(a.started_at) + (a.ended_at ? " → " + time(a.ended_at) : " → running") : "ended " + time(a.ended_at);
    return el("li", { class: "attempt outcome-" + a.outcome, "data-attempt": a.attempt, "data-outcome": a.outcome },
      el("div", { class: "attempt-head" }, el("strong", {}, "#" + a.attempt + " " + a.outcome),
        el("span", { class: "muted" }, " " + when + (secs(a) ? " (" + secs(a) + ")" : "") + (where ? " on " + where : ""))),
      a.error ? el("pre", { class: "attempt-error", "data-attempt-error": a.attempt }, a.error) : null);
  }));
}

async function viewDlq() {
  const data = await api("/api/dlq?limit=500");
  const rows = data.entries.map(e => el("tr", { "data-dlq-id": e.job_id },
    el("td", { class: "num" }, el("a", { href: "#/job/" + e.job_id }, e.job_id)),
    el("td", {}, e.queue), el("td", {}, e.kind), el("td", {}, time(e.dead_at)),
    el("td", { class: "wrap" }, e.last_error || ""),
    el("td", {}, el("div", { class: "actions" },
      actionButton("Retry", "/api/dlq/retry", { job_id: e.job_id }, { "data-action": "retry" }),
      actionButton("Purge", "/api/dlq/purge", { job_id: e.job_id }, { class: "danger", "data-action": "purge", "data-confirm": "Delete dead letter " + e.job_id + " for good?" })))));
  const out = [el("h2", {}, "Dead-letter queue (" + data.entries.length + ")")];
  if (rows.length) {
    out.push(el("div", { class: "actions" },
      actionButton("Retry all", "/api/dlq/retry", { all: true }, { "data-action": "retry-all" }),
      actionButton("Purge all", "/api/dlq/purge", { all: true }, { class: "danger", "data-action": "purge-all", "data-confirm": "Delete every dead letter for good?" })));
    out.push(table([{ label: "ID", num: true }, "Queue", "Kind", "Dead since", "Last error", ""], rows, { id: "dlq" }));
  } else {
    out.push(el("p", { class: "muted", id: "dlq-empty" }, "No dead letters."));
  }
  return out;
}

async function viewStorage() {
  const s = await api("/api/storage");
  const out = [el("h2", {}, "Storage")];
  if (s.pinned_alert) {
    out.push(el("div", { class: "banner bad", id: "pinned-alert" },
      el("strong", {}, "Reclamation is held back. "), s.pinned_alert.message));
  }
  const m = s.maintenance;
  const leader = m.leader && m.leader.holding
    ? m.leader.host + " pid " + m.leader.pid + " since " + time(m.leader.since) : "none";
  const pinned = m.pinned_snapshot
    ? "backend pid " + m.pinned_snapshot.pid + ", open " + age(m.pinned_snapshot.age_secs) +
      (m.pinned_snapshot.query ? ", running " + m.pinned_snapshot.query : "") : "none";
  out.push(el("dl", { class: "kv", id: "storage-summary" },
    el("dt", {}, "schema version"), el("dd", {}, s.schema_version === null ? "not migrated" : s.schema_version),
    el("dt", {}, "transition"), el("dd", {}, s.transition ? s.transition.state + " (active " + s.transition.active_schema + ")" : "–"),
    el("dt", {}, "maintenance leader"), el("dd", { "data-field": "leader" }, leader),
    el("dt", {}, "oldest snapshot"), el("dd", { "data-field": "pinned" }, pinned)));
  for (const sub of s.substrates) {
    out.push(el("h2", {}, "Substrate " + sub.schema + (sub.active ? " (active)" : "")));
    const rows = sub.rings.map(r => {
      const slots = sub.slot_rows.filter(x => x.ring === r.ring && x.live_rows > 0)
        .map(x => x.slot + ":" + x.live_rows).join(" ");
      const outcomes = sub.last_outcomes.filter(o => o.ring === r.ring)
        .map(o => o.task + " " + o.outcome + (o.detail ? " (" + o.detail + ")" : "") + " at " + time(o.at)).join("; ");
      return el("tr", { "data-ring": r.ring },
        el("td", {}, r.ring), el("td", { class: "num", "data-ring-slot": r.ring }, r.slot),
        el("td", { class: "num" }, r.generation), el("td", { class: "wrap" }, slots || "–"),
        el("td", { class: "wrap", "data-ring-outcomes": r.ring }, outcomes || "–"));
    });
    out.push(table(["Ring", { label: "Current slot", num: true }, { label: "Generation", num: true }, "Rows per slot", "Last rotate / prune"], rows, { "data-substrate": sub.schema }));
    out.push(el("p", { class: "muted" }, "Parked attempts: " + sub.parked_attempts));
  }
  return out;
}

async function viewRuntimes() {
  const [r, c] = await Promise.all([api("/api/runtimes"), api("/api/cron")]);
  const rows = r.runtimes.map(x => el("tr", { "data-runtime": x.instance_id },
    el("td", {}, x.role), el("td", {}, x.host), el("td", { class: "num" }, x.pid),
    el("td", { class: "wrap" }, x.queues.join(", ") || "–"), el("td", {}, age(x.seen_secs_ago) + " ago"),
    el("td", {}, time(x.started_at))));
  // A schedule the leader cannot fire shows why (it is skipped; the
  // others keep firing) until it fires again or is changed.
  const crons = c.schedules.map(x => el("tr", { "data-cron": x.name },
    el("td", {}, x.name), el("td", {}, x.cron + " " + x.timezone), el("td", {}, x.queue + " / " + x.kind),
    el("td", {}, x.enabled ? "enabled" : "paused"), el("td", {}, time(x.next_fire)),
    el("td", { class: "wrap", "data-cron-error": x.name },
      x.error ? "cannot fire since " + time(x.error_since) + ": " + x.error : "–")));
  return [el("h2", {}, "Runtimes (" + r.runtimes.length + ")"),
    rows.length ? table(["Role", "Host", { label: "PID", num: true }, "Queues", "Last heartbeat", "Started"], rows, { id: "runtimes" })
      : el("p", { class: "muted" }, "No live workers."),
    el("h2", {}, "Cron schedules (" + c.schedules.length + ")"),
    crons.length ? table(["Name", "Schedule", "Queue / kind", "State", "Next fire", "Error"], crons, { id: "cron" })
      : el("p", { class: "muted" }, "No schedules.")];
}

// ---- shell ---------------------------------------------------------------

function route() {
  const hash = (location.hash || "#/queues").slice(2).split("?")[0];
  const [name, arg] = hash.split("/");
  return { name: name || "queues", arg };
}

function updateTokenControls() {
  const form = document.getElementById("token-form");
  const forget = document.getElementById("token-forget");
  const wants = info && !info.read_only;
  form.hidden = !wants || !!token();
  forget.hidden = !wants || !token();
}

// One render at a time; a request for another while one runs (a click, a
// hash change) renders again right after it.
let rendering = false;
let again = false;
async function render() {
  if (rendering) { again = true; return; }
  rendering = true;
  const { name, arg } = route();
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.view === name || (name === "job" && a.dataset.view === "jobs"));
  }
  const main = document.getElementById("main");
  try {
    if (!info) info = await api("/api/info");
    updateTokenControls();
    const views = { queues: viewQueues, jobs: viewJobs, job: () => viewJob(arg), dlq: viewDlq,
      storage: viewStorage, runtimes: viewRuntimes };
    const nodes = await (views[name] || viewQueues)();
    // Keep a filter field the user is typing in.
    if (!(document.activeElement && main.contains(document.activeElement) && document.activeElement.tagName === "INPUT")) {
      main.replaceChildren(...nodes);
      main.dataset.view = name;
    }
    if (info.read_only) banner("warn", "Read-only: this server has no AWA_ADMIN_TOKEN, so actions are off.");
    else if (!token()) banner("info", "Enter the admin token to enable actions.");
    else if (document.querySelector("#banner .bad") === null && document.querySelector("#banner .info") === null) banner("", "");
    document.getElementById("updated").textContent = "Updated " + new Date().toLocaleTimeString() + " · refreshes every " + REFRESH_MS / 1000 + " s";
  } catch (e) {
    if (e.status === 401) {
      info = info || { read_only: false };
      updateTokenControls();
      document.getElementById("token-form").hidden = false;
      banner("bad", "This server needs the admin token: " + e.message);
    } else {
      banner("bad", e.message);
    }
  } finally {
    rendering = false;
    if (again) { again = false; render(); }
  }
}

function start() {
  document.getElementById("token-form").addEventListener("submit", ev => {
    ev.preventDefault();
    const input = document.getElementById("token-input");
    if (input.value) sessionStorage.setItem(TOKEN_KEY, input.value);
    input.value = "";
    info = null;
    banner("", "");
    render();
  });
  document.getElementById("token-forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    render();
  });
  window.addEventListener("hashchange", () => { banner("", ""); render(); });
  render();
  timer = setInterval(render, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", start);
