// Full-text search: in one session (its tab) or across the tenant (/ui/search).

import { api, enc } from "./api.js";
import { clear, errorNotice, field, h } from "./dom.js";

export function searchForm(panel, { sessionId = null, params = new URLSearchParams() } = {}) {
  const q = h("input", { name: "q", type: "search", required: true, value: params.get("q") || "", maxlength: "1000", id: "search-q" });
  const scope = h("select", { name: "scope" },
    h("option", { value: "memory" }, "working memory"),
    h("option", { value: "history", selected: params.get("scope") === "history" }, "history (archived too)"));
  const out = h("div", { id: "search-results", "aria-live": "polite" });
  const form = h("form", { class: "filters", role: "search", "aria-label": sessionId ? "search this session" : "search every session" },
    field("Words", q), field("In", scope), h("button", { type: "submit" }, "Search"));
  const path = sessionId ? `/v1/sessions/${enc(sessionId)}/search` : "/v1/search";
  let cursor = null;
  const run = async (more = false) => {
    if (!more) { clear(out); cursor = null; }
    const u = new URLSearchParams(location.search);
    u.set("q", q.value); u.set("scope", scope.value);
    history.replaceState(null, "", `${location.pathname}?${u}`);
    try {
      const page = await api(path, { params: { q: q.value, scope: scope.value, limit: 50, cursor: cursor ?? undefined } });
      out.querySelector(".more")?.remove();
      if (!more && !page.items.length) out.append(h("p", { class: "muted" }, "Nothing found."));
      let list = out.querySelector("ol");
      if (!list) { list = h("ol", { class: "hits" }); out.append(list); }
      for (const hit of page.items) {
        const href = `/ui/sessions/${enc(hit.session_id)}${hit.archived ? "?archived=1" : ""}`;
        list.append(h("li", { class: hit.archived ? "archived" : "" },
          h("div", { class: "item-head" },
            sessionId ? null : h("a", { href }, hit.session_id),
            h("span", { class: "seq" }, `#${hit.seq}`), h("span", { class: "kind" }, hit.item?.type ?? ""),
            hit.archived ? h("span", { class: "badge" }, `archived${hit.archived_reason ? `: ${hit.archived_reason}` : ""}`) : null,
            h("span", { class: "tokens" }, `score ${Number(hit.score).toFixed(3)}`)),
          h("p", { class: "snippet" }, hit.snippet ?? "")));
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
