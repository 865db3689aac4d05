// /ui/: the tenant's sessions, newest first, filtered by id prefix (the API's `prefix`) and by
// metadata. The API lists them newest first (`order=updated`, keyset-paged): a page of the
// inspector reads API pages until it has PAGE sessions that match the metadata filter (or has
// looked at SCAN_CAP sessions), and "Older" goes on from the API's cursor.

import { api } from "./api.js";
import { field, h, notice, num, pre, table, timeEl } from "./dom.js";
import { navigate } from "./nav.js";
import { state } from "./state.js";

const PAGE = 25;
const SCAN_CAP = 2000;

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

/** What a new server shows instead of an empty table: how the first session comes to be, as
 * commands to paste (this server's address; the key header when auth is on) and where the
 * walk-through is. */
export function emptyState() {
  const origin = location.origin;
  const auth = state.me?.auth === "on" ? ` -H "Authorization: Bearer $KEY"` : "";
  const json = ` -H 'content-type: application/json'`;
  const commands = [
    `curl -s -X POST ${origin}/v1/sessions${auth}${json} \\`,
    `  -d '{"id": "demo", "metadata": {"agent": "me"}}'`,
    `curl -s -X POST ${origin}/v1/sessions/demo/items${auth}${json} \\`,
    `  -d '{"format": "openai-chat", "items": [{"role": "user", "content": "Hello"}]}'`,
  ].join("\n");
  return h("section", { class: "card empty", id: "empty-state", "aria-labelledby": "empty-title" },
    h("h2", { id: "empty-title" }, "No sessions yet"),
    h("p", {}, "A session is created by the first write of an agent (or of you) to the API. To make one now and see it here, run:"),
    pre(commands, { id: "first-session" }),
    h("p", {}, "Then reload this page. Every operation, with its fields and examples, is in the ",
      h("a", { href: "/docs#/sessions/createSession", id: "empty-docs" }, "API reference"),
      " (served by this server, no network needed); the README's “A walk-through with curl” and docs/api-guide.md go on from there (appending turns, reading the prompt under a budget, compacting)."));
}

export async function sessionsPage(main, params) {
  const prefix = params.get("prefix") || "";
  const meta = params.get("metadata") || "";
  const cursor = params.get("cursor") || "";

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

  // API pages, newest first, until a page of matches (the server orders and pages; nothing
  // here reads the whole tenant).
  const shown = [];
  let next = cursor || null;
  let scanned = 0;
  do {
    const page = await api("/v1/sessions", {
      params: { order: "updated", limit: meta ? 100 : PAGE, prefix: prefix || undefined, cursor: next ?? undefined },
    });
    scanned += page.items.length;
    shown.push(...page.items.filter((s) => !meta || metadataMatches(s.metadata, meta)));
    next = page.next_cursor ?? null;
  } while (next !== null && shown.length < PAGE && scanned < SCAN_CAP);

  if (next !== null && shown.length < PAGE) {
    main.append(notice("warn", `Looked at ${num(scanned)} sessions for this page; older ones may match too (Older →). Narrow the list with an id prefix.`));
  }
  if (!shown.length && !prefix && !meta && !cursor) {
    main.append(emptyState());
    return;
  }
  main.append(h("p", { class: "muted", id: "session-count" },
    `${num(shown.length)} session(s) on this page, newest first`));
  const rows = shown.map((s) =>
    h("tr", { dataset: { session: s.id } },
      h("th", { scope: "row" }, h("a", { href: `/ui/sessions/${encodeURIComponent(s.id)}` }, s.id)),
      h("td", {}, h("code", { class: "meta" }, JSON.stringify(s.metadata ?? {}))),
      h("td", { class: "n" }, num(s.item_count)),
      h("td", { class: "n" }, num(s.token_count)),
      h("td", {}, timeEl(s.updated_at))));
  main.append(table(["Id", "Metadata", "Items", "Tokens", "Updated"], rows, { caption: "Sessions", className: "sessions" }));

  const link = (to, text) => {
    const q = new URLSearchParams(params);
    q.delete("page");
    if (to) q.set("cursor", to);
    else q.delete("cursor");
    return h("a", { href: `/ui/${q.toString() ? `?${q}` : ""}`, class: "button" }, text);
  };
  main.append(h("nav", { class: "pager", "aria-label": "pages of sessions" },
    cursor ? link(null, "← Newest") : null,
    next !== null ? link(next, "Older →") : null));
}
