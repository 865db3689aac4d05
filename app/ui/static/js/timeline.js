// Working memory as a timeline: one entry per item (type, role, tokens), a tool call and its
// output(s) shown together, images inline (data: URLs only; a remote URL stays a link, so
// opening a session never makes the browser call another host).

import { h, num, timeEl } from "./dom.js";

const ENVELOPE = new Set([
  "id", "seq", "tokens", "chars", "pinned", "metadata", "created_at", "format", "archived",
  "archived_reason",
]);
const SHORT = 700;
const SHORT_LINES = 8;

export const isOutput = (item) => typeof item.type === "string" && item.type.endsWith("_output");
export const isCall = (item) =>
  typeof item.type === "string" && (item.type.endsWith("_call") || item.type === "tool_use") &&
  typeof item.call_id === "string";

/** The category an item's tokens count under in the budget bar. */
export function category(item) {
  if (item.type === "message") {
    return item.role === "system" || item.role === "developer" ? "system" : "messages";
  }
  if (item.type === "reasoning") return "reasoning";
  if (isOutput(item)) return "tool outputs";
  if (isCall(item)) return "tool calls";
  return "other";
}

/** Whether a URL from an item may become a link: http(s) only (data: images are shown inline). */
export function linkable(url) {
  try {
    return ["http:", "https:"].includes(new URL(url).protocol);
  } catch {
    return false;
  }
}

function imageUrl(part) {
  const url = part.url ?? part.image_url ?? part.source?.url;
  if (typeof url === "string") return url;
  if (url && typeof url.url === "string") return url.url;
  if (part.source?.type === "base64" && part.source.data) {
    return `data:${part.source.media_type || "image/png"};base64,${part.source.data}`;
  }
  return null;
}

function longText(text) {
  const lines = text.split("\n");
  if (text.length <= SHORT && lines.length <= SHORT_LINES) return h("div", { class: "text" }, text);
  return h(
    "div",
    { class: "text" },
    lines.slice(0, SHORT_LINES).join("\n").slice(0, SHORT),
    "…",
    h("details", {}, h("summary", {}, `show all ${num(text.length)} characters`), h("div", { class: "text" }, text)),
  );
}

function partView(part, item) {
  if (typeof part === "string") return longText(part);
  if (!part || typeof part !== "object") return longText(JSON.stringify(part));
  if (typeof part.text === "string") return longText(part.text);
  if (/image/.test(part.type || "")) {
    const url = imageUrl(part);
    if (url && url.startsWith("data:image/")) {
      return h("figure", { class: "image" },
        h("img", { src: url, alt: `image in item ${item.seq}`, loading: "lazy" }),
        h("figcaption", {}, `${part.type}${part.detail ? `, detail ${part.detail}` : ""}`));
    }
    // Only a web address becomes a link: `javascript:` and any other scheme is shown as text.
    if (url && linkable(url)) return h("p", { class: "image-link" }, "image (not loaded): ", h("a", { href: url, rel: "noreferrer noopener", target: "_blank" }, url.slice(0, 120)));
    if (url) return h("p", { class: "image-link refused" }, "image (not a web address, not linked): ", h("code", {}, url.slice(0, 120)));
    return h("p", { class: "image-link" }, `image ${part.file_id ? `file ${part.file_id}` : "(no URL)"}`);
  }
  return h("pre", { class: "code small" }, JSON.stringify(part, null, 2));
}

function contentView(content, item) {
  if (content === null || content === undefined) return null;
  if (typeof content === "string") return longText(content);
  if (Array.isArray(content)) return content.map((p) => partView(p, item));
  return partView(content, item);
}

function bodyView(item) {
  if (item.type === "message") return contentView(item.content, item);
  if (item.type === "reasoning") {
    const summary = Array.isArray(item.summary)
      ? item.summary.map((s) => (typeof s === "string" ? s : s?.text ?? JSON.stringify(s))).join("\n")
      : "";
    return [
      summary ? longText(summary) : null,
      typeof item.content === "string" && item.content ? longText(item.content) : null,
      item.encrypted_content ? h("p", { class: "muted" }, `encrypted content, ${num(String(item.encrypted_content).length)} characters`) : null,
    ];
  }
  if (isCall(item) && item.type === "function_call") {
    return h("pre", { class: "code small" }, `${item.name}(${item.arguments ?? ""})`);
  }
  if (isOutput(item) && "output" in item) return contentView(item.output, item);
  const rest = Object.fromEntries(Object.entries(item).filter(([k]) => !ENVELOPE.has(k)));
  return h("pre", { class: "code small" }, JSON.stringify(rest, null, 2));
}

function partText(part) {
  if (typeof part === "string") return part;
  if (part && typeof part.text === "string") return part.text;
  return JSON.stringify(part);
}

/** An item's text on one line, for lists that show an item briefly (search hits, diffs):
 * message content, a call's name and arguments, an output, reasoning's summary and content;
 * any other item (opaque, untyped) as its JSON without the envelope. */
export function itemText(item) {
  if (!item || typeof item !== "object") return "";
  const content = item.type === "message" ? item.content
    : isOutput(item) && "output" in item ? item.output : undefined;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map(partText).join(" ");
  if (item.type === "function_call") return `${item.name}(${item.arguments ?? ""})`;
  if (item.type === "reasoning") {
    const summary = Array.isArray(item.summary) ? item.summary.map(partText) : [];
    return [...summary, typeof item.content === "string" ? item.content : ""].filter(Boolean).join(" ");
  }
  return JSON.stringify(Object.fromEntries(Object.entries(item).filter(([k]) => !ENVELOPE.has(k))));
}

function label(item) {
  if (item.type === "message") return `${item.role} message`;
  if (item.name) return `${item.type} · ${item.name}`;
  return item.type;
}

function entry(item, marks, tag = "li") {
  const classes = ["item", `t-${String(item.type).replace(/[^a-z0-9_-]/gi, "")}`];
  if (item.type === "message") classes.push(`r-${item.role}`);
  const states = [];
  if (marks.dropped?.has(item.seq)) { classes.push("dropped"); states.push("not sent"); }
  if (isOutput(item) && marks.cleared?.has(item.call_id)) { classes.push("cleared"); states.push("output cleared"); }
  if (marks.compacted?.has(item.seq)) { classes.push("compacted"); states.push("would be compacted"); }
  if (marks.recalled?.has(item.seq)) { classes.push("recalled"); states.push("recalled as text"); }
  if (item.archived) { classes.push("archived"); states.push(`archived${item.archived_reason ? `: ${item.archived_reason}` : ""}`); }
  return h(
    tag,
    { class: classes.join(" "), dataset: { seq: String(item.seq), type: String(item.type) } },
    h("div", { class: "item-head" },
      h("span", { class: "seq", title: "seq" }, `#${item.seq}`),
      h("span", { class: "kind" }, label(item)),
      item.call_id ? h("code", { class: "call-id" }, item.call_id) : null,
      h("span", { class: "tokens" }, `${num(item.tokens)} tok`),
      item.pinned ? h("span", { class: "badge" }, "pinned") : null,
      states.map((s) => h("span", { class: "badge state" }, s)),
      h("span", { class: "when" }, timeEl(item.created_at)),
    ),
    h("div", { class: "item-body" }, bodyView(item)),
  );
}

/** ``marks``: ``dropped`` (Set of seq), ``cleared`` (Set of call_id), ``compacted`` (Set of
 * seq), ``recalled`` (Set of seq). ``callOf``: output seq -> the seq of the call it answers, as
 * the server pairs them (the projection's rule: ``SessionData.callOf``); an output is shown
 * with its call when that call is among ``items``, on its own otherwise. */
export function timeline(items, marks = {}, callOf = new Map()) {
  const shown = new Set(items.map((i) => i.seq));
  const outputsOf = new Map();
  for (const item of items) {
    const call = callOf.get(item.seq);
    if (call === undefined || !shown.has(call)) continue;
    if (!outputsOf.has(call)) outputsOf.set(call, []);
    outputsOf.get(call).push(item);
  }
  const paired = new Set([...outputsOf.values()].flat().map((o) => o.seq));
  const list = h("ol", { class: "timeline", "aria-label": "working memory, oldest first" });
  for (const item of items) {
    if (paired.has(item.seq)) continue; // shown with its call
    const li = entry(item, marks);
    if (outputsOf.has(item.seq)) {
      li.classList.add("pair");
      li.append(h("div", { class: "outputs" }, outputsOf.get(item.seq).map((o) => entry(o, marks, "div"))));
    }
    list.append(li);
  }
  return list;
}

/** A key to the marks ``timeline`` puts on ``items`` with ``marks``: only those that occur
 * (none: no legend). */
export function legend(items, marks = {}) {
  const shown = [
    ["dropped", "not sent", (i) => marks.dropped?.has(i.seq)],
    ["cleared", "tool output cleared", (i) => isOutput(i) && marks.cleared?.has(i.call_id)],
    ["compacted", "would be compacted", (i) => marks.compacted?.has(i.seq)],
    ["recalled", "recalled as text", (i) => marks.recalled?.has(i.seq)],
    ["archived", "archived (dashed: no longer in working memory)", (i) => i.archived],
  ].filter(([, , applies]) => items.some(applies));
  if (!shown.length) return null;
  return h("p", { class: "legend" }, shown.map(([cls, text]) => [h("span", { class: `swatch ${cls}`, dataset: { mark: cls } }, text), " "]));
}
