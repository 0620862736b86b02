// The dashboard's filters (as in Plausible): a click on a value in a table adds `is <dimension>
// <value>`; several combine with AND. They live in the page's query string as repeated `f`
// parameters (`?f=country:DE&f=page:https://shop.example.com/pricing`), are shown as removable
// chips, and while any is active the panels are read from POST /v2/query (the Plausible Stats API
// v2 shape) instead of the GET /v1 endpoints.
//
// This module knows the filters and that endpoint's request and answer; dashboard.js decides what
// each panel asks and how it is drawn.

// The dimensions a filter may name (those of POST /v2/query), with the words of a chip.
export const FILTER_DIMENSIONS = {
  page: "Page",
  referrer: "Referrer",
  country: "Country",
  device: "Device",
  channel: "Channel",
  utm_source: "utm_source",
  utm_medium: "utm_medium",
  utm_campaign: "utm_campaign",
};

// The metrics POST /v2/query gives under combined filters; the visit metrics have no figure then.
export const FILTER_METRICS = ["visitors", "pageviews"];
export const NOT_WITH_FILTERS = "not available with filters";

const isFilterable = (dimension) => Object.hasOwn(FILTER_DIMENSIONS, dimension);

/** A value as a filter holds it: without the `site|` prefix of a per-site view's key. */
export function unscoped(value, site) {
  const prefix = `${site}|`;
  return site && value.startsWith(prefix) ? value.slice(prefix.length) : value;
}

/** The filters of a query string: `f=<dimension>:<value>`, one per dimension (the last one given). */
export function readFilters(params, site = "") {
  const byDimension = new Map();
  for (const f of params.getAll("f")) {
    const colon = f.indexOf(":");
    if (colon < 1) continue;
    const dimension = f.slice(0, colon);
    const value = unscoped(f.slice(colon + 1), site);
    if (!isFilterable(dimension) || !value) continue;
    byDimension.delete(dimension); // a new value of a dimension goes last, as a click would put it
    byDimension.set(dimension, value);
  }
  return [...byDimension].map(([dimension, value]) => ({ dimension, value }));
}

/** The filters with `is <dimension> <value>` added (replacing another value of that dimension). */
export function withFilter(filters, dimension, value) {
  return [...filters.filter((f) => f.dimension !== dimension), { dimension, value }];
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
export function queryBody({ site, from, to, dimensions = [], filters, order = null, limit = null }) {
  const body = {
    site_id: site,
    date_range: dateRange(from, to),
    metrics: [...FILTER_METRICS],
    dimensions,
    filters: filters.map((f) => ["is", f.dimension, [f.value]]),
  };
  if (order) body.order_by = [[order, "desc"]];
  if (limit) body.pagination = { limit, offset: 0 };
  return body;
}

/** The answer's rows as {value, visitors, pageviews}; visitors shaped as /v1 answers give them. */
export function rowsOf(answer, site = "") {
  const exact = Boolean(answer.exact && answer.exact.visitors);
  const at = (name) => answer.query && Array.isArray(answer.query.metrics) ? answer.query.metrics.indexOf(name) : -1;
  return (answer.results || []).map((r) => {
    const figures = {};
    FILTER_METRICS.forEach((m, i) => {
      const j = at(m) >= 0 ? at(m) : i;
      figures[m] = r.metrics[j];
    });
    const v = figures.visitors;
    return {
      value: r.dimensions.length ? unscoped(String(r.dimensions[0]), site) : null,
      pageviews: figures.pageviews,
      visitors: v == null ? null : { estimate: v, lower: null, upper: null, exact },
    };
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
