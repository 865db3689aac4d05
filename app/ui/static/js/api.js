// The REST client of the inspector: every call goes to this server's /v1 API with the key the
// user gave for this tab (sessionStorage: gone when the tab closes), or none with auth off.

const KEY_STORAGE = "session-memory.api-key";

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

export function storedKey() {
  try {
    return sessionStorage.getItem(KEY_STORAGE);
  } catch {
    return null;
  }
}

export function storeKey(key) {
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
}

function query(params) {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") q.set(name, String(value));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

/** Fetch ``path`` (``/v1/...``) as JSON; a problem document becomes an ``ApiError``. */
export async function api(path, { method = "GET", params, body, key = storedKey() } = {}) {
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method, headers, credentials: "omit", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path + query(params), init);
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { detail: text.slice(0, 200) };
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

/** Every page of a ``{items, next_cursor}`` list (every list takes its ``next_cursor`` back as ``cursor``). */
export async function allPages(path, { params = {}, cursorParam = "cursor", cap = 20000 } = {}) {
  const out = [];
  let cursor = null;
  for (;;) {
    const page = await api(path, { params: { ...params, [cursorParam]: cursor ?? undefined } });
    out.push(...page.items);
    cursor = page.next_cursor;
    if (cursor === null || cursor === undefined || out.length >= cap) {
      return { items: out, truncated: cursor !== null && cursor !== undefined };
    }
  }
}

export const enc = encodeURIComponent;
export const sessionPath = (id) => `/v1/sessions/${enc(id)}`;
