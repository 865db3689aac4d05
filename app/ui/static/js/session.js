// /ui/sessions/{id}: the session's header and its views, one per tab (?tab=...).

import { allPages, api, enc, sessionPath } from "./api.js";
import { append, clear, errorNotice, h, notice, num, pre, timeEl } from "./dom.js";
import { contextView } from "./context.js";
import { compactionsView } from "./compactions.js";
import { snapshotsView } from "./snapshots.js";
import { eventsView } from "./events.js";
import { searchForm } from "./search.js";
import { legend, timeline } from "./timeline.js";

const TABS = [
  ["memory", "Working memory"],
  ["context", "What the model gets"],
  ["compactions", "Compactions"],
  ["snapshots", "Snapshots"],
  ["events", "Events"],
  ["search", "Search"],
];

// A timeline of more items than this would be too slow to draw; the page says it stopped.
const ITEM_CAP = 20000;

/** Everything one session view needs, loaded lazily and reloaded after a write. */
export class SessionData {
  constructor(id) {
    this.id = id;
    this.path = sessionPath(id);
    this.session = null;
    this._items = null;
    this._history = null;
    this._pairs = new Map();
  }

  async load() {
    this.session = await api(this.path);
    this._items = null;
    this._history = null;
    this._pairs = new Map();
    return this.session;
  }

  /** Working memory, oldest first (every page of GET .../items). */
  async items() {
    if (!this._items) {
      const page = await allPages(`${this.path}/items`, { params: { limit: 1000 }, cap: ITEM_CAP });
      this._items = page.items;
      this.truncated = page.truncated;
    }
    return this._items;
  }

  /** Which call each output answers (output seq -> call seq), in working memory or (with
   * ``archived``) in the whole history: the server pairs them by the projection's rule, so
   * the page never pairs otherwise than the prompt does (a call id can repeat). */
  async callOf(archived = false) {
    if (!this._pairs.has(archived)) {
      const params = archived ? { archived: "true" } : {};
      this._pairs.set(archived, api(`/ui/api/sessions/${enc(this.id)}/pairs`, { params })
        .then((r) => new Map(Object.entries(r.call_of).map(([o, c]) => [Number(o), c]))));
    }
    return this._pairs.get(archived);
  }

  /** Every item ever appended, archived ones included. */
  async history() {
    this._history ??= (await allPages(`${this.path}/history`, { params: { limit: 1000 }, cap: ITEM_CAP })).items;
    return this._history;
  }
}

/** Metadata or config as formatted JSON, folded: its line says how many keys it holds. */
function jsonBlock(name, id, value) {
  const keys = value && typeof value === "object" ? Object.keys(value).length : 0;
  return h("details", { class: "json", id },
    h("summary", {}, `${name} `, h("span", { class: "muted" }, keys ? `${keys} key${keys === 1 ? "" : "s"}` : "empty")),
    pre(value ?? {}, { "aria-label": name }));
}

/** The session's name and counts on one line, then the tabs: metadata, config and summary
 * are folded into one line (opened on demand), so a tab's own content starts at the top of
 * the screen instead of below the summary. */
function header(data) {
  const s = data.session;
  const fact = (label, value, id) => h("div", {}, h("dt", {}, label), h("dd", id ? { id } : {}, value));
  return h("header", { class: "session-head" },
    h("p", { class: "crumbs" }, h("a", { href: "/ui/" }, "Sessions"), " / "),
    h("h1", {}, s.id),
    h("dl", { class: "facts inline-facts" },
      fact("Version", num(s.version), "session-version"),
      fact("Items", num(s.item_count), "session-items"),
      fact("Tokens", num(s.token_count)),
      fact("Created", timeEl(s.created_at)),
      fact("Updated", timeEl(s.updated_at))),
    h("details", { class: "session-details", id: "session-details" },
      h("summary", {}, "Summary, metadata and config ",
        h("span", { class: "muted" }, s.summary ? `(summary: ${num(s.summary.length)} characters)` : "(no summary yet)")),
      h("section", { class: "summary", "aria-labelledby": "summary-title" },
        h("h2", { id: "summary-title" }, "Summary"),
        s.summary ? pre(s.summary, { id: "summary" }) : h("p", { class: "muted", id: "summary" }, "No summary (no compaction has written one: a window compaction writes none).")),
      jsonBlock("Metadata", "session-metadata", s.metadata),
      jsonBlock("Config", "session-config", s.config)));
}

function tabs(data, active) {
  const base = `/ui/sessions/${encodeURIComponent(data.id)}`;
  return h("nav", { class: "tabs", "aria-label": "session views" },
    h("ul", {}, TABS.map(([name, label]) =>
      h("li", {}, h("a", { href: `${base}?tab=${name}`, "aria-current": name === active ? "page" : false, dataset: { tab: name } }, label)))));
}

async function memoryView(panel, data, params) {
  const archived = params.get("archived") === "1";
  const toggle = h("input", { type: "checkbox", id: "show-archived", checked: archived });
  const list = h("div", { "aria-live": "polite" });
  const render = async () => {
    clear(list);
    const [items, callOf] = await Promise.all([
      toggle.checked ? data.history() : data.items(), data.callOf(toggle.checked),
    ]);
    if (data.truncated && !toggle.checked) list.append(notice("warn", `Showing the oldest ${num(ITEM_CAP)} items only.`));
    append(list, [
      h("p", { class: "muted", id: "timeline-count" },
        toggle.checked
          ? `${num(items.length)} item(s) ever appended, ${num(items.filter((i) => i.archived).length)} archived`
          : `${num(items.length)} item(s) in working memory`),
      legend(items),
      timeline(items, {}, callOf)]);
  };
  toggle.addEventListener("change", async () => {
    const q = new URLSearchParams(location.search);
    if (toggle.checked) q.set("archived", "1"); else q.delete("archived");
    history.replaceState(null, "", `${location.pathname}?${q}`);
    await render().catch((err) => list.append(errorNotice(err)));
  });
  panel.append(
    h("div", { class: "toolbar" }, h("label", { class: "check" }, toggle, " Show archived items (compacted, popped, cleared, replaced)")),
    list);
  await render();
}

export async function sessionPage(main, id, params) {
  const data = new SessionData(id);
  await data.load();
  const active = TABS.some(([name]) => name === params.get("tab")) ? params.get("tab") : "memory";
  const panel = h("section", { class: "panel", id: "panel", "aria-label": TABS.find(([n]) => n === active)[1] });
  main.append(header(data), tabs(data, active), panel);
  document.title = `${id} · Inspector`;
  const views = {
    memory: memoryView,
    context: contextView,
    compactions: compactionsView,
    snapshots: snapshotsView,
    events: eventsView,
    search: (p, d, q) => searchForm(p, { sessionId: d.id, params: q }),
  };
  await views[active](panel, data, params);
}
