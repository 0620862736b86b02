// The dashboard's filters (as in Plausible): a click on a value in a table adds `is <dimension>
// <value>`; several combine with AND. They live in the page's query string as repeated `f`
// parameters (`?f=country:DE&f=page:https://shop.example.com/pricing`), are shown as removable
// chips, and while any is active the panels are read from POST /v2/query (the Plausible Stats API
// v2 shape) instead of the GET /v1 endpoints.
//
// That endpoint answers every metric under combined filters, the visit metrics from the visits
// themselves (a visit is filtered by its first view's values and by its entry and exit pages). It
// keeps no visit per page, so a visit figure and a filter on the page do not go together, nor do a
// page and an entry or exit page: with a page filter the visit figures and the entry and exit page
// tables are not available, and with an entry or exit page filter the page table is not.
//
// This module knows the filters and that endpoint's request and answer; dashboard.js decides what
// each panel asks and how it is drawn.

// The dimensions a filter may name (those of POST /v2/query), with the words of a chip.
export const FILTER_DIMENSIONS = {
  page: "Page",
  entry_page: "Entry page",
  exit_page: "Exit page",
  referrer: "Referrer",
  country: "Country",
  device: "Device",
  channel: "Channel",
  utm_source: "utm_source",
  utm_medium: "utm_medium",
  utm_campaign: "utm_campaign",
};

// What is off while filters are active (the comparison, the CSV downloads, weeks and months).
export const NOT_WITH_FILTERS = "not available with filters";

// The metrics that count visits: POST /v2/query answers them under any filter but one on the page.
export const VISIT_METRICS = ["visits", "views_per_visit", "bounce_rate", "visit_duration"];
// A visit's own pages: not together with the page (a filter or a table) in one query.
const VISIT_PAGES = ["entry_page", "exit_page"];
export const NOT_WITH_PAGE_FILTER = "not available with a page filter: filter by entry page instead";

const isFilterable = (dimension) => Object.hasOwn(FILTER_DIMENSIONS, dimension);
const named = (filters, dimensions) => filters.some((f) => dimensions.includes(f.dimension));

/** Why `metric` has no figure under `filters` ("" when it has one): visits are not kept per page. */
export function metricUnavailable(filters, metric) {
  return VISIT_METRICS.includes(metric) && named(filters, ["page"]) ? NOT_WITH_PAGE_FILTER : "";
}

/** The metrics of `metrics` that have a figure under `filters`. */
export function availableMetrics(filters, metrics) {
  return metrics.filter((m) => !metricUnavailable(filters, m));
}

/** Why the table of `dimension` cannot be given under `filters` ("" when it can): a page and a
 *  visit's entry or exit page never go together in one query. */
export function tableUnavailable(filters, dimension) {
  if (!isFilterable(dimension)) return "Not available with filters: this table cannot be filtered.";
  if (VISIT_PAGES.includes(dimension) && named(filters, ["page"])) {
    return "Not available with a page filter: visits are not kept per page, only their entry and exit pages (filter by entry page instead).";
  }
  if (dimension === "page" && named(filters, VISIT_PAGES)) {
    return "Not available with an entry or exit page filter: visits are not kept per page, only their entry and exit pages.";
  }
  return "";
}

/** The dimensions a filter on `dimension` cannot go together with (it replaces their filters). */
const conflicting = (dimension) => (dimension === "page" ? VISIT_PAGES : VISIT_PAGES.includes(dimension) ? ["page"] : []);

/** A value as a filter holds it: without the `site|` prefix of a per-site view's key. */
export function unscoped(value, site) {
  const prefix = `${site}|`;
  return site && value.startsWith(prefix) ? value.slice(prefix.length) : value;
}

/** The filters of a query string: `f=<dimension>:<value>`, one per dimension (the last one given),
 *  each added as a click adds it (so a page and an entry or exit page: the later one). */
export function readFilters(params, site = "") {
  let filters = [];
  for (const f of params.getAll("f")) {
    const colon = f.indexOf(":");
    if (colon < 1) continue;
    const dimension = f.slice(0, colon);
    const value = unscoped(f.slice(colon + 1), site);
    if (!isFilterable(dimension) || !value) continue;
    filters = withFilter(filters, dimension, value); // a new value of a dimension goes last
  }
  return filters;
}

/** The filters with `is <dimension> <value>` added, replacing another value of that dimension and
 *  a filter it cannot go together with (a page and an entry or exit page). */
export function withFilter(filters, dimension, value) {
  const replaced = [dimension, ...conflicting(dimension)];
  return [...filters.filter((f) => !replaced.includes(f.dimension)), { dimension, value }];
}

export function withoutFilter(filters, dimension) {
  return filters.filter((f) => f.dimension !== dimension);
}

/** The `f` parameters of a query string, readable (`:` and `/` left as they are). */
export function filtersQuery(filters) {
  const readable = (s) => encodeURIComponent(s).replace(/%3A/gi, ":").replace(/%2F/gi, "/");
  return filters.map((f) => `f=${readable(`${f.dimension}:${f.value}`)}`).join("&");
}

export const canFilterBy = isFilterable;

// --- POST /v2/query -------------------------------------------------------------------------------

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const day = (ms) => new Date(ms).toISOString().slice(0, 10);
const second = (ms) => new Date(ms).toISOString().slice(0, 19) + "Z";

/** The `date_range` of [from, to): whole UTC days as dates (both ends included, as in Plausible),
 *  otherwise ISO datetimes of the first and the last second of the window. */
export function dateRange(from, to) {
  if (from % DAY === 0 && to % DAY === 0) return [day(from), day(to - DAY)];
  return [second(from), second(to - 1000)];
}

/** A request body of POST /v2/query. */
export function queryBody({ site, from, to, metrics, dimensions = [], filters, order = null, limit = null }) {
  const body = {
    site_id: site,
    date_range: dateRange(from, to),
    metrics: [...metrics],
    dimensions,
    filters: filters.map((f) => ["is", f.dimension, [f.value]]),
  };
  if (order) body.order_by = [[order, "desc"]];
  if (limit) body.pagination = { limit, offset: 0 };
  return body;
}

/** The answer's rows as {value, <metric>: figure, ...} for the metrics it answers (its echoed
 *  `query.metrics`, else `asked`, in order); visitors shaped as /v1 answers give them. */
export function rowsOf(answer, site = "", asked = []) {
  const exact = Boolean(answer.exact && answer.exact.visitors);
  const names = answer.query && Array.isArray(answer.query.metrics) ? answer.query.metrics : asked;
  return (answer.results || []).map((r) => {
    const row = { value: r.dimensions.length ? unscoped(String(r.dimensions[0]), site) : null };
    names.forEach((m, i) => {
      row[m] = r.metrics[i] ?? null;
    });
    if ("visitors" in row) {
      const v = row.visitors;
      row.visitors = v == null ? null : { estimate: v, lower: null, upper: null, exact };
    }
    return row;
  });
}

/** A time dimension's value as epoch milliseconds ("2026-11-26", "2026-11-26 14:00:00", ISO). */
export function timeOf(value) {
  const text = String(value).replace(" ", "T");
  return Date.parse(/T/.test(text) ? (/[zZ]|[+-]\d\d:?\d\d$/.test(text) ? text : `${text}Z`) : `${text}T00:00:00Z`);
}

// --- the chips ------------------------------------------------------------------------------------

/** The active filters as chips ("Country is DE ×"); `remove(dimension)` when one's × is pressed. */
export function renderChips(container, filters, remove) {
  container.hidden = filters.length === 0;
  const chips = filters.map((f) => {
    const li = document.createElement("li");
    li.className = "chip";
    li.dataset.dimension = f.dimension;
    li.dataset.value = f.value;
    const text = document.createElement("span");
    text.textContent = `${FILTER_DIMENSIONS[f.dimension]} is ${f.value}`;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "remove";
    button.textContent = "×";
    button.setAttribute("aria-label", `Remove the filter ${FILTER_DIMENSIONS[f.dimension]} is ${f.value}`);
    button.addEventListener("click", () => remove(f.dimension));
    li.append(text, " ", button);
    return li;
  });
  container.querySelector("ul").replaceChildren(...chips);
}
