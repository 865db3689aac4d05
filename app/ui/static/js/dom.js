// Building the page from data without innerHTML: every text the API returns is set as text,
// never parsed as markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === false || value === null || value === undefined) continue;
    if (name === "class") el.className = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    // CSSOM, not a style attribute: the page's CSP allows no inline style attributes.
    else if (name === "style" && typeof value === "object") Object.assign(el.style, value);
    else if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function timeEl(iso) {
  return h("time", { datetime: iso }, fmtTime(iso));
}

export function num(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : String(n ?? "");
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function pre(value, attrs = {}) {
  return h("pre", { class: "code", tabindex: "0", ...attrs }, typeof value === "string" ? value : json(value));
}

/** A status line for errors and confirmations, read out by screen readers. */
export function notice(kind, ...text) {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, ...text);
}

export function errorNotice(err) {
  const p = err?.problem || {};
  const title = p.title ? `${p.title}: ` : "";
  return notice("error", `${title}${err?.message || err}`, p.status ? ` (${p.status})` : "");
}

export function table(headers, rows, { caption, className = "" } = {}) {
  return h(
    "div",
    { class: "table-wrap", tabindex: "0", role: "region", "aria-label": caption || "table" },
    h(
      "table",
      { class: className },
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows),
    ),
  );
}

/** Text whose `backticked` words (the OpenAPI descriptions are Markdown) become <code>, so a
 * hint never shows raw backticks. Anything else stays text: no Markdown is interpreted. */
export function inlineCode(text) {
  if (typeof text !== "string") return text;
  return text.split("`").map((part, i) => (i % 2 ? h("code", {}, part) : part));
}

export function field(label, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  const hintId = hint ? `${id}-hint` : null;
  if (hintId) control.setAttribute("aria-describedby", hintId);
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    control,
    hint ? h("small", { id: hintId, class: "hint" }, inlineCode(hint)) : null,
  );
}
