// Compactions: past results with their structured fields, and (with the write scope) a compact
// form that always previews first (dry_run) and commits only the previewed parameters.

import { allPages, api } from "./api.js";
import { clear, errorNotice, field, h, notice, num, pre, timeEl } from "./dom.js";
import { state } from "./state.js";
import { legend, timeline } from "./timeline.js";
import { navigate } from "./nav.js";

const LISTS = ["completed", "pending", "decisions", "errors", "test_results", "open_questions", "read_files", "modified_files"];

export function resultView(result, { heading = "h3", id } = {}) {
  const lists = LISTS.filter((k) => Array.isArray(result[k]) && result[k].length);
  const report = result.report || {};
  return h("article", { class: "card compaction", id, dataset: { compaction: result.id || "" } },
    h(heading, {}, `${result.policy} compaction`, result.created_at ? [" · ", timeEl(result.created_at)] : ""),
    h("dl", { class: "facts" },
      h("div", {}, h("dt", {}, "Id"), h("dd", {}, h("code", {}, result.id || "—"))),
      h("div", {}, h("dt", {}, "Compacted items"), h("dd", { class: "compacted-items" }, num(result.compacted_items))),
      report.items_before !== undefined ? h("div", {}, h("dt", {}, "Items"), h("dd", {}, `${num(report.items_before)} → ${num(report.items_after)}`)) : null,
      report.tokens_before !== undefined ? h("div", {}, h("dt", {}, "Tokens"), h("dd", {}, `${num(report.tokens_before)} → ${num(report.tokens_after)}`)) : null,
      report.compacted_ranges ? h("div", {}, h("dt", {}, "Compacted seq"), h("dd", { class: "compacted-ranges" }, report.compacted_ranges.map(([a, b]) => `${a}–${b}`).join(", ") || "none")) : null,
      result.model ? h("div", {}, h("dt", {}, "Model"), h("dd", {}, result.model)) : null,
      result.goal ? h("div", { class: "wide" }, h("dt", {}, "Goal"), h("dd", {}, result.goal)) : null),
    lists.map((k) => h("section", { class: "field-list" }, h("h4", {}, k.replace(/_/g, " ")), h("ul", {}, result[k].map((v) => h("li", {}, typeof v === "string" ? v : JSON.stringify(v)))))),
    result.tools_called && Object.keys(result.tools_called).length
      ? h("section", { class: "field-list" }, h("h4", {}, "tools called"), h("ul", {}, Object.entries(result.tools_called).map(([k, v]) => h("li", {}, `${k}: ${v}`))))
      : null,
    report.notes?.length ? h("section", { class: "field-list" }, h("h4", {}, "notes"), h("ul", {}, report.notes.map((n) => h("li", {}, n)))) : null,
    result.summary ? h("details", {}, h("summary", {}, "Summary text"), pre(result.summary)) : null);
}

function compactForm(panel, data) {
  const policy = h("select", { name: "policy" }, ["structured", "window", "llm"].map((p) => h("option", { value: p }, p)));
  const keepItems = h("input", { name: "keep_last_items", type: "number", min: "0", placeholder: "newest user turn" });
  const keepTokens = h("input", { name: "keep_last_tokens", type: "number", min: "0" });
  const pinned = h("input", { name: "pinned_prefix_items", type: "number", min: "0", placeholder: "0" });
  const instructions = h("input", { name: "instructions", placeholder: "LLM only" });
  const model = h("input", { name: "model", placeholder: "LLM only" });
  const preview = h("button", { type: "submit", id: "compact-preview" }, "Preview (dry run)");
  const commit = h("button", { type: "button", id: "compact-commit", class: "danger", disabled: true }, "Compact now");
  const out = h("div", { id: "compact-result", "aria-live": "polite" });
  const form = h("form", { class: "card", id: "compact-form", "aria-labelledby": "compact-title" },
    h("h3", { id: "compact-title" }, "Compact"),
    h("p", { class: "muted" }, "A preview computes the result and changes nothing; “Compact now” then commits exactly what was previewed."),
    h("div", { class: "grid" }, field("Policy", policy), field("Keep last items", keepItems), field("Keep last tokens", keepTokens),
      field("Pinned prefix items", pinned), field("Instructions", instructions), field("Model", model)),
    h("div", { class: "actions" }, preview, commit), out);
  let previewed = null;
  const body = () => {
    const b = { policy: policy.value };
    for (const el of [keepItems, keepTokens, pinned]) if (el.value !== "") b[el.name] = Number.parseInt(el.value, 10);
    for (const el of [instructions, model]) if (el.value.trim()) b[el.name] = el.value.trim();
    return b;
  };
  form.addEventListener("input", () => { previewed = null; commit.disabled = true; });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clear(out).append(h("p", { class: "muted" }, "Computing a preview…"));
    try {
      const request = body();
      const [result, items, callOf] = await Promise.all([
        api(`${data.path}/compact`, { method: "POST", body: { ...request, dry_run: true } }),
        data.items(),
        data.callOf(),
      ]);
      const compacted = new Set();
      for (const [a, b] of result.report?.compacted_ranges || []) for (let s = a; s <= b; s++) compacted.add(s);
      clear(out).append(
        notice("ok", `Preview only: nothing was changed. ${num(result.compacted_items)} item(s) would leave working memory.`),
        resultView(result, { heading: "h4", id: "compact-preview-result" }),
        h("details", {}, h("summary", {}, "Working memory with the items this would compact"), legend(items, { compacted }), timeline(items, { compacted }, callOf)));
      previewed = request;
      commit.disabled = false;
    } catch (err) {
      clear(out).append(errorNotice(err));
    }
  });
  commit.addEventListener("click", async () => {
    if (!previewed) return;
    commit.disabled = true;
    try {
      const result = await api(`${data.path}/compact`, { method: "POST", body: { ...previewed, dry_run: false } });
      previewed = null;
      clear(out).append(notice("ok", `Compacted ${num(result.compacted_items)} item(s).`), resultView(result, { heading: "h4" }));
      setTimeout(() => navigate(`${location.pathname}?tab=compactions`, { replace: true }), 0);
    } catch (err) {
      out.append(errorNotice(err));
    }
  });
  panel.append(form);
}

export async function compactionsView(panel, data) {
  if (state.canWrite) compactForm(panel, data);
  const { items } = await allPages(`${data.path}/compactions`, { params: { limit: 100 }, cursorParam: "cursor", cap: 500 });
  panel.append(h("h2", {}, "Past compactions"),
    items.length ? h("div", { id: "compactions" }, items.map((r) => resultView(r))) : h("p", { class: "muted", id: "compactions" }, "No compaction yet."));
}
