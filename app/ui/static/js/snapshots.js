// Snapshots: the list (newest first), a diff of one against the current state, and with the
// write scope: create one, restore one (the response names the automatic undo snapshot).

import { allPages, api, enc } from "./api.js";
import { clear, errorNotice, field, h, notice, num, table, timeEl } from "./dom.js";
import { state } from "./state.js";
import { navigate } from "./nav.js";
import { itemText } from "./timeline.js";

// What says where an item sat or how it was written rather than what it is. An exported item
// kept in a provider format also carries its ``record`` (the item as it was sent), which the
// items listing does not: the two are compared by their canonical view, like with like.
const ENVELOPE = new Set(["seq", "tokens", "chars", "created_at", "format", "record"]);

function comparable(item) {
  return Object.fromEntries(Object.entries(item).filter(([k]) => !ENVELOPE.has(k)));
}

const canonicalJson = (value) => JSON.stringify(value, (_, v) =>
  (v && typeof v === "object" && !Array.isArray(v)
    ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)))
    : v));

/** The fields of two versions of an item that differ, each with its value before and after. */
export function changedFields(before, after) {
  const a = comparable(before);
  const b = comparable(after);
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()
    .filter((k) => canonicalJson(a[k]) !== canonicalJson(b[k]))
    .map((k) => ({ field: k, before: a[k], after: b[k] }));
}

/** Items by id: only in the snapshot, only now, in both with another body (``changed``:
 * ``{before, after, fields}``). */
export function diffItems(snapshotItems, currentItems) {
  const before = new Map(snapshotItems.map((i) => [i.id, i]));
  const after = new Map(currentItems.map((i) => [i.id, i]));
  const both = currentItems.filter((i) => before.has(i.id))
    .map((i) => ({ before: before.get(i.id), after: i, fields: changedFields(before.get(i.id), i) }));
  return {
    removed: snapshotItems.filter((i) => !after.has(i.id)),
    added: currentItems.filter((i) => !before.has(i.id)),
    changed: both.filter((d) => d.fields.length),
    same: both.filter((d) => !d.fields.length).length,
  };
}

function short(item) {
  const kind = typeof item.type === "string" ? item.type : "item";
  return `${kind}${item.role ? ` (${item.role})` : ""}${item.name ? ` ${item.name}` : ""}: ${itemText(item).slice(0, 100)}`;
}

const brief = (value) => {
  const text = value === undefined ? "(absent)" : typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 160 ? `${text.slice(0, 159)}…` : text;
};

function diffList(title, items, kind) {
  return h("section", { class: `diff ${kind}` },
    h("h4", {}, `${title}: ${num(items.length)}`),
    items.length ? h("ul", {}, items.slice(0, 200).map((i) => h("li", {}, h("code", {}, `#${i.seq}`), " ", short(i)))) : null,
    items.length > 200 ? h("p", { class: "muted" }, `and ${num(items.length - 200)} more`) : null);
}

function changedList(changes) {
  return h("section", { class: "diff changed" },
    h("h4", {}, `Changed: ${num(changes.length)}`),
    changes.length ? h("ul", {}, changes.slice(0, 200).map(({ before, after, fields }) =>
      h("li", { dataset: { id: after.id } },
        h("code", {}, `#${before.seq} → #${after.seq}`), " ", short(after),
        h("dl", { class: "changes" }, fields.map(({ field, before: was, after: now }) => [
          h("dt", {}, field),
          h("dd", {}, h("del", {}, brief(was)), " → ", h("ins", {}, brief(now))),
        ]))))) : null,
    changes.length > 200 ? h("p", { class: "muted" }, `and ${num(changes.length - 200)} more`) : null);
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
    changedList(d.changed)));
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
