// The operation log, oldest first, a page at a time.

import { api } from "./api.js";
import { errorNotice, h, num, timeEl } from "./dom.js";

export async function eventsView(panel, data) {
  const body = h("tbody");
  const more = h("button", { type: "button", id: "events-more" }, "Load more");
  let cursor = null;
  const load = async () => {
    try {
      const page = await api(`${data.path}/events`, { params: { limit: 200, after_seq: cursor ?? undefined } });
      for (const e of page.items) {
        body.append(h("tr", { dataset: { seq: String(e.seq) } },
          h("td", { class: "n" }, num(e.seq)), h("td", {}, e.type), h("td", { class: "n" }, num(e.version)),
          h("td", {}, e.actor ?? "—"), h("td", {}, timeEl(e.created_at)),
          h("td", {}, h("code", { class: "meta" }, JSON.stringify(e.data ?? {}))),
          h("td", {}, h("code", { class: "small" }, e.request_id ?? ""))));
      }
      cursor = page.next_cursor;
      more.hidden = cursor === null || cursor === undefined;
    } catch (err) {
      panel.append(errorNotice(err));
    }
  };
  more.addEventListener("click", load);
  const headers = ["Seq", "Type", "Version", "Key", "When", "Data", "Request id"];
  panel.append(h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "events" },
    h("table", { id: "events" }, h("caption", {}, "Event log"), h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))), body)), more);
  await load();
}
