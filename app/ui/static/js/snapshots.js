// Snapshots: the list (newest first), a diff of one against the current state, and with the
// write scope: create one, restore one (the response names the automatic undo snapshot).

import { allPages, api, enc } from "./api.js";
import { clear, errorNotice, field, h, notice, num, table, timeEl } from "./dom.js";
import { state } from "./state.js";
import { navigate } from "./nav.js";

const ENVELOPE = new Set(["seq", "tokens", "chars", "created_at", "format"]);

function body(item) {
  return JSON.stringify(Object.fromEntries(Object.entries(item).filter(([k]) => !ENVELOPE.has(k)).sort(([a], [b]) => a.localeCompare(b))));
}

function short(item) {
  const c = item.content ?? item.output ?? item.arguments ?? item.summary ?? "";
  const text = typeof c === "string" ? c : JSON.stringify(c);
  return `${item.type}${item.role ? ` (${item.role})` : ""}${item.name ? ` ${item.name}` : ""}: ${text.slice(0, 100)}`;
}

/** Items by id: only in the snapshot, only now, in both with another body. */
export function diffItems(snapshotItems, currentItems) {
  const before = new Map(snapshotItems.map((i) => [i.id, i]));
  const after = new Map(currentItems.map((i) => [i.id, i]));
  return {
    removed: snapshotItems.filter((i) => !after.has(i.id)),
    added: currentItems.filter((i) => !before.has(i.id)),
    changed: currentItems.filter((i) => before.has(i.id) && body(before.get(i.id)) !== body(i)),
    same: currentItems.filter((i) => before.has(i.id) && body(before.get(i.id)) === body(i)).length,
  };
}

function diffList(title, items, kind) {
  return h("section", { class: `diff ${kind}` },
    h("h4", {}, `${title}: ${num(items.length)}`),
    items.length ? h("ul", {}, items.slice(0, 200).map((i) => h("li", {}, h("code", {}, `#${i.seq}`), " ", short(i)))) : null,
    items.length > 200 ? h("p", { class: "muted" }, `and ${num(items.length - 200)} more`) : null);
}

async function showDiff(out, data, snapshot) {
  clear(out).append(h("p", { class: "muted" }, "Comparing…"));
  const [doc, session] = await Promise.all([api(`${data.path}/snapshots/${enc(snapshot.id)}`), api(data.path)]);
  const current = (await allPages(`${data.path}/items`, { params: { limit: 1000 } })).items;
  const d = diffItems(doc.items, current);
  const fields = ["summary", "metadata", "config"].filter((k) => JSON.stringify(doc[k] ?? null) !== JSON.stringify(session[k] ?? null));
  clear(out).append(h("section", { class: "card", id: "snapshot-diff", "aria-labelledby": "diff-title" },
    h("h3", { id: "diff-title" }, `Snapshot ${snapshot.label ? `“${snapshot.label}” ` : ""}(version ${doc.version}) → now (version ${session.version})`),
    h("p", {}, `${num(d.same)} item(s) unchanged; `, fields.length ? `changed: ${fields.join(", ")}` : "summary, metadata and config unchanged"),
    diffList("Only in the snapshot (gone now)", d.removed, "removed"),
    diffList("New since the snapshot", d.added, "added"),
    diffList("Changed", d.changed, "changed")));
}

function restoreFlow(out, data, snapshot) {
  clear(out).append(h("div", { class: "card confirm", role: "group", "aria-labelledby": "restore-q" },
    h("p", { id: "restore-q" }, `Restore snapshot ${snapshot.id}${snapshot.label ? ` (“${snapshot.label}”)` : ""}? Working memory and summary are replaced by the snapshot's${snapshot.item_count === undefined ? "" : ` ${num(snapshot.item_count)}`} item(s); the current state is saved as a snapshot first, so this can be undone.`),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "danger", id: "restore-confirm", onclick: async () => {
        try {
          const r = await api(`${data.path}/restore`, { method: "POST", body: { snapshot_id: snapshot.id } });
          sessionStorage.setItem("inspector.last-restore", JSON.stringify(r));
          navigate(`${location.pathname}?tab=snapshots&restored=1`, { replace: true });
        } catch (err) {
          out.append(errorNotice(err));
        }
      } }, "Restore"),
      h("button", { type: "button", onclick: () => clear(out) }, "Cancel"))));
  out.querySelector("#restore-confirm").focus();
}

export async function snapshotsView(panel, data, params) {
  const out = h("div", { id: "snapshot-out", "aria-live": "polite" });
  if (params.get("restored") && sessionStorage.getItem("inspector.last-restore")) {
    const r = JSON.parse(sessionStorage.getItem("inspector.last-restore"));
    sessionStorage.removeItem("inspector.last-restore");
    panel.append(notice("ok", `Restored ${num(r.restored_items)} item(s) from ${r.snapshot_id}. The state before the restore is saved as snapshot `,
      h("code", { id: "undo-snapshot" }, r.undo_snapshot_id), ": restore it to undo. ",
      state.canWrite ? h("button", { type: "button", class: "link", id: "undo-restore", onclick: () => restoreFlow(out, data, { id: r.undo_snapshot_id, label: "undo" }) }, "Undo this restore…") : null));
  }
  if (state.canWrite) {
    const label = h("input", { name: "label", maxlength: "200" });
    const form = h("form", { class: "card inline", id: "snapshot-form", "aria-label": "create a snapshot" },
      field("Label (optional)", label), h("button", { type: "submit", id: "snapshot-create" }, "Create snapshot"));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await api(`${data.path}/snapshots`, { method: "POST", body: label.value.trim() ? { label: label.value.trim() } : {} });
        navigate(`${location.pathname}?tab=snapshots`, { replace: true });
      } catch (err) {
        clear(out).append(errorNotice(err));
      }
    });
    panel.append(form);
  }
  const { items } = await allPages(`${data.path}/snapshots`, { params: { limit: 100 }, cursorParam: "cursor", cap: 1000 });
  const rows = items.map((s) => h("tr", { dataset: { snapshot: s.id } },
    h("th", { scope: "row" }, h("code", {}, s.id)), h("td", {}, s.label ?? ""), h("td", { class: "n" }, num(s.version)),
    h("td", { class: "n" }, num(s.item_count)), h("td", {}, timeEl(s.created_at)),
    h("td", { class: "actions" },
      h("button", { type: "button", class: "diff-button", onclick: () => showDiff(out, data, s).catch((err) => clear(out).append(errorNotice(err))) }, "Diff with now"),
      state.canWrite ? h("button", { type: "button", class: "restore-button", onclick: () => restoreFlow(out, data, s) }, "Restore…") : null)));
  panel.append(items.length
    ? table(["Id", "Label", "Version", "Items", "Created", ""], rows, { caption: "Snapshots, newest first", className: "snapshots" })
    : h("p", { class: "muted" }, "No snapshot yet."), out);
}
