// The dashboard: one site's traffic from the public API (GET /v1/timeseries, /v1/breakdown,
// /v1/status): the six numbers of the range (unique visitors, visits, page views, views per visit,
// bounce rate, visit duration) with their exactness and, if asked, their change against a
// comparison range, a chart of the chosen one, nine breakdowns (pages, entry and exit pages,
// referrers, countries, devices, channels, campaign sources and campaigns; each table downloadable
// as CSV), live numbers and the freshness of what is shown.
//
// No build step: an ES module that imports the vendored uPlot. All requests go to this origin
// (relative URLs, so the API may sit behind a path prefix). The state lives in the page's query
// string (?site=&range=&granularity=&compare=&metric=&from=&to=&refresh=&f=), so a view can be bookmarked or
// shared.
//
// Filters (filters.js): a click on a value in a table adds `is <dimension> <value>` (an `f`
// parameter, a new history entry, so back and forward move between filters). While any is active
// the top numbers, the chart and the tables are read from POST /v2/query with every filter
// (combined with AND), one query per panel, each for the metrics that panel shows. Every figure is
// given then but the visit figures under a page filter (visits are not kept per page: those figures
// say so and point to the entry page); the entry and exit page tables are not given with a page
// filter, nor the page table with an entry or exit page filter. Without filters the page reads the
// GET /v1 endpoints as before.

import uPlot from "./vendor/uplot/uPlot.esm.js";
import {
  FILTER_DIMENSIONS,
  NOT_WITH_FILTERS,
  availableMetrics,
  canFilterBy,
  filtersQuery,
  metricUnavailable,
  queryBody,
  readFilters,
  renderChips,
  rowsOf,
  tableUnavailable,
  timeOf,
  unscoped,
  withFilter,
  withoutFilter,
} from "./filters.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const RANGES = { "24h": 1, "7d": 7, "30d": 30 };
const GRANULARITIES = ["hour", "day", "week", "month"];
// What the top numbers may be compared with (the API's `compare`), as the page says it.
const COMPARISONS = { previous_period: "the previous period", year_over_year: "a year earlier" };
// The metrics of /v1/timeseries and /v1/breakdown (Plausible's names), in the order shown.
const METRICS = ["visitors", "visits", "pageviews", "views_per_visit", "bounce_rate", "visit_duration"];
const METRIC_NAMES = {
  visitors: "Unique visitors",
  visits: "Visits",
  pageviews: "Page views",
  views_per_visit: "Views per visit",
  bounce_rate: "Bounce rate",
  visit_duration: "Visit duration",
};
// Each breakdown panel names its dimension and the metrics of its columns in the HTML.
const BREAKDOWNS = [...document.querySelectorAll(".breakdown")].map((section) => ({
  section,
  dimension: section.dataset.dimension,
  metrics: section.dataset.metrics.split(","),
}));
const BREAKDOWN_LIMIT = 10;
// POST /v2/query requests of one load in flight at once: the API scans the filter table a few at a
// time and refuses (429) what would wait beyond its queue, so the page does not send all at once.
const QUERIES_AT_ONCE = 4;
const MAIN_RELOAD_MS = 60_000; // a range that includes the current hour is re-queried this often

const $ = (id) => document.getElementById(id);
const numbers = new Intl.NumberFormat();
const regions = (() => {
  try {
    return new Intl.DisplayNames(["en"], { type: "region" });
  } catch {
    return null;
  }
})();

// --- the state: what is shown ------------------------------------------------------------------

const params = new URLSearchParams(location.search);

/** The state a query string gives (on load, and on back or forward). */
function stateOf(params) {
  const s = {
    site: params.get("site") || "",
    range: params.get("range") in RANGES || params.get("range") === "custom" ? params.get("range") : "24h",
    granularity: GRANULARITIES.includes(params.get("granularity")) ? params.get("granularity") : "hour",
    compare: params.get("compare") in COMPARISONS ? params.get("compare") : "",
    metric: METRICS.includes(params.get("metric")) ? params.get("metric") : "visitors",
    from: parseUtc(params.get("from")),
    to: parseUtc(params.get("to")),
    refreshS: Math.max(1, Number(params.get("refresh")) || 5),
  };
  s.filters = readFilters(params, s.site);
  if (s.range === "custom" && (s.from === null || s.to === null)) s.range = "24h";
  return s;
}
const state = stateOf(params);

// What the page shows, kept for whoever wants to check it against the API (the tests do).
const view = { query: null, series: null, breakdowns: {}, status: null, live: null, chart: null, metric: null, queries: {}, downloaded: null, filters: [] };
window.dashboard = view;
let mainLoads = 0;
let liveLoads = 0;
let mainLoadedAt = 0;
let mainFailed = false;
let mainController = null;
let liveBusy = false;
const problems = { main: null, live: null };

// --- formatting ----------------------------------------------------------------------------------

function parseUtc(text) {
  if (!text) return null;
  const t = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(text) ? text : `${text}Z`);
  return Number.isNaN(t) ? null : t;
}

const iso = (ms) => new Date(ms).toISOString().replace(".000Z", "Z");
const fmtInt = (n) => (n == null ? "–" : numbers.format(Math.round(n)));
const fmtTime = (ms) => `${new Date(ms).toISOString().slice(0, 16).replace("T", " ")} UTC`;
const fmtDay = (ms) => new Date(ms).toISOString().slice(0, 10);
const inputValue = (ms) => new Date(ms).toISOString().slice(0, 16);

function fmtAge(seconds) {
  if (seconds == null || Number.isNaN(seconds)) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.floor(s / 60)} min ${s % 60} s ago`;
  if (s < 2 * 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min ago`;
  return `${Math.floor(s / 86400)} days ago`;
}

/** Unique visitors: exact counts as they are; estimates marked ≈ with their 95% band as a tooltip. */
function fmtVisitors(v) {
  if (v == null) return { text: "–", band: "" };
  if (v.exact) return { text: fmtInt(v.estimate), band: "exact" };
  if (v.lower == null) return { text: `≈${fmtInt(v.estimate)}`, band: "estimate" };
  return { text: `≈${fmtInt(v.estimate)}`, band: `95%: ${fmtInt(v.lower)} – ${fmtInt(v.upper)}` };
}

function fmtDuration(seconds) {
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

const decimals = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
const percent = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

/** A figure of a metric other than visitors (null: no visits, so no rate or average). */
function fmtMetric(metric, value) {
  if (value == null) return "–";
  if (metric === "views_per_visit") return decimals.format(value);
  if (metric === "bounce_rate") return `${percent.format(value)}%`;
  if (metric === "visit_duration") return fmtDuration(value);
  return fmtInt(value);
}

/** A metric's figure as shown and its raw value (for visitors: the estimate, with its band). */
function figure(metric, value) {
  if (metric === "visitors") {
    const v = fmtVisitors(value);
    return { text: v.text, title: v.band, raw: value == null ? null : value.estimate };
  }
  return { text: fmtMetric(metric, value), title: "", raw: value };
}

/** What the answer's `exactness` says of a metric, in a few words (and the reason in full). */
function exactnessOf(metric, answer, value) {
  const e = answer.exactness && answer.exactness[metric];
  if (metric === "visitors" && value) {
    // One figure: exact or an estimate with its band, whatever the answer's other figures are.
    return value.exact ? { exact: true, text: "exact", reason: "" } : { exact: false, text: fmtVisitors(value).band, reason: e ? e.reason : "" };
  }
  if (!e || e.exact) return { exact: true, text: "exact", reason: "" };
  const days = e.days && e.days.length ? `: ${e.days.join(", ")}` : "";
  return { exact: false, text: `not exact${days}`, reason: e.reason || "" };
}

function fmtValue(dimension, value) {
  if (dimension === "page" || dimension === "entry_page" || dimension === "exit_page") return value.replace(/^https?:\/\//, "");
  if (dimension === "country" && regions && /^[A-Z]{2}$/.test(value)) {
    try {
      return `${value} · ${regions.of(value)}`;
    } catch {
      return value;
    }
  }
  return value;
}

const sum = (offsets) => Object.values(offsets || {}).reduce((a, b) => a + b, 0);

// --- the API -----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

function detailOf(body) {
  const detail = body && body.detail;
  if (Array.isArray(detail)) return detail.map((d) => `${(d.loc || []).slice(-1)[0]}: ${d.msg}`).join("; ");
  return typeof detail === "string" ? detail : null;
}

// The API key: asked once when the API answers 401, kept in sessionStorage for this browser
// session (this tab, until it is closed), sent in the Authorization header, never in a URL.
const KEY_STORAGE = "lambda-api-key";
let keyPrompt = null; // the one pending question, shared by every request that got a 401

function askKey(message) {
  if (keyPrompt) return keyPrompt;
  const form = $("key-form");
  const input = $("key-input");
  $("key-message").textContent = message;
  form.hidden = false;
  input.value = "";
  input.focus();
  keyPrompt = new Promise((resolve) => {
    form.addEventListener("submit", function submitted(e) {
      e.preventDefault();
      const key = input.value.trim();
      if (!key) return;
      form.removeEventListener("submit", submitted);
      sessionStorage.setItem(KEY_STORAGE, key);
      form.hidden = true;
      keyPrompt = null;
      resolve();
    });
  });
  return keyPrompt;
}

/** A GET of the API with `query`, or a POST of `body` as JSON; the key (if any) in the header. */
async function api(path, query = {}, signal = undefined, accept = "application/json", body = undefined) {
  const url = new URL(path, document.baseURI);
  for (const [k, v] of Object.entries(query)) if (v != null && v !== "") url.searchParams.set(k, v);
  for (;;) {
    const headers = { Accept: accept };
    const key = sessionStorage.getItem(KEY_STORAGE);
    if (key) headers.Authorization = `Bearer ${key}`;
    const request = { signal, headers };
    if (body !== undefined) {
      request.method = "POST";
      request.body = JSON.stringify(body);
      headers["Content-Type"] = "application/json";
    }
    let response;
    try {
      response = await fetch(url, request);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ApiError(0, "the API does not answer");
    }
    const text = response.ok && accept !== "application/json";
    const answer = text ? await response.text() : await response.json().catch(() => null);
    if (response.status === 401) {
      if (key && sessionStorage.getItem(KEY_STORAGE) === key) sessionStorage.removeItem(KEY_STORAGE);
      await askKey(key ? `The API refused the key: ${detailOf(answer) || "unknown or revoked"}. Enter another.` : "This API needs a key with the read scope.");
      continue;
    }
    if (!response.ok) throw new ApiError(response.status, detailOf(answer) || response.statusText);
    return answer;
  }
}

/** [from, to) of the state: presets end with the current hour (the current day for daily series). */
function windowOf(now = Date.now()) {
  if (state.range === "custom") return { from: state.from, to: state.to };
  const unit = state.granularity !== "hour" && state.range !== "24h" ? DAY : HOUR;
  const to = Math.floor(now / unit) * unit + unit;
  return { from: to - RANGES[state.range] * DAY, to };
}

// --- the banner: what is wrong, most serious first -----------------------------------------------

function problemOf(error) {
  if (error.status === 503 && /batch views unavailable/i.test(error.message)) {
    return { level: "error", kind: "mongodb-down", text: `MongoDB is down: no number can be given (HTTP 503: ${error.message}). Retrying every ${state.refreshS} s.` };
  }
  if (error.status === 503) return { level: "error", kind: "unavailable", text: `Nothing can be served (HTTP 503): ${error.message}. Retrying every ${state.refreshS} s.` };
  if (error.status === 0) return { level: "error", kind: "api-down", text: `The API does not answer. Retrying every ${state.refreshS} s.` };
  return { level: "error", kind: "error", text: `HTTP ${error.status}: ${error.message}` };
}

function partialProblem(answer) {
  if (!answer || !answer.partial) return null;
  const cut = answer.covers && answer.covers.batch_as_of;
  const since = cut ? ` Events after the batch views' cut (${fmtTime(Date.parse(cut))}) are not included.` : "";
  return {
    level: "warning",
    kind: "redis-down",
    text: `Redis is down: batch-only numbers (missing: ${(answer.missing || ["realtime"]).join(", ")}).${since}`,
  };
}

function showBanner() {
  const banner = $("banner");
  const shown = [problems.main, problems.live].filter(Boolean).sort((a, b) => (a.level === "error" ? -1 : 1) - (b.level === "error" ? -1 : 1))[0];
  banner.hidden = !shown;
  banner.className = shown ? shown.level : "";
  banner.dataset.kind = shown ? shown.kind : "";
  banner.textContent = shown ? shown.text : "";
}

// --- the chart -----------------------------------------------------------------------------------

const ORANGE = "#c2410c";
const BLUE = "#1d4ed8";

function chartHeight() {
  return window.matchMedia("(max-width: 640px)").matches ? 220 : 300;
}

/** The chart of one metric; for visitors with the 95% band of the estimate. */
function chartOptions(width, metric) {
  const shown = (u, v) => (metric === "visitors" ? fmtInt(v) : fmtMetric(metric, v));
  const series = [
    { label: "Time (UTC)", value: (u, v) => (v == null ? "–" : fmtTime(v * 1000)) },
    { label: METRIC_NAMES[metric], stroke: metric === "visitors" ? ORANGE : BLUE, width: 2, value: shown },
  ];
  if (metric === "visitors") {
    series.push(
      { label: "Visitors 95% low", stroke: "rgba(194,65,12,0.35)", width: 1, dash: [4, 4], value: shown },
      { label: "Visitors 95% high", stroke: "rgba(194,65,12,0.35)", width: 1, dash: [4, 4], value: shown },
    );
  }
  const top = metric === "bounce_rate" ? () => 100 : (max) => Math.max(1, max * 1.05);
  return {
    width,
    height: chartHeight(),
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, top(max)] } },
    series,
    bands: metric === "visitors" ? [{ series: [3, 2], fill: "rgba(194,65,12,0.14)" }] : [],
    axes: [
      { label: "UTC", labelSize: 20, values: timeTicks },
      { size: 72, values: (u, splits) => splits.map((v) => shown(u, v)) },
    ],
  };
}

/** Time axis labels in UTC, 24-hour clock: the date where a day starts (and on the first tick). */
function timeTicks(u, splits, axisIdx, space, increment) {
  return splits.map((ts, i) => {
    const t = new Date(ts * 1000).toISOString();
    const day = t.slice(5, 10);
    if (increment >= 86400) return day;
    const time = t.slice(11, 16);
    return i === 0 || time === "00:00" ? `${time}\n${day}` : time;
  });
}

function chartData(series, metric) {
  const times = series.map((p) => Date.parse(p.start) / 1000);
  if (metric !== "visitors") return [times, series.map((p) => p[metric])];
  return [
    times,
    series.map((p) => p.visitors.estimate),
    series.map((p) => p.visitors.lower ?? p.visitors.estimate),
    series.map((p) => p.visitors.upper ?? p.visitors.estimate),
  ];
}

/** The metric charted: the chosen one, but a visit metric (no figure with a page filter) gives way to visitors. */
function chartMetric() {
  return metricUnavailable(state.filters, state.metric) ? "visitors" : state.metric;
}

/** The six numbers' radio buttons: the visit metrics cannot be chosen while a page filter is active. */
function syncMetricRadios() {
  const shown = chartMetric();
  for (const radio of document.querySelectorAll("input[name=metric]")) {
    radio.checked = radio.value === shown;
    radio.disabled = Boolean(metricUnavailable(state.filters, radio.value));
  }
}

let chartObserved = false;

/** The chart of the chosen metric; a new chart when the metric changes (its series differ). */
function drawChart(series) {
  const el = $("chart");
  const metric = chartMetric();
  const data = chartData(series, metric);
  if (view.chart && view.metric === metric) {
    view.chart.setData(data);
    return;
  }
  if (view.chart) view.chart.destroy();
  view.metric = metric;
  el.setAttribute("aria-label", `Chart of ${METRIC_NAMES[metric].toLowerCase()} over time`);
  view.chart = new uPlot(chartOptions(el.clientWidth, metric), data, el);
  if (chartObserved) return;
  chartObserved = true;
  new ResizeObserver(() => {
    if (view.chart && el.clientWidth > 0) view.chart.setSize({ width: el.clientWidth, height: chartHeight() });
  }).observe(el);
}

// --- rendering -----------------------------------------------------------------------------------

function cell(text, { num = false, title = "", tag = "td", metric = null, raw = undefined } = {}) {
  const td = document.createElement(tag);
  td.textContent = text;
  if (num) td.className = "num";
  if (title) td.title = title;
  if (tag === "th") td.scope = "row";
  if (metric) td.dataset.metric = metric;
  if (raw !== undefined) td.dataset.value = raw == null ? "" : String(raw);
  return td;
}

function metricCell(metric, value) {
  const f = figure(metric, value);
  return cell(f.text, { num: true, title: f.title, metric, raw: f.raw });
}

// What a figure the filtered answer cannot give shows (a visit figure with a page filter).
const UNAVAILABLE = "—";

function unavailableCell(metric, reason) {
  const td = cell(UNAVAILABLE, { num: true, title: reason, metric, raw: null });
  td.dataset.unavailable = "true";
  return td;
}

/** A figure of a row: "—" for a metric the answer has none of (`unavailable`: metric to why). */
function rowCell(metric, value, unavailable) {
  const reason = unavailable && unavailable[metric];
  return reason ? unavailableCell(metric, reason) : metricCell(metric, value);
}

function messageRow(tbody, text, columns) {
  const tr = document.createElement("tr");
  const td = cell(text);
  td.colSpan = columns;
  td.className = "message";
  tr.append(td);
  tbody.replaceChildren(tr);
}

function visitorsTile(el, v) {
  const { text, band } = fmtVisitors(v);
  el.textContent = text;
  if (band) {
    const small = document.createElement("small");
    small.textContent = band;
    el.append(small);
  }
}

/** A change in percent as the page shows it, against what it compares with. */
function fmtChange(change, compare) {
  if (change == null) return `no change in % (nothing in ${COMPARISONS[compare]})`;
  const sign = change > 0 ? "+" : change < 0 ? "−" : "±";
  return `${sign}${percent.format(Math.abs(change))}% vs ${COMPARISONS[compare]}`;
}

/** The change of one of the six numbers against the comparison range (the answer's `change`). */
function renderChange(tile, metric, answer) {
  let small = tile.querySelector(".change");
  if (!answer || !answer.comparison) {
    if (small) small.remove();
    delete tile.dataset.change;
    return;
  }
  if (!small) {
    small = document.createElement("small");
    small.className = "change";
    tile.append(small);
  }
  const change = answer.change[metric];
  const c = answer.comparison;
  tile.dataset.change = change == null ? "" : String(change);
  small.textContent = fmtChange(change, c.compare);
  small.title = `${fmtTime(Date.parse(c.from))} to ${fmtTime(Date.parse(c.to))}: ${figure(metric, c.total[metric]).text}`;
  small.classList.toggle("up", change > 0);
  small.classList.toggle("down", change < 0);
}

/** The six numbers of the range, each with what the answer says of its exactness (and its change). */
function renderTotals(answer) {
  for (const metric of METRICS) {
    const value = answer.total[metric];
    const tile = document.querySelector(`#metric [data-metric="${metric}"]`);
    const reason = (answer.unavailable && answer.unavailable[metric]) || "";
    tile.title = reason;
    tile.dataset.unavailable = String(Boolean(reason));
    if (reason) {
      $(`total-${metric}`).textContent = UNAVAILABLE;
      tile.dataset.value = "";
      delete tile.dataset.exact;
      tile.querySelector(".exactness").textContent = reason;
      tile.querySelector(".exactness").title = "";
      renderChange(tile, metric, null);
      continue;
    }
    const f = figure(metric, value);
    const e = exactnessOf(metric, answer, value);
    $(`total-${metric}`).textContent = f.text;
    tile.dataset.value = f.raw == null ? "" : String(f.raw);
    tile.dataset.exact = String(e.exact);
    const small = tile.querySelector(".exactness");
    small.textContent = e.text;
    small.title = e.reason;
    renderChange(tile, metric, answer);
  }
}

function clearTotals() {
  for (const metric of METRICS) {
    const tile = document.querySelector(`#metric [data-metric="${metric}"]`);
    $(`total-${metric}`).textContent = "–";
    tile.dataset.value = "";
    tile.title = "";
    delete tile.dataset.unavailable;
    delete tile.dataset.exact;
    tile.querySelector(".exactness").textContent = "";
    renderChange(tile, metric, null);
  }
}

// --- CSV downloads: each table as the API answers it in CSV (`format=csv`) ----------------------

/** Fetches the CSV of a shown table (with the key in the header, so not a plain link) and saves it. */
async function download(name) {
  const asked = view.queries[name];
  if (!asked) return;
  const csv = await api(asked.path, { ...asked.query, format: "csv" }, undefined, "text/csv");
  view.downloaded = { name, path: asked.path, query: asked.query, csv };
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([csv], { type: "text/csv" }));
  link.download = `${name}-${asked.query.from.slice(0, 13)}.csv`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

/** A "Download CSV" button in each panel with a table (added here, so a new breakdown panel has one). */
function setupDownloads() {
  const panels = [[$("overview"), "series"], ...BREAKDOWNS.map((b) => [b.section, b.dimension])];
  for (const [panel, name] of panels) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "download";
    button.dataset.table = name;
    button.textContent = "Download CSV";
    button.setAttribute("aria-label", `Download ${panel.querySelector("h2").textContent.toLowerCase()} as CSV`);
    button.addEventListener("click", () =>
      download(name).catch((error) => {
        problems.main = problemOf(error);
        showBanner();
      }),
    );
    panel.querySelector("h2").after(button);
  }
}

function renderSeries(answer) {
  view.series = answer;
  renderTotals(answer);
  drawChart(answer.series);
  const rows = answer.series.map((p) => {
    const tr = document.createElement("tr");
    const v = fmtVisitors(p.visitors);
    tr.append(
      cell(fmtTime(Date.parse(p.start)), { tag: "th" }),
      metricCell("visitors", p.visitors),
      cell(v.band, { num: true }),
      ...METRICS.filter((m) => m !== "visitors").map((m) => rowCell(m, p[m], answer.unavailable)),
    );
    return tr;
  });
  $("series-table").tBodies[0].replaceChildren(...rows);
}

function renderBreakdown({ section, dimension, metrics }, result) {
  const tbody = section.querySelector("tbody");
  const days = section.querySelector(".days");
  const columns = 2 + metrics.length;
  if (result.status === "rejected") {
    const error = result.reason;
    view.breakdowns[dimension] = null;
    days.textContent = "";
    messageRow(tbody, error.status === 409 ? `Not ready yet: ${error.message}` : `Unavailable: ${error.message}`, columns);
    return;
  }
  const answer = result.value;
  view.breakdowns[dimension] = answer;
  const filtered = Boolean(answer.filtered);
  // Ranked by page views, or by visits for a dimension that counts visits only (by visitors when
  // visits have no figure: a page filter).
  const ranked = rankedBy(metrics, filtered ? state.filters : []);
  const noun = { pageviews: "page views", visits: "visits", visitors: "visitors" }[ranked];
  const total = filtered ? null : answer.totals[ranked];
  const inAll = total == null ? "" : ` · ${fmtInt(total)} ${noun} in all`;
  if (filtered) {
    days.textContent = `Filtered: ${fmtTime(Date.parse(answer.from))} to ${fmtTime(Date.parse(answer.to))} (exclusive)`;
    days.title = "";
  } else {
    const last = Date.parse(answer.to) - DAY;
    const notExact = metrics.filter((m) => m !== "visitors" && !exactnessOf(m, answer, null).exact);
    const flagged = notExact.length ? ` · ${METRIC_NAMES[notExact[0]].toLowerCase()} not exact: ${answer.exactness[notExact[0]].days.join(", ")}` : "";
    days.textContent = `UTC days ${fmtDay(Date.parse(answer.from))} to ${fmtDay(last)} (whole days)${inAll}${flagged}`;
    days.title = notExact.length ? answer.exactness[notExact[0]].reason || "" : "";
  }
  if (answer.entries.length === 0) {
    messageRow(tbody, `No ${noun} in this range${filtered ? " with these filters" : ""}.`, columns);
    return;
  }
  const rows = answer.entries.map((e) => {
    const tr = document.createElement("tr");
    tr.dataset.value = e.value;
    const cells = metrics.map((m) => rowCell(m, e[m], answer.unavailable));
    const share = total ? ` (${Math.round((100 * e[ranked]) / total)}%)` : "";
    const rankedValue = ranked === "visitors" ? e.visitors && e.visitors.estimate : e[ranked];
    if (metrics.includes(ranked)) cells[metrics.indexOf(ranked)].title = `${fmtInt(rankedValue)} ${noun}${share}`;
    tr.append(cell(String(e.rank), { num: true }), valueCell(dimension, e.value), ...cells);
    return tr;
  });
  tbody.replaceChildren(...rows);
}

/** A row's value; in a table of a dimension one can filter by, a link that adds the filter. */
function valueCell(dimension, shown) {
  const th = cell("", { tag: "th", title: shown });
  if (!canFilterBy(dimension)) {
    th.textContent = fmtValue(dimension, shown);
    return th;
  }
  const value = unscoped(shown, state.site);
  const a = document.createElement("a");
  a.className = "filter";
  a.href = urlOf(withFilter(state.filters, dimension, value));
  a.textContent = fmtValue(dimension, shown);
  a.title = `Filter: ${FILTER_DIMENSIONS[dimension]} is ${value}`;
  a.addEventListener("click", (e) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return; // a new tab or window
    e.preventDefault();
    setFilters(withFilter(state.filters, dimension, value));
  });
  th.append(a);
  return th;
}

/** What a table is ranked by: page views, else visits (a dimension that counts visits only), else
 *  visitors (visits have no figure under `filters`: a page filter). */
function rankedBy(metrics, filters) {
  if (metrics.includes("pageviews")) return "pageviews";
  return metricUnavailable(filters, "visits") ? "visitors" : "visits";
}

/** A table that cannot be given with these filters (a page and a visit's entry or exit page never
 *  go together), and why. */
function renderUnfilterable({ section, dimension, metrics }, reason) {
  view.breakdowns[dimension] = null;
  section.querySelector(".days").textContent = "";
  messageRow(section.querySelector("tbody"), reason, 2 + metrics.length);
}

function clearMain(reason) {
  view.series = null;
  clearTotals();
  if (view.chart) view.chart.setData(view.metric === "visitors" ? [[], [], [], []] : [[], []]);
  messageRow($("series-table").tBodies[0], reason, 2 + METRICS.length);
  for (const { section, dimension, metrics } of BREAKDOWNS) {
    view.breakdowns[dimension] = null;
    section.querySelector(".days").textContent = "";
    messageRow(section.querySelector("tbody"), reason, 2 + metrics.length);
  }
  $("fresh-batch").textContent = "–";
  $("fresh-realtime").textContent = "–";
}

/** How much of the shown total came from each layer, in log records (from the answer's `covers`). */
function renderCovers(covers) {
  if (!covers || !covers.batch_offsets) {
    $("fresh-batch").textContent = "–";
    $("fresh-realtime").textContent = "–";
    return;
  }
  const batch = sum(covers.batch_offsets);
  $("fresh-batch").textContent = `${fmtInt(batch)} log records (below the cut of generation ${covers.generation}, ${fmtTime(Date.parse(covers.batch_as_of))})`;
  if (covers.realtime_offsets == null) {
    $("fresh-realtime").textContent = "missing: the realtime views could not be read";
    return;
  }
  let realtime = 0;
  for (const [p, end] of Object.entries(covers.realtime_offsets)) realtime += Math.max(0, end - (covers.batch_offsets[p] || 0));
  $("fresh-realtime").textContent = `${fmtInt(realtime)} log records (after the cut, up to the speed layer's last commit)`;
}

function renderStatus(status) {
  view.status = status;
  const errors = status.errors || {};
  const served = status.served;
  if (served) {
    $("fresh-generation").textContent = `${served.generation}` + (served.served_at ? ` (served since ${fmtTime(Date.parse(served.served_at))})` : "");
    $("fresh-cut").textContent = `${fmtTime(Date.parse(served.cut_at))}, ${fmtAge(served.batch_age_s)}`;
  } else {
    $("fresh-generation").textContent = `unknown: ${errors.mongodb || errors.served || "not reported"}`;
    $("fresh-cut").textContent = "–";
  }
  const speed = status.speed;
  if (speed) {
    const lag = speed.lag == null ? null : sum(speed.lag);
    $("fresh-lag").textContent = lag == null ? `unknown: ${errors.kafka || "the log's end is not known"}` : `${fmtInt(lag)} events in the log not yet counted`;
    $("live-lag").textContent = lag == null ? "–" : fmtInt(lag);
    const at = speed.last_batch_at ? Date.parse(speed.last_batch_at) : null;
    $("fresh-microbatch").textContent = speed.batch_id < 0 ? "none yet" : `#${speed.batch_id}` + (at ? ` at ${fmtTime(at)}, ${fmtAge((Date.now() - at) / 1000)}` : "");
  } else {
    const why = errors.redis ? `Redis does not answer (${errors.redis})` : "no speed layer commit yet";
    $("fresh-lag").textContent = `unknown: ${why}`;
    $("fresh-microbatch").textContent = `unknown: ${why}`;
    $("live-lag").textContent = "–";
  }
}

function renderLive(answer) {
  view.live = answer;
  const last = answer.series[answer.series.length - 1];
  $("live-hour-pageviews").textContent = fmtInt(last ? last.pageviews : 0);
  $("live-day-pageviews").textContent = fmtInt(answer.total.pageviews);
  visitorsTile($("live-day-visitors"), answer.total.visitors);
  $("live-updated").textContent = `Updated ${new Date().toISOString().slice(11, 19)} UTC` + (answer.partial ? " · batch-only (Redis down)" : "");
}

/** GET /v1/current-visitors: the speed layer's visitors of the last minutes, or why there is no number. */
function renderCurrent(answer) {
  const el = $("live-current-visitors");
  const from = Date.parse(answer.from), to = Date.parse(answer.to);
  const hhmm = (ms) => new Date(ms).toISOString().slice(11, 16);
  $("live-current-window").textContent = `(${hhmm(from)}–${hhmm(to)} UTC)`;
  if (answer.covered && answer.visitors) {
    visitorsTile(el, answer.visitors);
    el.title = "";
  } else {
    el.textContent = "not covered";
    el.title = answer.reason || "";
  }
  el.dataset.covered = String(answer.covered);
}

// --- loading -------------------------------------------------------------------------------------

async function loadMain() {
  if (!state.site) return;
  if (mainController) mainController.abort();
  const controller = new AbortController();
  mainController = controller;
  const { from, to } = windowOf();
  showFiltered();
  if (state.filters.length) return loadFiltered(controller, from, to);
  const range = { from: iso(from), to: iso(to) };
  view.query = { site: state.site, granularity: state.granularity, metrics: METRICS.join(","), ...range };
  if (state.compare) view.query.compare = state.compare;
  view.queries = { series: { path: "v1/timeseries", query: { dimension: "site", ...view.query } } };
  for (const b of BREAKDOWNS) {
    const query = { site: state.site, dimension: b.dimension, metrics: b.metrics.join(","), limit: BREAKDOWN_LIMIT, ...range };
    view.queries[b.dimension] = { path: "v1/breakdown", query };
  }
  const compared = state.compare ? `, compared with ${COMPARISONS[state.compare]}` : "";
  $("range-label").textContent = `${fmtTime(from)} to ${fmtTime(to)} (exclusive), per ${state.granularity}${compared}`;
  document.body.setAttribute("aria-busy", "true");
  const requests = [
    api(view.queries.series.path, view.queries.series.query, controller.signal),
    ...BREAKDOWNS.map((b) => api(view.queries[b.dimension].path, view.queries[b.dimension].query, controller.signal)),
  ];
  const [series, ...breakdowns] = await Promise.allSettled(requests);
  if (controller.signal.aborted) return;
  mainController = null;
  mainLoadedAt = Date.now();
  if (series.status === "rejected") {
    const problem = problemOf(series.reason);
    problems.main = problem;
    mainFailed = true;
    clearMain(problem.kind === "mongodb-down" ? "Unavailable: MongoDB is down." : `Unavailable: ${series.reason.message}`);
  } else {
    mainFailed = false;
    problems.main = partialProblem(series.value);
    renderSeries(series.value);
    renderCovers(series.value.covers);
    BREAKDOWNS.forEach((b, i) => renderBreakdown(b, breakdowns[i]));
  }
  loaded();
}

function loaded() {
  showBanner();
  document.body.removeAttribute("aria-busy");
  document.documentElement.dataset.mainLoads = String(++mainLoads);
}

/** The buckets of [from, to) at `unit` (an hour or a day; a day's bucket starts at midnight UTC). */
function buckets(from, to, unit) {
  const starts = [];
  for (let t = Math.floor(from / unit) * unit; t < to; t += unit) starts.push(t);
  return starts;
}

/** `tasks` (functions giving promises) run at most `n` at a time; their results as allSettled gives them. */
function settledAtMost(n, tasks) {
  const results = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      try {
        results[i] = { status: "fulfilled", value: await tasks[i]() };
      } catch (reason) {
        results[i] = { status: "rejected", reason };
      }
    }
  };
  return Promise.all(Array.from({ length: Math.min(n, tasks.length) }, worker)).then(() => results);
}

/** A filtered answer's figures of every metric as a /v1 answer has them: those not asked (no figure
 *  with these filters) null, those asked as answered (none: 0 for a count, null for a ratio). */
function figuresOf(row, asked) {
  const out = {};
  for (const m of METRICS) {
    const value = asked.includes(m) && row ? row[m] : undefined;
    if (m === "visitors") out[m] = value || { estimate: 0, lower: null, upper: null, exact: true };
    else if (m === "pageviews" || m === "visits") out[m] = asked.includes(m) ? (value ?? 0) : null;
    else out[m] = value ?? null;
  }
  return out;
}

/** Each metric of `metrics` that has no figure under the filters, with why. */
function unavailableOf(metrics) {
  return Object.fromEntries(metrics.map((m) => [m, metricUnavailable(state.filters, m)]).filter(([, why]) => why));
}

/** The panels with filters: POST /v2/query for the total, the series and each table that can be
 *  given with them, every filter in each, each for the metrics its panel shows (but the visit
 *  metrics with a page filter); the answers are shaped as the /v1 answers they stand for. */
async function loadFiltered(controller, from, to) {
  const ask = { site: state.site, from, to, filters: state.filters };
  const unit = state.granularity === "hour" ? HOUR : DAY;
  const bucket = unit === HOUR ? "time:hour" : "time:day";
  const metrics = availableMetrics(state.filters, METRICS);
  view.query = { site: state.site, granularity: unit === HOUR ? "hour" : "day", from: iso(from), to: iso(to), filters: state.filters };
  view.queries = {
    total: { path: "v2/query", body: queryBody({ ...ask, metrics }) },
    series: { path: "v2/query", body: queryBody({ ...ask, metrics, dimensions: [bucket] }) },
  };
  const tables = BREAKDOWNS.filter((b) => !tableUnavailable(state.filters, b.dimension));
  for (const b of tables) {
    const body = queryBody({
      ...ask,
      metrics: availableMetrics(state.filters, b.metrics),
      dimensions: [b.dimension],
      order: rankedBy(b.metrics, state.filters),
      limit: BREAKDOWN_LIMIT,
    });
    view.queries[b.dimension] = { path: "v2/query", body };
  }
  const per = unit === HOUR ? "hour" : `day${state.granularity === "day" ? "" : ` (${state.granularity}s are not available with filters)`}`;
  const compared = state.compare ? `; no comparison (${NOT_WITH_FILTERS})` : "";
  $("range-label").textContent = `${fmtTime(from)} to ${fmtTime(to)} (exclusive), per ${per}, filtered${compared}`;
  document.body.setAttribute("aria-busy", "true");
  const post = (name) => () => api(view.queries[name].path, {}, controller.signal, "application/json", view.queries[name].body);
  const names = ["total", "series", ...tables.map((b) => b.dimension)];
  const [total, series, ...answers] = await settledAtMost(QUERIES_AT_ONCE, names.map(post));
  if (controller.signal.aborted) return;
  mainController = null;
  mainLoadedAt = Date.now();
  const failed = [total, series].find((r) => r.status === "rejected");
  if (failed) {
    const problem = problemOf(failed.reason);
    problems.main = problem;
    mainFailed = true;
    clearMain(problem.kind === "mongodb-down" ? "Unavailable: MongoDB is down." : `Unavailable: ${failed.reason.message}`);
    loaded();
    return;
  }
  mainFailed = false;
  const whole = rowsOf(total.value, state.site, metrics)[0];
  const points = new Map(rowsOf(series.value, state.site, metrics).map((r) => [timeOf(r.value), r]));
  const notes = (total.value.meta && total.value.meta.notes) || [];
  const exactness = Object.fromEntries(
    metrics.filter((m) => m !== "visitors").map((m) => {
      const exact = !total.value.exact || total.value.exact[m] !== false;
      return [m, { exact, reason: exact ? "" : notes.join(" ") }];
    }),
  );
  const shaped = {
    filtered: true,
    unavailable: unavailableOf(METRICS),
    partial: Boolean(total.value.partial || series.value.partial),
    missing: total.value.missing,
    covers: total.value.covers,
    from: iso(from),
    to: iso(to),
    total: figuresOf(whole, metrics),
    exactness,
    series: buckets(from, to, unit).map((t) => ({ start: iso(t), ...figuresOf(points.get(t), metrics) })),
    answers: { total: total.value, series: series.value },
  };
  problems.main = partialProblem(shaped);
  renderSeries(shaped);
  renderCovers(shaped.covers);
  for (const b of BREAKDOWNS) {
    const i = tables.indexOf(b);
    if (i < 0) {
      renderUnfilterable(b, tableUnavailable(state.filters, b.dimension));
      continue;
    }
    const result = answers[i];
    if (result.status === "rejected") {
      renderBreakdown(b, result);
      continue;
    }
    const asked = view.queries[b.dimension].body.metrics;
    const entries = rowsOf(result.value, state.site, asked).map((r, rank) => ({ rank: rank + 1, ...figuresOf(r, asked), value: r.value }));
    const value = { filtered: true, unavailable: unavailableOf(b.metrics), from: iso(from), to: iso(to), entries, answer: result.value };
    renderBreakdown(b, { status: "fulfilled", value });
  }
  loaded();
}

/** What shows that filters are active: the chips, the live panel's note, the disabled controls. */
function showFiltered() {
  const filtered = state.filters.length > 0;
  view.filters = state.filters.map((f) => ({ ...f }));
  renderChips($("filters"), state.filters, (dimension) => {
    setFilters(withoutFilter(state.filters, dimension));
    const next = document.querySelector("#filters button.remove") || $("main");
    next.focus();
  });
  $("live-unfiltered").hidden = !filtered;
  $("compare").disabled = filtered;
  $("compare").title = filtered ? `Comparison: ${NOT_WITH_FILTERS}` : "";
  for (const button of document.querySelectorAll("button.download")) {
    button.disabled = filtered;
    button.title = filtered ? `CSV: ${NOT_WITH_FILTERS}` : "";
  }
  syncMetricRadios();
}

/** New filters: a new history entry (back and forward move between them), then the panels again. */
function setFilters(filters) {
  state.filters = filters;
  saveState(true);
  loadMain();
}

async function refreshLive() {
  if (liveBusy || !state.site) return;
  liveBusy = true;
  try {
    const now = Date.now();
    const today = { from: iso(Math.floor(now / DAY) * DAY), to: iso(Math.floor(now / HOUR) * HOUR + HOUR) };
    const [live, status, current] = await Promise.allSettled([
      api("v1/timeseries", { site: state.site, dimension: "site", granularity: "hour", ...today }),
      api("v1/status"),
      api("v1/current-visitors", { site: state.site }),
    ]);
    if (current.status === "fulfilled") renderCurrent(current.value);
    else $("live-current-visitors").textContent = "–";
    if (status.status === "fulfilled") renderStatus(status.value);
    else if (status.reason && status.reason.status === 403) {
      $("fresh-generation").textContent = "not shown: /v1/status needs a key with the admin scope";
    }
    if (live.status === "fulfilled") {
      renderLive(live.value);
      problems.live = partialProblem(live.value);
    } else {
      problems.live = problemOf(live.reason);
      for (const id of ["live-hour-pageviews", "live-day-pageviews", "live-day-visitors"]) $(id).textContent = "–";
    }
    showBanner();
    document.documentElement.dataset.liveLoads = String(++liveLoads);
    // Recover from a failed load, and keep a range that includes the current hour current.
    const stale = windowOf().to > now && Date.now() - mainLoadedAt > MAIN_RELOAD_MS;
    // Re-query the shown numbers when the state of the stores changed: recovered from a failed load,
    // Redis lost or back (partial or not), or a store failing now (withdraw numbers that cannot be given).
    const changedState = live.status === "fulfilled"
      ? mainFailed || Boolean(problems.main) !== Boolean(live.value.partial)
      : !mainFailed;
    if (!mainController && (stale || changedState)) loadMain();
  } finally {
    liveBusy = false;
  }
}

function liveLoop() {
  if (!document.hidden) refreshLive();
  setTimeout(liveLoop, state.refreshS * 1000);
}

// --- the controls --------------------------------------------------------------------------------

/** The page's address for the state, with `filters` as its filters. */
function urlOf(filters) {
  const q = new URLSearchParams({ site: state.site, range: state.range, granularity: state.granularity, metric: state.metric });
  if (state.compare) q.set("compare", state.compare);
  if (state.range === "custom") {
    q.set("from", iso(state.from));
    q.set("to", iso(state.to));
  }
  if (params.has("refresh")) q.set("refresh", String(state.refreshS));
  const f = filtersQuery(filters);
  return `${location.pathname}?${q}${f ? `&${f}` : ""}`;
}

function saveState(push = false) {
  const url = urlOf(state.filters);
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

function showFormError(text) {
  $("form-error").hidden = !text;
  $("form-error").textContent = text || "";
}

function changed() {
  showFormError("");
  saveState();
  loadMain();
  refreshLive();
}

function applyCustom() {
  const from = parseUtc($("from").value);
  const to = parseUtc($("to").value);
  if (from === null || to === null) return showFormError("Give both ends of the custom range.");
  if (from % HOUR || to % HOUR) return showFormError("The custom range must start and end on whole hours (UTC).");
  if (from >= to) return showFormError("The custom range must start before it ends.");
  Object.assign(state, { range: "custom", from, to });
  changed();
}

/** The controls as the state says. */
function syncControls() {
  const form = $("controls");
  for (const radio of form.elements.range) radio.checked = radio.value === state.range;
  $("granularity").value = state.granularity;
  $("compare").value = state.compare;
  syncMetricRadios();
  $("custom").hidden = state.range !== "custom";
  const { from, to } = windowOf();
  $("from").value = inputValue(from);
  $("to").value = inputValue(to);
  $("refresh-s").textContent = String(state.refreshS);
}

function setupControls() {
  const form = $("controls");
  syncControls();

  $("site").addEventListener("change", (e) => {
    state.site = e.target.value;
    state.filters = []; // another site's pages and sources
    changed();
  });
  // Back and forward: the state of that address (its filters, and whatever else it names).
  window.addEventListener("popstate", () => {
    const site = state.site;
    Object.assign(state, stateOf(new URLSearchParams(location.search)));
    if (!state.site) state.site = site;
    if (![...$("site").options].some((o) => o.value === state.site)) $("site").append(new Option(state.site, state.site));
    $("site").value = state.site;
    syncControls();
    loadMain();
    refreshLive();
  });
  $("granularity").addEventListener("change", (e) => {
    state.granularity = e.target.value;
    changed();
  });
  $("compare").addEventListener("change", (e) => {
    state.compare = e.target.value;
    changed();
  });
  // The chart shows another of the six numbers: redrawn from the answer shown, no new query.
  $("metric").addEventListener("change", (e) => {
    if (e.target.name !== "metric") return;
    state.metric = e.target.value;
    saveState();
    if (view.series) drawChart(view.series.series);
  });
  $("range").addEventListener("change", (e) => {
    if (e.target.name !== "range") return;
    $("custom").hidden = e.target.value !== "custom";
    if (e.target.value === "custom") {
      const shown = windowOf();
      $("from").value = inputValue(shown.from);
      $("to").value = inputValue(shown.to);
      $("from").focus();
      return; // applied with the Apply button
    }
    state.range = e.target.value;
    changed();
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    applyCustom();
  });
}

/** The site picker: the sites with page views over the last 30 days (GET /v1/breakdown?dimension=site). */
async function loadSites() {
  const select = $("site");
  const to = Math.floor(Date.now() / HOUR) * HOUR + HOUR;
  let sites = [];
  try {
    const answer = await api("v1/breakdown", { dimension: "site", from: iso(to - 30 * DAY), to: iso(to), limit: 100 });
    sites = answer.entries.map((e) => e.value);
  } catch (error) {
    problems.main = problemOf(error);
    showBanner();
  }
  if (state.site && !sites.includes(state.site)) sites.unshift(state.site);
  if (!state.site) state.site = sites[0] || "";
  select.replaceChildren(...sites.map((s) => new Option(s, s, false, s === state.site)));
  if (!state.site) {
    clearMain("No site has page views in the last 30 days.");
    return false;
  }
  return true;
}

async function start() {
  setupControls();
  setupDownloads();
  while (!(await loadSites())) await new Promise((r) => setTimeout(r, state.refreshS * 1000));
  saveState();
  await loadMain();
  liveLoop();
}

start();
