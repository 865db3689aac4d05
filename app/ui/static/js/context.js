// "What the model gets": a budget form built from the API's own ContextRequest schema (so every
// budget field the server accepts is offered, `cut` included once it exists), the projected
// prompt exactly as POST .../context returns it, its report, a bar of where the budget goes,
// and the timeline with what was dropped or cleared greyed out.

import { api } from "./api.js";
import { clear, errorNotice, field, h, json, num, pre, table } from "./dom.js";
import { category, legend, timeline } from "./timeline.js";
import { readDiff, readsOf, recordRead, usageFigure, usageOf } from "./usage.js";

let specPromise = null;

/** This server's OpenAPI document. */
function spec() {
  specPromise ??= fetch("/openapi.json", { cache: "no-store" }).then((r) => r.json());
  return specPromise;
}

/** The ContextRequest schema of this server's OpenAPI document. */
export function contextSchema() {
  return spec().then((doc) => doc.components.schemas.ContextRequest);
}

/** What the API says a recalled entry's score is (its own description, so the page says what
 * this server's API says, whatever scale it uses). */
async function recallScoreMeaning() {
  const doc = await spec();
  const schemas = doc.components.schemas;
  const holder = Object.values(schemas).find((sch) => sch.properties?.score && sch.properties?.session_id && sch.properties?.tokens);
  return holder?.properties.score.description ?? "";
}

function concrete(prop) {
  const options = prop.anyOf ? prop.anyOf.filter((o) => o.type !== "null") : [prop];
  return { ...prop, ...(options[0] || {}) };
}

function control(name, prop, value) {
  if (name === "recall") {
    // the recall object, as its share of the budget (the rest of it: the session's defaults)
    return h("input", {
      name, type: "number", inputmode: "numeric", value: value ?? "", min: 0,
      placeholder: "tokens (session default)", step: "1", dataset: { kind: "recall" },
    });
  }
  const p = concrete(prop);
  if (p.enum) {
    const select = h("select", { name });
    if (name !== "format") select.append(h("option", { value: "" }, "session default"));
    for (const option of p.enum) select.append(h("option", { value: option, selected: option === (value ?? p.default) }, option));
    return select;
  }
  if (p.type === "boolean") {
    return h("select", { name, dataset: { kind: "boolean" } },
      h("option", { value: "" }, "session default"),
      h("option", { value: "true", selected: value === "true" }, "true"),
      h("option", { value: "false", selected: value === "false" }, "false"));
  }
  if (p.type === "integer" || p.type === "number") {
    return h("input", {
      name, type: "number", inputmode: "numeric", value: value ?? "", placeholder: "session default",
      min: p.minimum ?? p.exclusiveMinimum, max: p.maximum && p.maximum < 1e15 ? p.maximum : undefined,
      step: p.type === "number" ? "any" : "1", dataset: { kind: p.type },
    });
  }
  return h("input", { name, value: value ?? "", placeholder: "session default" });
}

/** The JSON budget of the form: only the fields the user set. */
export function budgetOf(form, schema) {
  const body = {};
  for (const [name, prop] of Object.entries(schema.properties)) {
    const el = form.elements.namedItem(name);
    if (!el || el.value === "") continue;
    const p = concrete(prop);
    if (name === "recall") body.recall = { max_tokens: Number.parseInt(el.value, 10) };
    else if (p.type === "boolean") body[name] = el.value === "true";
    else if (p.type === "integer") body[name] = Number.parseInt(el.value, 10);
    else if (p.type === "number") body[name] = Number(el.value);
    else body[name] = el.value;
  }
  return body;
}

function rangesToSet(ranges) {
  const out = new Set();
  for (const [first, last] of ranges) for (let s = first; s <= last; s++) out.add(s);
  return out;
}

const CLEARED = /\[tool result cleared: [^\]\n]*?\(([^()\]\n]+)\)\]/g;

/** call_ids whose output the payload carries as a Tier 1 placeholder. */
export function clearedCalls(payload) {
  const text = JSON.stringify(payload);
  return new Set([...text.matchAll(CLEARED)].map((m) => m[1]));
}

const PROVIDER = {
  "openai-chat": "OpenAI Chat Completions",
  "openai-responses": "OpenAI Responses",
  anthropic: "Anthropic Messages",
  gemini: "Gemini generateContent",
};

const SEGMENTS = ["system", "summary", "messages", "tool calls", "tool outputs", "reasoning", "other", "recall", "format overhead"];

/** Where the projected tokens go. The total is the report's exact ``projected_tokens``; the
 * split is estimated from the stored per-item counts of what was kept (a cleared output counts
 * its placeholder, a trimmed reasoning item nothing) and, for recall, from the tokens the
 * report gives each line of the recall block (``recalled``), scaled to that total. */
export function spend(items, report, session, cleared) {
  const dropped = rangesToSet(report.dropped_ranges);
  const trimmed = report.notes.some((n) => n.startsWith("tier2"));
  const lastUser = Math.max(0, ...items.filter((i) => i.type === "message" && i.role === "user").map((i) => i.seq));
  const parts = Object.fromEntries(SEGMENTS.map((s) => [s, 0]));
  for (const item of items) {
    if (dropped.has(item.seq)) continue;
    let tokens = item.tokens || 0;
    if (item.call_id && cleared.has(item.call_id) && category(item) === "tool outputs") tokens = 12;
    if (trimmed && item.type === "reasoning" && item.seq < lastUser) tokens = 0;
    parts[category(item)] += tokens;
  }
  if (session.summary) parts.summary = Math.max(0, report.source_tokens - (session.token_count || 0));
  parts.recall = (report.recalled || []).reduce((sum, entry) => sum + (entry.tokens || 0), 0);
  const estimated = Object.values(parts).reduce((a, b) => a + b, 0);
  const total = report.projected_tokens;
  if (estimated > total && estimated > 0) {
    for (const k of SEGMENTS) parts[k] = Math.round((parts[k] * total) / estimated);
  } else {
    parts["format overhead"] = total - estimated;
  }
  return parts;
}

function bar(parts, limit, total) {
  const scale = Math.max(limit || 0, total, 1);
  const segments = SEGMENTS.filter((k) => parts[k] > 0);
  const legendItems = segments.map((k) =>
    h("li", { dataset: { segment: k } }, h("span", { class: `swatch seg-${k.replace(/ /g, "-")}` }), `${k}: ${num(parts[k])} tokens`));
  if (limit) legendItems.push(h("li", {}, h("span", { class: "swatch seg-free" }), `unused: ${num(Math.max(0, limit - total))} of max_tokens ${num(limit)}`));
  return h("figure", { class: "budget", id: "budget-bar" },
    h("div", { class: "bar", role: "img", "aria-label": `budget spend: ${segments.map((k) => `${k} ${parts[k]}`).join(", ")}` },
      segments.map((k) => h("span", { class: `seg seg-${k.replace(/ /g, "-")}`, style: { width: `${((100 * parts[k]) / scale).toFixed(2)}%` }, title: `${k}: ${parts[k]}` }))),
    h("figcaption", {}, h("ul", { class: "bar-legend" }, legendItems),
      h("small", { class: "hint" }, "Total = the report's projected_tokens; the split by kind is estimated from stored per-item counts.")));
}

const RECALL_HEADER = /^Earlier in this conversation\b.*\(recalled, oldest first\):$/;
const RECALL_LINE = /^\[(?:session (.+?), )?seq (\d+)(?:-(\d+))?, [^\]]*\] (.*)$/;

/** The lines of the recall block the payload carries, one per entry, keyed by
 * `session id|seq` (the block's own session: an empty session id). */
export function recallLines(payload) {
  const found = new Map();
  const visit = (value) => {
    if (typeof value === "string") {
      const lines = value.split("\n");
      const at = lines.findIndex((l) => RECALL_HEADER.test(l));
      if (at < 0) return;
      for (const line of lines.slice(at + 1)) {
        const m = RECALL_LINE.exec(line);
        if (!m) break;
        found.set(`${m[1] ?? ""}|${m[2]}`, m[4]);
      }
    } else if (Array.isArray(value)) value.forEach(visit);
    else if (value && typeof value === "object") Object.values(value).forEach(visit);
  };
  visit(payload);
  return found;
}

// Where the docs explain search and recall scores (docs/ of the repository; not served here).
const SCORE_DOC = "docs/semantic-search.md, “Hybrid ranking: meaning without losing exact tokens”";

/** What recall brought back: one message right before the newest user message (in anthropic
 * and gemini, a text part of it), each entry with its text as the prompt carries it and the
 * score the API gives it. */
function recalledView(report, payload, sessionId, scoreMeaning) {
  if (!report.recalled?.length) return null;
  const lines = recallLines(payload);
  const rows = report.recalled.map((e) => h("tr", { dataset: { seq: String(e.seq) } },
    h("td", { class: "n" }, String(e.seq)), h("td", {}, e.session_id === sessionId ? "this one" : e.session_id),
    h("td", { class: "recall-text" }, lines.get(`${e.session_id === sessionId ? "" : e.session_id}|${e.seq}`) ?? "–"),
    h("td", { class: "n score" }, String(e.score)), h("td", { class: "n" }, num(e.tokens))));
  return h("section", { id: "recalled", "aria-labelledby": "recalled-title" },
    h("h4", { id: "recalled-title" }, "Recalled"),
    h("p", { class: "muted" }, `Items outside the prompt (dropped by the budget or archived) that best match “${report.recall_query ?? ""}”, sent as text in one message right before the newest user message, oldest first. They count toward tokens and characters, not items.`),
    table(["seq", "session", "text sent", "score", "tokens"], rows, { caption: "Recall block entries" }),
    h("p", { class: "hint", id: "score-meaning" },
      "Score: the number the API returns for the entry", scoreMeaning ? ` (the API reference: “${scoreMeaning.replace(/\.$/, "")}”)` : "",
      ". It ranks the candidates of this one read against each other: higher was a better match, and recall took the best that fit its share; it is not a probability. How it is computed: ",
      h("a", { href: "/docs#/context/postContext", title: SCORE_DOC }, "the API reference"), " and ", h("cite", {}, SCORE_DOC), "."));
}

function reportView(report, payload, sessionId, scoreMeaning) {
  const rows = [
    ["Items", report.source_items, report.projected_items],
    ["Tokens", report.source_tokens, report.projected_tokens],
    ["Characters", report.source_chars, report.projected_chars],
  ].map(([name, source, projected]) => h("tr", {}, h("th", { scope: "row" }, name), h("td", { class: "n" }, num(source)), h("td", { class: "n" }, num(projected))));
  const extra = Object.entries(report).filter(([k]) => ![
    "source_items", "projected_items", "dropped_items", "source_tokens", "projected_tokens",
    "source_chars", "projected_chars", "limits_applied", "dropped_ranges", "notes",
    "recalled", "recall_query",
  ].includes(k));
  return h("section", { id: "report", "aria-labelledby": "report-title" },
    h("h3", { id: "report-title" }, "Report"),
    table(["", "Working memory", "Sent"], rows, { caption: "Source and projection" }),
    h("dl", { class: "facts" },
      h("div", {}, h("dt", {}, "Dropped items"), h("dd", { id: "dropped-items" }, num(report.dropped_items))),
      h("div", {}, h("dt", {}, "Limits applied"), h("dd", {}, report.limits_applied.join(", ") || "none")),
      h("div", { class: "wide" }, h("dt", {}, "Dropped ranges (seq)"), h("dd", { id: "dropped-ranges" },
        report.dropped_ranges.length ? report.dropped_ranges.map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`)).join(", ") : "none")),
      extra.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, typeof v === "object" ? JSON.stringify(v) : String(v))))),
    recalledView(report, payload, sessionId, scoreMeaning),
    h("h4", {}, "Notes"),
    report.notes.length ? h("ul", { id: "report-notes" }, report.notes.map((n) => h("li", {}, n))) : h("p", { class: "muted" }, "No notes."));
}

/** The format the view opens in: the one most of the session's items were written in. An
 * item appended as `canonical` counts as `openai-responses`, whose shapes the canonical model
 * follows; `canonical` itself (the stored items, with the service's own fields) stays a choice
 * in the form, never the default, since no provider receives it. */
export function sessionFormat(items) {
  const counts = new Map();
  for (const item of items) {
    const f = !item.format || item.format === "canonical" ? "openai-responses" : item.format;
    counts.set(f, (counts.get(f) ?? 0) + 1);
  }
  let best = "openai-responses";
  let most = 0;
  for (const [f, n] of counts) if (n > most) [best, most] = [f, n];
  return best;
}

function payloadOf(response) {
  const { format, version, report, ...payload } = response;
  return payload;
}

export async function contextView(panel, data, params) {
  const [schema, initialItems] = await Promise.all([contextSchema(), data.items()]);
  const opening = { format: sessionFormat(initialItems) };
  const form = h("form", { class: "budget-form", id: "budget-form", "aria-label": "budget" });
  const fields = h("div", { class: "grid" });
  for (const [name, prop] of Object.entries(schema.properties)) {
    fields.append(field(name, control(name, prop, params.get(name) ?? opening[name]), prop.description));
  }
  form.append(fields, h("button", { type: "submit" }, "Show what the model gets"));
  const out = h("div", { id: "context-result", "aria-live": "polite" });
  panel.append(h("p", { class: "muted" }, "Every field left at “session default” uses the session's config.context. The projection only reads; nothing changes."), form, out);

  const run = async () => {
    const body = budgetOf(form, schema);
    const q = new URLSearchParams({ tab: "context", ...Object.fromEntries(Object.entries(body).map(([k, v]) => [k, String(k === "recall" ? v.max_tokens : v)])) });
    history.replaceState(null, "", `${location.pathname}?${q}`);
    clear(out).append(h("p", { class: "muted" }, "Projecting…"));
    out.setAttribute("aria-busy", "true");
    try {
      const [response, items, callOf, scoreMeaning] = await Promise.all([
        api(`${data.path}/context`, { method: "POST", body }),
        data.items(),
        data.callOf(),
        recallScoreMeaning(),
      ]);
      const payload = payloadOf(response);
      const previous = recordRead(data.id, response, body);
      // The budget the page is set to: the form's max_tokens, else the session's default.
      const budget = body.max_tokens ?? data.session.config?.context?.max_tokens ?? null;
      const usage = await usageOf(data.id);
      const cleared = clearedCalls(payload);
      const report = response.report;
      // recalled items of this session (recall may bring back a sibling session's too)
      const recalled = new Set((report.recalled || []).filter((e) => e.session_id === data.id).map((e) => e.seq));
      clear(out).append(
        h("h3", {}, `Budget spend: ${num(report.projected_tokens)} tokens in ${response.format}`),
        bar(spend(items, report, data.session, cleared), body.max_tokens, report.projected_tokens),
        h("section", { "aria-labelledby": "usage-heading" },
          h("h3", { id: "usage-heading" }, "Over time"),
          usageFigure(usage, { budget, reads: readsOf(data.id).filter((r) => r.format === response.format) })),
        readDiff(previous, payload, report),
        reportView(report, payload, data.id, scoreMeaning),
        h("section", { "aria-labelledby": "prompt-title" },
          h("h3", { id: "prompt-title" }, response.format === "canonical"
            ? "The stored items (canonical: the service's own model, with its fields; no provider receives this)"
            : `The prompt, as ${PROVIDER[response.format] ?? response.format} receives it`),
          pre(json(payload), { id: "prompt", "aria-label": "rendered prompt" })),
        h("details", {}, h("summary", {}, "Whole response (JSON)"), pre(json(response), { id: "context-response" })),
        h("section", { "aria-labelledby": "ctx-timeline-title" },
          h("h3", { id: "ctx-timeline-title" }, "Working memory, with what was left out"),
          ...(() => {
            const marks = { dropped: rangesToSet(report.dropped_ranges), cleared, recalled };
            return [legend(items, marks), timeline(items, marks, callOf)];
          })()));
      out.dataset.version = String(response.version);
    } catch (err) {
      clear(out).append(errorNotice(err));
    }
    out.setAttribute("aria-busy", "false");
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); run(); });
  await run();
}
