// Pictures over time for "What the model gets": working memory's tokens at every version (the
// server replays them from the event log: GET /ui/api/sessions/{id}/usage), the budget the form
// is set to, the compactions, and the reads this tab made (a read writes nothing, so the
// service keeps no record of it: the page keeps its own, in sessionStorage). Plain SVG.

import { api, enc } from "./api.js";
import { h, num } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const READS = "session-memory.reads.";
const LAST = "session-memory.last-read.";
const MAX_READS = 200;

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function load(key, fallback) {
  try {
    return JSON.parse(sessionStorage.getItem(key)) ?? fallback;
  } catch {
    return fallback;
  }
}

function save(key, value) {
  try {
    sessionStorage.setItem(key, JSON.stringify(value));
    return true;
  } catch {
    return false; // storage full (a very large prompt): that read is not kept
  }
}

/** The reads this tab made of a session, oldest first. */
export function readsOf(sessionId) {
  return load(READS + sessionId, []);
}

/** Keeps a read (its version, format, tokens sent and tokens of working memory) for the chart,
 * and its prompt for the next read's diff; returns the previous read of the same format. */
export function recordRead(sessionId, response, budget) {
  const report = response.report;
  const reads = readsOf(sessionId);
  reads.push({
    version: response.version, format: response.format, at: new Date().toISOString(),
    sent: report.projected_tokens, source: report.source_tokens, max_tokens: budget.max_tokens ?? null,
  });
  save(READS + sessionId, reads.slice(-MAX_READS));
  const key = `${LAST}${sessionId}.${response.format}`;
  const previous = load(key, null);
  const { format, version, report: _, ...payload } = response;
  save(key, { version, budget, stable_prefix: report.stable_prefix ?? 0, payload });
  return previous;
}

export function usageOf(sessionId) {
  return api(`/ui/api/sessions/${enc(sessionId)}/usage`);
}

/** The chart: a line of working memory's stored tokens per version, a dashed budget line, a
 * mark at each compaction, a dot for each read (tokens sent; its share of working memory in
 * its title). */
export function usageChart(usage, { budget, reads }) {
  const W = 900, H = 240, L = 64, R = 16, T = 14, B = 34;
  const points = usage.points;
  const versions = [...points.map((p) => p.version), ...reads.map((r) => r.version)];
  const v0 = Math.min(...versions, 1), v1 = Math.max(...versions, v0 + 1);
  const top = Math.max(1, budget || 0, ...points.map((p) => p.tokens), ...reads.map((r) => r.sent)) * 1.08;
  const x = (v) => L + ((v - v0) / (v1 - v0)) * (W - L - R);
  const y = (t) => T + (1 - t / top) * (H - T - B);
  const svg = s("svg", {
    viewBox: `0 0 ${W} ${H}`, class: "usage-chart", id: "usage-chart", role: "img",
    "aria-labelledby": "usage-title usage-desc",
    dataset: { points: points.length, reads: reads.length, compactions: usage.compactions.length, budget: budget ?? "" },
  });
  const last = points.at(-1);
  svg.append(
    s("title", { id: "usage-title" }, "Working memory over time"),
    s("desc", { id: "usage-desc" }, `${points.length} versions; now ${num(last?.tokens ?? 0)} tokens in ${num(last?.items ?? 0)} items` +
      (budget ? `; budget ${num(budget)} tokens` : "") + `; ${usage.compactions.length} compaction(s); ${reads.length} read(s) charted`));
  // axes: 0, half and the top of the token scale; the first and last version
  for (const t of [0, top / 2, top / 1.08]) {
    svg.append(s("line", { x1: L, x2: W - R, y1: y(t), y2: y(t), class: "grid" }),
      s("text", { x: L - 6, y: y(t) + 4, class: "tick", "text-anchor": "end" }, num(Math.round(t))));
  }
  for (const v of new Set([v0, Math.round((v0 + v1) / 2), v1])) {
    svg.append(s("text", { x: x(v), y: H - B + 16, class: "tick", "text-anchor": "middle" }, `v${v}`));
  }
  svg.append(s("text", { x: (L + W - R) / 2, y: H - 4, class: "axis", "text-anchor": "middle" }, "session version"),
    s("text", { x: 12, y: T + (H - T - B) / 2, class: "axis", "text-anchor": "middle", transform: `rotate(-90 12 ${T + (H - T - B) / 2})` }, "tokens"));
  for (const c of usage.compactions) {
    svg.append(s("g", { class: "compaction", dataset: { version: c.version, compactedTokens: c.compacted_tokens } },
      s("title", {}, `compaction at v${c.version} (${c.policy}${c.automatic ? ", automatic" : ""}): ${num(c.compacted_items)} items, ${num(c.compacted_tokens)} tokens left working memory; summary ${num(c.summary_tokens)} tokens`),
      s("line", { x1: x(c.version), x2: x(c.version), y1: T, y2: H - B }),
      s("path", { d: `M${x(c.version) - 6},${T} h12 l-6,9 z` })));
  }
  if (budget) {
    svg.append(s("g", { class: "budget-line", dataset: { tokens: budget } },
      s("title", {}, `budget: max_tokens ${num(budget)}`),
      s("line", { x1: L, x2: W - R, y1: y(budget), y2: y(budget) }),
      s("text", { x: W - R - 4, y: y(budget) - 5, "text-anchor": "end" }, `budget ${num(budget)}`)));
  }
  if (points.length) {
    // Working memory holds its count from one write to the next: a step line.
    let d = `M${x(points[0].version)},${y(points[0].tokens)}`;
    for (const p of points.slice(1)) d += ` H${x(p.version)} V${y(p.tokens)}`;
    svg.append(s("path", { d, class: "wm-line" }));
    for (const p of points) {
      svg.append(s("circle", { cx: x(p.version), cy: y(p.tokens), r: 3, class: "wm", dataset: { version: p.version, tokens: p.tokens } },
        s("title", {}, `v${p.version} ${p.event}: ${num(p.items)} items, ${num(p.tokens)} tokens`)));
    }
  }
  for (const r of reads) {
    const share = r.source ? r.sent / r.source : 0;
    svg.append(s("path", {
      d: `M${x(r.version)},${y(r.sent) - 6} l6,6 l-6,6 l-6,-6 z`, class: "read",
      dataset: { version: r.version, tokens: r.sent, share: share.toFixed(3) },
    }, s("title", {}, `read at v${r.version} (${r.format}): sent ${num(r.sent)} tokens, ${Math.round(100 * share)}% of the ${num(r.source)} tokens in working memory and summary`)));
  }
  return svg;
}

export function usageFigure(usage, { budget, reads }) {
  const lastRead = reads.at(-1);
  return h("figure", { class: "usage", id: "usage" },
    usageChart(usage, { budget, reads }),
    h("figcaption", {},
      h("ul", { class: "bar-legend" },
        h("li", {}, h("span", { class: "swatch key-wm" }), "tokens in working memory (stored counts, summary not included)"),
        budget ? h("li", {}, h("span", { class: "swatch key-budget" }), `budget: max_tokens ${num(budget)}`) : h("li", {}, "no max_tokens set: no budget line"),
        usage.compactions.length ? h("li", {}, h("span", { class: "swatch key-compaction" }), `compaction (${usage.compactions.length})`) : null,
        h("li", {}, h("span", { class: "swatch key-read" }), `reads this tab made (${reads.length})`)),
      lastRead ? h("p", { id: "read-share" }, `This read sent ${num(lastRead.sent)} of ${num(lastRead.source)} tokens (${Math.round((100 * lastRead.sent) / Math.max(1, lastRead.source))}%).`) : null,
      h("small", { class: "hint" }, "The service records no read (a projection writes nothing), so the dots are the reads this browser tab made; hover a mark for its figures."),
      usage.complete ? null : h("small", { class: "hint" }, usage.notes.join("; "))));
}

// --- the read-to-read diff -------------------------------------------------------------

const LISTS = ["messages", "input", "contents", "items"];

/** The prompt as a list of entries: the payload's message list (`messages`, `input`,
 * `contents` or `items`, what stable_prefix counts), and each other top-level field (system,
 * instructions, tools) as one entry of its own. */
export function entriesOf(payload) {
  const list = LISTS.find((k) => Array.isArray(payload?.[k]));
  const head = Object.entries(payload ?? {}).filter(([k]) => k !== list).map(([k, v]) => ({ key: k, value: v }));
  return { list, head, body: list ? payload[list] : [] };
}

function textOf(value) {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return value.map(textOf).filter(Boolean).join(" ");
  if (value && typeof value === "object") {
    if (typeof value.text === "string") return value.text;
    for (const k of ["content", "parts", "output", "summary"]) if (value[k] != null && value[k] !== "") return textOf(value[k]);
    if (value.functionCall) return `${value.functionCall.name}(${JSON.stringify(value.functionCall.args ?? {})})`;
    if (value.functionResponse) return `→ ${JSON.stringify(value.functionResponse.response ?? {})}`;
    if (value.type === "function_call" || value.type === "tool_use") return `${value.name}(${value.arguments ?? JSON.stringify(value.input ?? {})})`;
    if (Array.isArray(value.tool_calls)) return value.tool_calls.map((c) => `${c.function?.name}(${c.function?.arguments ?? ""})`).join(" ");
    return JSON.stringify(value);
  }
  return value === null || value === undefined ? "" : String(value);
}

/** One entry on one line: its role (or type) and the start of its text. */
export function entryLine(entry) {
  const who = entry?.role ?? entry?.type ?? "";
  const text = textOf(entry).replace(/\s+/g, " ").trim();
  return `${who}${who ? ": " : ""}${text.length > 160 ? `${text.slice(0, 160)}…` : text}`;
}

/** The longest common subsequence of two lists of strings, as steps: ["same", i, j],
 * ["added", -, j] (in b only), ["removed", i, -] (in a only), in order. */
export function diffSteps(a, b) {
  const n = a.length, m = b.length;
  // Common head and tail first: between two reads of a live session most of it is unchanged.
  let start = 0;
  while (start < n && start < m && a[start] === b[start]) start++;
  let end = 0;
  while (end < n - start && end < m - start && a[n - 1 - end] === b[m - 1 - end]) end++;
  const A = a.slice(start, n - end), B = b.slice(start, m - end);
  const rows = A.length + 1, cols = B.length + 1;
  const L = new Uint32Array(rows * cols);
  for (let i = A.length - 1; i >= 0; i--) {
    for (let j = B.length - 1; j >= 0; j--) {
      L[i * cols + j] = A[i] === B[j] ? L[(i + 1) * cols + j + 1] + 1 : Math.max(L[(i + 1) * cols + j], L[i * cols + j + 1]);
    }
  }
  const steps = [];
  for (let k = 0; k < start; k++) steps.push(["same", k, k]);
  let i = 0, j = 0;
  while (i < A.length || j < B.length) {
    if (i < A.length && j < B.length && A[i] === B[j]) { steps.push(["same", start + i, start + j]); i++; j++; }
    else if (j < B.length && (i === A.length || L[i * cols + j + 1] >= L[(i + 1) * cols + j])) { steps.push(["added", null, start + j]); j++; }
    else { steps.push(["removed", start + i, null]); i++; }
  }
  for (let k = 0; k < end; k++) steps.push(["same", n - end + k, m - end + k]);
  return steps;
}

/** What this prompt sends that the previous read's did not, and what it stopped sending, its
 * stable prefix (report.stable_prefix leading entries) marked. */
export function readDiff(previous, payload, report) {
  const section = h("section", { id: "read-diff", "aria-labelledby": "read-diff-title" },
    h("h3", { id: "read-diff-title" }, "Since the previous read"));
  if (!previous) {
    section.append(h("p", { class: "muted", id: "read-diff-none" },
      "This is the first read of this session in this format from this tab. Show it again after the agent has written (or with another budget) to see what the prompt gained and lost."));
    return section;
  }
  const before = entriesOf(previous.payload), now = entriesOf(payload);
  const a = before.body.map((e) => JSON.stringify(e)), b = now.body.map((e) => JSON.stringify(e));
  const steps = diffSteps(a, b);
  const stable = report.stable_prefix ?? 0;
  const added = steps.filter(([k]) => k === "added").length, removed = steps.filter(([k]) => k === "removed").length;
  const kept = steps.length - added - removed;
  // Did the previous read's stable prefix come back byte for byte (what a provider's prompt cache needs)?
  const prevStable = previous.stable_prefix ?? 0;
  let held = 0;
  while (held < prevStable && held < a.length && held < b.length && a[held] === b[held]) held++;
  const heads = [...new Set([...before.head, ...now.head].map((e) => e.key))].filter((k) =>
    JSON.stringify(before.head.find((e) => e.key === k)?.value) !== JSON.stringify(now.head.find((e) => e.key === k)?.value));
  section.append(
    h("p", { id: "read-diff-summary" },
      `Against the read at version ${previous.version}: `, h("strong", { class: "added" }, `${num(added)} sent now, not before`), "; ",
      h("strong", { class: "removed" }, `${num(removed)} sent before, not now`), `; ${num(kept)} unchanged (of ${num(b.length)} ${now.list ?? "entries"}).`,
      heads.length ? ` Changed outside the list: ${heads.join(", ")}.` : ""),
    h("p", { id: "stable-held", class: prevStable && held < prevStable ? "notice warn" : "muted" },
      prevStable
        ? (held === prevStable
          ? `The previous read's stable prefix (${prevStable} entries) is sent again unchanged: a provider's prompt cache still hits.`
          : `The previous read's stable prefix (${prevStable} entries) changed at entry ${held + 1}: a provider's prompt cache misses from there.`)
        : "The previous read had no stable prefix (report.stable_prefix 0)."));
  const list = h("ol", { class: "read-diff", "aria-label": "prompt entries, changed ones marked" });
  let run = [];
  const flush = () => {
    if (!run.length) return;
    const stableIn = run.filter((j) => j < stable).length;
    list.append(h("li", { class: "same", dataset: { count: run.length } },
      `${num(run.length)} unchanged entr${run.length === 1 ? "y" : "ies"} (#${run[0] + 1}–#${run.at(-1) + 1})`,
      stableIn ? h("span", { class: "badge stable" }, `${stableIn} in the stable prefix`) : null));
    run = [];
  };
  for (const [kind, i, j] of steps) {
    if (kind === "same") {
      if (j === stable && stable > 0) { flush(); list.append(h("li", { class: "stable-end" }, `end of the stable prefix: the first ${stable} entries repeat byte for byte while only appends happen`)); }
      run.push(j);
      continue;
    }
    flush();
    if (kind === "added" && j === stable && stable > 0) list.append(h("li", { class: "stable-end" }, `end of the stable prefix: the first ${stable} entries repeat byte for byte while only appends happen`));
    const entry = kind === "added" ? now.body[j] : before.body[i];
    list.append(h("li", { class: kind, dataset: { index: kind === "added" ? j : i } },
      h("span", { class: "sign", "aria-label": kind }, kind === "added" ? "+" : "−"), " ",
      h("span", { class: "pos" }, kind === "added" ? `#${j + 1} now` : `#${i + 1} before`), " ",
      kind === "added" && j < stable ? h("span", { class: "badge stable" }, "stable prefix") : null, " ",
      entryLine(entry)));
  }
  flush();
  section.append(list);
  return section;
}
