// The Awa dashboard: one page over the JSON API (/api/...). No framework,
// no build step. Every value from the server is put into the page as text
// (textContent), never as markup, so a hostile queue name or error message
// stays text.
//
// How it is put together, so a new control fits in:
// - one view function per page (viewQueues, viewJobs, ...), returning nodes;
// - table() is the only table: it labels every cell with its column, which
//   is what lets style.css turn rows into cards on a narrow screen (the one
//   layout rule, in style.css);
// - action() is the only thing that renders an action button (token rule,
//   confirmation, busy state, result banner); actions() lays a row of them
//   out so they wrap instead of overflowing;
// - time() is the only rendering of a timestamp (local time with its zone).
"use strict";

const TOKEN_KEY = "awa-admin-token";
const REFRESH_MS = 5000;
const STATES = ["available", "scheduled", "retryable", "snoozed", "buffered", "running", "completed",
  "failed", "cancelled", "dead_lettered"];
const CHART_MINUTES = 60;

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

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
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
  if (secs < 1) return (secs * 1000).toFixed(0) + " ms";
  if (secs < 60) return secs.toFixed(1) + " s";
  if (secs < 3600) return (secs / 60).toFixed(1) + " min";
  return (secs / 3600).toFixed(1) + " h";
}

// ---- time: local, with its zone -------------------------------------------

const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
const TIME_FORMAT = new Intl.DateTimeFormat("en-US", {
  year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
  second: "2-digit", hourCycle: "h23", timeZoneName: "short",
});

// "2026-01-31 14:05:09 GMT+1": the browser's zone, named, so two people in
// different places read the same instant; the UTC instant is the tooltip.
function timeText(date) {
  const p = {};
  for (const part of TIME_FORMAT.formatToParts(date)) p[part.type] = part.value;
  return p.year + "-" + p.month + "-" + p.day + " " + p.hour + ":" + p.minute + ":" + p.second +
    " " + p.timeZoneName;
}

function time(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  // A stored value outside the times Awa can show (infinity, a year past
  // 262143: the API gives it raw, issue 36) is shown as it is, flagged.
  if (isNaN(d.getTime())) {
    return el("time", { class: "raw", "data-raw": "", title: "stored value outside the times Awa can show" },
      iso + " ⚠");
  }
  return el("time", { datetime: iso, title: d.toISOString() }, timeText(d));
}

// ---- tables: the one table, cards on a narrow screen ----------------------

// headers: strings or {label, num}; rows: <tr> elements of <td>s. Each cell
// gets its column's label (data-label), which style.css shows beside the
// value when rows become cards.
function table(headers, rows, attrs) {
  const cols = headers.map(h => typeof h === "string" ? { label: h } : h);
  const head = el("tr", {}, ...cols.map(c => el("th", { class: c.num ? "num" : null, scope: "col", title: c.title || null }, c.label)));
  for (const row of rows) {
    [...row.children].forEach((cell, i) => {
      if (cols[i] && !cell.hasAttribute("data-label")) cell.setAttribute("data-label", cols[i].label);
    });
  }
  return el("div", { class: "table-wrap" },
    el("table", attrs || {}, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// ---- actions: the one action button ---------------------------------------

// spec: {label, path, body, name (data-action), danger, confirm, done}.
// Disabled until the token is given; asks before destructive ones; says
// what happened in the banner; re-renders the page afterwards.
function action(spec) {
  const b = el("button", {
    type: "button", class: "action" + (spec.danger ? " danger" : ""),
    "data-action": spec.name, disabled: !canAct(),
    title: canAct() ? null : "needs the admin token",
  }, spec.label);
  b.addEventListener("click", async () => {
    if (spec.confirm && !window.confirm(spec.confirm)) return;
    b.disabled = true;
    try {
      const result = await api(spec.path, { method: "POST", json: spec.body });
      banner("info", spec.done ? spec.done(result) : "Done: " + spec.label.toLowerCase());
    } catch (e) {
      banner("bad", e.message);
    }
    render();
  });
  return b;
}

function actions(...buttons) {
  return el("div", { class: "actions" }, ...buttons.filter(Boolean));
}

// ---- charts ---------------------------------------------------------------

// One chart of the last hour: a bar per minute, scaled to the largest
// value, with its summary above it. A minute without a value has no bar.
function chart(spec) {
  const values = spec.points.map(p => spec.value(p));
  const w = 600, h = 90;
  const max = Math.max(0, ...values.filter(v => v !== null));
  const top = max > 0 ? max : 1;
  const step = w / Math.max(1, values.length);
  const plot = svg("svg", {
    class: "chart-plot", viewBox: "0 0 " + w + " " + h, preserveAspectRatio: "none",
    role: "img", "aria-label": spec.title + ", last " + values.length + " minutes",
  });
  plot.append(svg("line", { class: "axis", x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5 }));
  values.forEach((v, i) => {
    if (!v) return;
    const bh = Math.max(1, (v / top) * (h - 4));
    plot.append(svg("rect", { class: "series", x: (i * step + 0.5).toFixed(1), y: (h - bh).toFixed(1),
      width: Math.max(1, step - 1).toFixed(1), height: bh.toFixed(1) }));
  });
  return el("figure", { class: "chart", "data-chart": spec.name },
    el("figcaption", {}, el("strong", {}, spec.title), " ",
      el("span", { class: "muted", "data-chart-summary": spec.name }, spec.summary(values, max))),
    plot,
    el("div", { class: "chart-axis muted" }, el("span", {}, values.length + " min ago"), el("span", {}, "now")));
}

function activityCharts(act) {
  const pts = act.points;
  const total = values => values.reduce((a, v) => a + (v || 0), 0);
  const charts = el("div", { class: "charts", id: "charts" },
    chart({ name: "throughput", title: "Throughput", points: pts, value: p => p.completed,
      summary: (v, max) => total(v) + " completed, peak " + max + "/min" }),
    chart({ name: "failures", title: "Failures", points: pts,
      value: p => p.failed + p.dead_lettered,
      summary: (v, max) => total(v) + " failed or dead-lettered, peak " + max + "/min" }),
    chart({ name: "latency", title: "Pickup latency", points: pts,
      value: p => p.pickup_avg_secs,
      summary: (v, max) => v.some(x => x !== null) ? "average per minute, highest " + age(max) : "no claims" }));
  const note = act.last_measured_at
    ? el("p", { class: "muted small" }, "Last hour, per minute, recorded by the maintenance leader (latest ",
      time(act.last_measured_at), "). Pickup latency: from runnable to claimed.")
    : el("p", { class: "muted small", id: "charts-empty" },
      "Nothing recorded in the last hour: the maintenance leader records these (awa worker run, awa maint run, or a started awa client).");
  return [charts, note];
}

// Completed jobs per minute as a small inline SVG line.
function sparkline(points, label) {
  const w = 120, h = 24;
  const max = Math.max(1, ...points);
  const step = points.length > 1 ? w / (points.length - 1) : w;
  const coords = points.map((p, i) => (i * step).toFixed(1) + "," + (h - 2 - (p / max) * (h - 4)).toFixed(1));
  const s = svg("svg", { class: "spark", width: w, height: h, viewBox: "0 0 " + w + " " + h, role: "img",
    "aria-label": label });
  s.append(svg("polyline", { points: coords.join(" ") }));
  return s;
}

// ---- views ---------------------------------------------------------------

// A queue's rate limits and global concurrency, as `queue configure` set
// them (docs/limits.md): "100 per 60 s per args.tenant; 5 at once".
function limitsText(limits) {
  return limits.map(l => {
    const parts = [];
    if (l.rate_limit != null) {
      parts.push(l.rate_limit + " per " + l.rate_period_secs + " s" + (l.rate_limit_by ? " per " + l.rate_limit_by : ""));
    }
    if (l.global_concurrency != null) {
      parts.push(l.global_concurrency + " at once" + (l.partition_by ? " per " + l.partition_by : ""));
    }
    return (l.kind ? l.kind + ": " : "limit: ") + parts.join(", ");
  }).join("; ");
}

async function viewQueues() {
  const [data, act] = await Promise.all([api("/api/queues"),
    api("/api/activity?minutes=" + CHART_MINUTES)]);
  const rows = data.queues.map(q => {
    const cell = s => el("td", { class: "num", "data-queue": q.queue, "data-state": s }, q.counts[s]);
    const done = q.throughput.map(m => m.completed);
    const path = "/api/queues/" + encodeURIComponent(q.queue);
    return el("tr", { "data-queue-row": q.queue },
      el("td", {}, el("a", { href: "#/jobs?queue=" + encodeURIComponent(q.queue) }, q.queue),
        q.paused ? el("span", { class: "muted", "data-paused": q.queue }, " (paused)") : null,
        q.limits.length ? el("div", { class: "muted", "data-limits": q.queue }, limitsText(q.limits)) : null),
      ...["available", "scheduled", "retryable", "snoozed", "buffered", "running", "completed", "failed",
        "cancelled", "dead_lettered"].map(cell),
      el("td", { class: "num", "data-oldest": q.queue }, age(q.oldest_available_secs)),
      el("td", { "data-spark": q.queue }, sparkline(done, "completed per minute, last " + data.throughput_minutes + " minutes")),
      el("td", { class: "cell-actions" }, actions(q.paused
        ? action({ label: "Resume", name: "resume", path: path + "/resume", done: () => "Resumed " + q.queue })
        : action({ label: "Pause", name: "pause", path: path + "/pause", done: () => "Paused " + q.queue }))));
  });
  const num = label => ({ label, num: true });
  return [el("h2", {}, "Last hour"), ...activityCharts(act), el("h2", {}, "Queues"),
    rows.length ? table(["Queue", num("Available"), num("Scheduled"), num("Retryable"), num("Snoozed"),
      Object.assign(num("Buffered"), { title: "claimed by a worker, waiting for a free slot: not started" }),
      Object.assign(num("Running"), { title: "claimed and started" }),
      num("Completed"), num("Failed"), num("Cancelled"), num("DLQ"), num("Oldest"),
      "Done/min (" + data.throughput_minutes + " min)", ""],
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
    kv("last error", j.last_error ? el("pre", {}, j.last_error) : "–"),
    kv("args", el("pre", {}, JSON.stringify(j.args, null, 2))),
    kv("metadata", j.metadata ? el("pre", {}, JSON.stringify(j.metadata, null, 2)) : "–")];
  if (j.warnings && j.warnings.length) fields.push(...kv("warnings", el("pre", {}, j.warnings.join("\n"))));
  if (data.progress) {
    const pr = data.progress;
    fields.push(...kv("progress", (pr.percent === null ? "?" : pr.percent + "%") + (pr.message ? " – " + pr.message : "")));
    fields.push(...kv("checkpoint", pr.checkpoint ? el("pre", {}, JSON.stringify(pr.checkpoint, null, 2)) : "–"));
  }
  if (j.holder) {
    const h = j.holder;
    fields.push(...kv("holder", h.host ? h.host + " pid " + h.pid + " (" + h.instance_id + "), last heartbeat " + age(h.heartbeat_age_secs) + " ago"
      : h.instance_id + " (no longer registered)"));
  }
  const terminal = ["completed", "failed", "cancelled", "dead_lettered"].includes(j.state);
  const buttons = [];
  if (!terminal) buttons.push(action({ label: "Cancel job", name: "cancel", danger: true,
    path: "/api/jobs/" + j.id + "/cancel", confirm: "Cancel job " + j.id + "?",
    done: r => "Cancelled job " + j.id + " (was " + r.cancelled_from + ")" }));
  if (j.state === "failed" || j.state === "cancelled") buttons.push(action({ label: "Retry job", name: "retry",
    path: "/api/jobs/" + j.id + "/retry", confirm: "Put job " + j.id + " back as fresh work?",
    done: () => "Job " + j.id + " is back as fresh work" }));
  if (j.state === "dead_lettered") buttons.push(action({ label: "Retry from the DLQ", name: "retry",
    path: "/api/dlq/retry", body: { job_id: j.id }, done: () => "Job " + j.id + " is back from the DLQ" }));
  return [el("h2", {}, "Job " + j.id), el("dl", { class: "kv", id: "job-detail" }, ...fields.flat()),
    actions(...buttons),
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
    el("td", { class: "cell-actions" }, actions(
      action({ label: "Retry", name: "retry", path: "/api/dlq/retry", body: { job_id: e.job_id },
        done: () => "Retried job " + e.job_id }),
      action({ label: "Purge", name: "purge", danger: true, path: "/api/dlq/purge", body: { job_id: e.job_id },
        confirm: "Delete dead letter " + e.job_id + " for good?", done: () => "Purged job " + e.job_id })))));
  const out = [el("h2", {}, "Dead-letter queue (" + data.entries.length + ")")];
  if (rows.length) {
    out.push(actions(
      action({ label: "Retry all", name: "retry-all", path: "/api/dlq/retry", body: { all: true },
        done: r => "Retried " + r.retried.length + " jobs" }),
      action({ label: "Purge all", name: "purge-all", danger: true, path: "/api/dlq/purge", body: { all: true },
        confirm: "Delete every dead letter for good?", done: r => "Purged " + r.purged.length + " jobs" })));
    out.push(table([{ label: "ID", num: true }, "Queue", "Kind", "Dead since", "Last error", ""], rows, { id: "dlq" }));
  } else {
    out.push(el("p", { class: "muted", id: "dlq-empty" }, "No dead letters."));
  }
  return out;
}

async function viewCron() {
  const c = await api("/api/cron");
  const rows = c.schedules.map(x => {
    const path = "/api/cron/" + encodeURIComponent(x.name);
    return el("tr", { "data-cron": x.name },
      el("td", {}, x.name), el("td", {}, x.cron + " (" + x.timezone + ")"),
      el("td", {}, el("span", {}, el("a", { href: "#/jobs?queue=" + encodeURIComponent(x.queue) }, x.queue), " / " + x.kind)),
      el("td", { "data-cron-state": x.name }, x.enabled ? "enabled" : "paused"),
      el("td", {}, time(x.last_tick)), el("td", {}, time(x.next_fire)),
      el("td", { class: "num" }, x.last_job_id ? el("a", { href: "#/job/" + x.last_job_id }, x.last_job_id) : "–"),
      // A schedule the leader cannot fire shows why (it is skipped; the
      // others keep firing) until it fires again or is changed.
      el("td", { class: "wrap", "data-cron-error": x.name },
        x.error ? "cannot fire since " + time(x.error_since) + ": " + x.error : "–"),
      el("td", { class: "cell-actions" }, actions(
        x.enabled
          ? action({ label: "Pause", name: "cron-pause", path: path + "/pause", done: () => "Paused " + x.name })
          : action({ label: "Resume", name: "cron-resume", path: path + "/resume", done: () => "Resumed " + x.name }),
        action({ label: "Run now", name: "cron-run", path: path + "/run",
          confirm: "Enqueue a job of " + x.name + " now?", done: r => x.name + ": enqueued job " + r.job_id }))));
  });
  return [el("h2", {}, "Cron schedules (" + c.schedules.length + ")"),
    rows.length ? table(["Name", "Schedule", "Queue / kind", "State", "Last tick", "Next fire",
      { label: "Last job", num: true }, "Error", ""], rows, { id: "cron" })
      : el("p", { class: "muted", id: "cron-empty" }, "No schedules: add one with awa cron add, or from a client's builder.")];
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
    ? [m.leader.host + " pid " + m.leader.pid + " since ", time(m.leader.since)] : ["none"];
  const pinned = m.pinned_snapshot
    ? "backend pid " + m.pinned_snapshot.pid + ", open " + age(m.pinned_snapshot.age_secs) +
      (m.pinned_snapshot.query ? ", running " + m.pinned_snapshot.query : "") : "none";
  out.push(el("dl", { class: "kv", id: "storage-summary" },
    el("dt", {}, "schema version"), el("dd", {}, s.schema_version === null ? "not migrated" : s.schema_version),
    el("dt", {}, "transition"), el("dd", {}, s.transition ? s.transition.state + " (active " + s.transition.active_schema + ")" : "–"),
    el("dt", {}, "maintenance leader"), el("dd", { "data-field": "leader" }, ...leader),
    el("dt", {}, "oldest snapshot"), el("dd", { "data-field": "pinned" }, pinned)));
  for (const sub of s.substrates) {
    out.push(el("h2", {}, "Substrate " + sub.schema + (sub.active ? " (active)" : "")));
    const rows = sub.rings.map(r => {
      const slots = sub.slot_rows.filter(x => x.ring === r.ring && x.live_rows > 0)
        .map(x => x.slot + ":" + x.live_rows).join(" ");
      const outcomes = sub.last_outcomes.filter(o => o.ring === r.ring)
        .map(o => el("div", {}, o.task + " " + o.outcome + (o.detail ? " (" + o.detail + ")" : "") + " at ", time(o.at)));
      return el("tr", { "data-ring": r.ring },
        el("td", {}, r.ring), el("td", { class: "num", "data-ring-slot": r.ring }, r.slot),
        el("td", { class: "num" }, r.generation), el("td", { class: "wrap" }, slots || "–"),
        el("td", { class: "wrap", "data-ring-outcomes": r.ring }, ...(outcomes.length ? outcomes : ["–"])));
    });
    out.push(table(["Ring", { label: "Current slot", num: true }, { label: "Generation", num: true }, "Rows per slot", "Last rotate / prune"], rows, { "data-substrate": sub.schema }));
    out.push(el("p", { class: "muted" }, "Parked attempts: " + sub.parked_attempts));
  }
  return out;
}

async function viewRuntimes() {
  const r = await api("/api/runtimes");
  const rows = r.runtimes.map(x => el("tr", { "data-runtime": x.instance_id },
    el("td", {}, x.role), el("td", {}, x.host), el("td", { class: "num" }, x.pid),
    el("td", { class: "wrap" }, x.queues.join(", ") || "–"), el("td", {}, age(x.seen_secs_ago) + " ago"),
    el("td", {}, time(x.started_at))));
  return [el("h2", {}, "Runtimes (" + r.runtimes.length + ")"),
    rows.length ? table(["Role", "Host", { label: "PID", num: true }, "Queues", "Last heartbeat", "Started"], rows, { id: "runtimes" })
      : el("p", { class: "muted" }, "No live workers.")];
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
      cron: viewCron, storage: viewStorage, runtimes: viewRuntimes };
    const nodes = await (views[name] || viewQueues)();
    // Keep a filter field the user is typing in.
    if (!(document.activeElement && main.contains(document.activeElement) && document.activeElement.tagName === "INPUT")) {
      main.replaceChildren(...nodes);
      main.dataset.view = name;
    }
    if (info.read_only) banner("warn", "Read-only: this server has no AWA_ADMIN_TOKEN, so actions are off.");
    else if (!token()) banner("info", "Enter the admin token to enable actions.");
    else if (document.querySelector("#banner .bad") === null && document.querySelector("#banner .info") === null) banner("", "");
    document.getElementById("updated").textContent = "Updated " + timeText(new Date()) +
      " · times in " + ZONE + " · refreshes every " + REFRESH_MS / 1000 + " s";
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
