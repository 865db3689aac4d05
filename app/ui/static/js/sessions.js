// /ui/: the tenant's sessions, newest first, filtered by id prefix (the API's `prefix`) and by
// metadata. The API pages sessions by id; this page reads those pages (up to LOAD_CAP sessions)
// and orders them by last update, then pages through them itself.

import { allPages } from "./api.js";
import { field, h, notice, num, table, timeEl } from "./dom.js";
import { navigate } from "./nav.js";

const PAGE = 25;
const LOAD_CAP = 10000;

/** ``key=value`` terms must all match the metadata (values compared as text); other words
 * must appear somewhere in the metadata's JSON. */
export function metadataMatches(metadata, filter) {
  const terms = filter.trim().split(/\s+/).filter(Boolean);
  const text = JSON.stringify(metadata ?? {}).toLowerCase();
  return terms.every((term) => {
    const eq = term.indexOf("=");
    if (eq > 0) {
      const value = metadata?.[term.slice(0, eq)];
      const want = term.slice(eq + 1);
      return value !== undefined && (typeof value === "string" ? value : JSON.stringify(value)) === want;
    }
    return text.includes(term.toLowerCase());
  });
}

export async function sessionsPage(main, params) {
  const prefix = params.get("prefix") || "";
  const meta = params.get("metadata") || "";
  const page = Math.max(1, Number.parseInt(params.get("page") || "1", 10) || 1);

  const prefixInput = h("input", { name: "prefix", value: prefix, spellcheck: "false", autocomplete: "off" });
  const metaInput = h("input", { name: "metadata", value: meta, spellcheck: "false", autocomplete: "off", placeholder: "agent=coder" });
  const form = h("form", { class: "filters", role: "search", "aria-label": "filter sessions" },
    field("Id prefix", prefixInput),
    field("Metadata", metaInput, "key=value (all must match) or words found in the metadata"),
    h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = new URLSearchParams();
    if (prefixInput.value) q.set("prefix", prefixInput.value);
    if (metaInput.value) q.set("metadata", metaInput.value);
    navigate(`/ui/${q.toString() ? `?${q}` : ""}`);
  });
  document.title = "Sessions · Inspector";
  main.append(h("h1", {}, "Sessions"), form);

  const { items, truncated } = await allPages("/v1/sessions", {
    params: { limit: 1000, prefix: prefix || undefined }, cursorParam: "cursor", cap: LOAD_CAP,
  });
  const matching = items
    .filter((s) => !meta || metadataMatches(s.metadata, meta))
    .sort((a, b) => (b.updated_at || "").localeCompare(a.updated_at || "") || a.id.localeCompare(b.id));
  const pages = Math.max(1, Math.ceil(matching.length / PAGE));
  const current = Math.min(page, pages);
  const shown = matching.slice((current - 1) * PAGE, current * PAGE);

  if (truncated) {
    main.append(notice("warn", `More than ${num(LOAD_CAP)} sessions: showing the newest of the first ${num(LOAD_CAP)} by id. Narrow the list with an id prefix.`));
  }
  main.append(h("p", { class: "muted", id: "session-count" }, `${num(matching.length)} session(s), newest first`));
  const rows = shown.map((s) =>
    h("tr", { dataset: { session: s.id } },
      h("th", { scope: "row" }, h("a", { href: `/ui/sessions/${encodeURIComponent(s.id)}` }, s.id)),
      h("td", {}, h("code", { class: "meta" }, JSON.stringify(s.metadata ?? {}))),
      h("td", { class: "n" }, num(s.item_count)),
      h("td", { class: "n" }, num(s.token_count)),
      h("td", {}, timeEl(s.updated_at))));
  main.append(table(["Id", "Metadata", "Items", "Tokens", "Updated"], rows, { caption: "Sessions", className: "sessions" }));

  const link = (n, text) => {
    const q = new URLSearchParams(params);
    q.set("page", String(n));
    return h("a", { href: `/ui/?${q}`, class: "button" }, text);
  };
  main.append(h("nav", { class: "pager", "aria-label": "pages of sessions" },
    current > 1 ? link(current - 1, "← Newer") : null,
    h("span", {}, `Page ${current} of ${pages}`),
    current < pages ? link(current + 1, "Older →") : null));
}
