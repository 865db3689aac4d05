// Search: in one session (its tab) or across the tenant (/ui/search), in a mode (hybrid, the
// API's default; full text; by meaning), each hit with what both rankers scored it.

import { api, enc } from "./api.js";
import { clear, errorNotice, field, h } from "./dom.js";
import { itemText } from "./timeline.js";

export function searchForm(panel, { sessionId = null, params = new URLSearchParams() } = {}) {
  const q = h("input", { name: "q", type: "search", required: true, value: params.get("q") || "", maxlength: "1000", id: "search-q" });
  const scope = h("select", { name: "scope" },
    h("option", { value: "memory" }, "working memory"),
    h("option", { value: "history", selected: params.get("scope") === "history" }, "history (archived too)"));
  const chosen = params.get("mode") || "hybrid";
  const mode = h("select", { name: "mode", id: "search-mode" },
    h("option", { value: "hybrid", selected: chosen === "hybrid" }, "hybrid (meaning and words)"),
    h("option", { value: "fulltext", selected: chosen === "fulltext" }, "words (full text)"),
    h("option", { value: "semantic", selected: chosen === "semantic" }, "meaning (semantic)"));
  const out = h("div", { id: "search-results", "aria-live": "polite" });
  const form = h("form", { class: "filters", role: "search", "aria-label": sessionId ? "search this session" : "search every session" },
    field("Words", q), field("In", scope), field("Mode", mode), h("button", { type: "submit" }, "Search"));
  const score = (value) => (value === null || value === undefined ? "–" : Number(value).toFixed(3));
  const excerpt = (item) => {
    const text = itemText(item);
    return text.length > 240 ? `${text.slice(0, 239)}…` : text;
  };
  const path = sessionId ? `/v1/sessions/${enc(sessionId)}/search` : "/v1/search";
  let cursor = null;
  const run = async (more = false) => {
    if (!more) { clear(out); cursor = null; }
    const u = new URLSearchParams(location.search);
    u.set("q", q.value); u.set("scope", scope.value); u.set("mode", mode.value);
    history.replaceState(null, "", `${location.pathname}?${u}`);
    try {
      const page = await api(path, { params: { q: q.value, scope: scope.value, mode: mode.value, limit: 50, cursor: cursor ?? undefined } });
      out.querySelector(".more")?.remove();
      out.dataset.mode = page.mode;
      if (!more && page.mode !== mode.value) {
        out.append(h("p", { class: "muted" }, `Answered as ${page.mode}: semantic search is off on this server.`));
      }
      if (!more && !page.items.length) out.append(h("p", { class: "muted" }, "Nothing found."));
      let list = out.querySelector("ol");
      if (!list) { list = h("ol", { class: "hits" }); out.append(list); }
      for (const hit of page.items) {
        const href = `/ui/sessions/${enc(hit.session_id)}${hit.archived ? "?archived=1" : ""}`;
        list.append(h("li", { class: hit.archived ? "archived" : "" },
          h("div", { class: "item-head" },
            sessionId ? null : h("a", { href }, hit.session_id),
            h("span", { class: "seq" }, `#${hit.seq}`), h("span", { class: "kind" }, typeof hit.item?.type === "string" ? hit.item.type : "item"),
            hit.archived ? h("span", { class: "badge" }, `archived${hit.archived_reason ? `: ${hit.archived_reason}` : ""}`) : null,
            h("span", { class: "tokens", title: "the rank's score; then what each ranker scored it" },
              `score ${score(hit.score)} · words ${score(hit.scores?.fulltext)} · meaning ${score(hit.scores?.semantic)}`)),
          h("p", { class: "snippet" }, hit.snippet || excerpt(hit.item))));
      }
      cursor = page.next_cursor;
      if (cursor !== null && cursor !== undefined) {
        out.append(h("button", { type: "button", class: "more", onclick: () => run(true) }, "More results"));
      }
      out.dataset.count = String(list.children.length);
    } catch (err) {
      out.append(errorNotice(err));
    }
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); run(); });
  panel.append(form, out);
  if (q.value) run();
}

export async function searchPage(main, params) {
  main.append(h("h1", {}, "Search every session"));
  searchForm(main, { params });
}
