/**
 * Between the Vercel AI SDK's `ModelMessage`s (the `ai` package: system, user, assistant and
 * tool messages of text, image, file, reasoning, tool-call, tool-result and tool-approval
 * parts) and the Responses API input items the service understands.
 *
 * The stored format is `openai-responses`, chosen because its items are flat (one item per
 * text run, reasoning, call or output, so the projection can keep or drop each, and never
 * splits a call from its output) and the most general the service reads:
 *
 * - a run of text, image and file parts is one `message` item (`input_text` / `output_text`,
 *   `input_image` by data URL, URL or `file_id`, `input_file` by `file_data` / `file_url` /
 *   `file_id`; a file given as inline text is `input_text`); string content stays a string;
 * - `tool-call` is a `function_call` (`arguments` is `JSON.stringify(input)`), `tool-result`
 *   a `function_call_output` (its output as text: `text` and `error-text` as they are, `json`
 *   and `error-json` as JSON, `execution-denied` as its reason, `content` as `input_text` /
 *   `input_image` / `input_file` parts), `reasoning` a `reasoning` item (its text the summary,
 *   OpenAI's `reasoningEncryptedContent` its `encrypted_content`);
 * - what has no Responses counterpart (`tool-approval-request`, `tool-approval-response`,
 *   `custom`, `reasoning-file`, a part type this module does not know, an empty message) is an
 *   opaque item of type `ai_sdk_part`, which the service stores as sent and other formats
 *   leave out.
 *
 * So the service counts tokens, searches, budgets, compacts and renders the conversation
 * like any other. Everything the Responses shape does not hold (the message it belongs to,
 * its role, `providerOptions`, `providerExecuted`, `toolName`, `mediaType`, which of the SDK's
 * data shapes held the bytes: base64, `Uint8Array`, `Buffer`, `ArrayBuffer`, `URL`, a tagged
 * `{ type: "data" | "url" | "reference" | "text" }`, even keys present with the value
 * `undefined`) travels in the item's `ai_sdk` field, which the service keeps with the item.
 * `fromServiceItems(toServiceItems(messages))` is deep-equal (`assert.deepStrictEqual`) to
 * `messages`; an item whose `ai_sdk` no longer matches its payload (the projection cleared a
 * tool output or trimmed reasoning), and items other clients wrote, are read by their
 * payload alone.
 */

import type { JsonRecord } from "./agentsItems.js";

/** The extra field of a stored item: how to rebuild the `ai` parts it holds. */
export const AI_FIELD = "ai_sdk";
/** The opaque item type for parts the Responses API has no counterpart for. */
export const AI_PART_TYPE = "ai_sdk_part";
/** Version of the `ai_sdk` field's layout. */
const LAYOUT = 1;

/** What `toServiceItems` takes and `fromServiceItems` gives: the `ai` package's
 * `ModelMessage`, seen structurally (this module imports nothing from `ai`). */
export interface AiMessage {
  role: string;
  content: unknown;
  [key: string]: unknown;
}

type Part = JsonRecord & { type?: unknown };

interface AiField {
  v: number;
  /** Which message the item belongs to: items of one message share it and follow each other. */
  m: string;
  /** The message without its content (role, providerOptions, ...), encoded. */
  msg: JsonRecord;
  /** The position of the item's first part in the message's content (absent: 0). */
  i?: number;
  /** `"s"`: the message's content is a string (this item's content). */
  c?: "s";
  /** What each part held beyond the item's payload, encoded; a whole part for opaque items. */
  parts: JsonRecord[];
}

// --- JSON with the values JSON lacks --------------------------------------------------------

const TAG = "$ai";

/** Whether `value` is JSON that `JSON.parse(JSON.stringify(value))` gives back deep-equal. */
function isExactJson(value: unknown): boolean {
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value) && !Object.is(value, -0);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!(i in value) || !isExactJson(value[i])) return false;
    return true;
  }
  if (isPlainObject(value)) return Object.values(value).every((v) => v !== undefined && isExactJson(v));
  return false;
}

/** A JSON form of `value` that `decode` turns back into an equal value: `undefined` (as an
 * object's value too), non-finite numbers, bytes (`Uint8Array`, `Buffer`, `ArrayBuffer`),
 * `URL` and `Date` are tagged. Anything else that is not plain data is a `TypeError`. */
export function encode(value: unknown): unknown {
  if (value === undefined) return { [TAG]: "undefined" };
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    return Number.isFinite(value) && !Object.is(value, -0) ? value : { [TAG]: "number", v: String(value) };
  }
  if (typeof value === "bigint") return { [TAG]: "bigint", v: value.toString() };
  const bytes = bytesKind(value);
  if (bytes) return { [TAG]: bytes, b64: toBase64(value as Uint8Array | ArrayBuffer) };
  if (value instanceof URL) return { [TAG]: "URL", href: value.href };
  if (value instanceof Date) return { [TAG]: "Date", v: value.getTime() };
  if (Array.isArray(value)) return Array.from(value, (v) => encode(v));
  if (isPlainObject(value)) {
    const out: JsonRecord = {};
    for (const [key, v] of Object.entries(value)) out[key] = encode(v);
    return TAG in value ? { [TAG]: "object", v: out } : out;
  }
  throw new TypeError(`a message holds a value that cannot be stored: ${Object.prototype.toString.call(value)}`);
}

/** The value `encode` was given. */
export function decode(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(decode);
  if (!isRecord(value)) return value;
  if (TAG in value) {
    const tag = value[TAG];
    switch (tag) {
      case "undefined":
        return undefined;
      case "number":
      case "bigint":
        return tag === "number" ? Number(value["v"]) : BigInt(String(value["v"]));
      case "Uint8Array":
      case "Buffer":
      case "ArrayBuffer":
        return fromBase64(String(value["b64"]), tag);
      case "URL":
        return new URL(String(value["href"]));
      case "Date":
        return new Date(Number(value["v"]));
      case "object":
        return decodeEntries(value["v"] as JsonRecord);
      default:
        throw new TypeError(`unknown ${TAG} tag ${JSON.stringify(tag)}`);
    }
  }
  return decodeEntries(value);
}

function decodeEntries(value: JsonRecord): JsonRecord {
  const out: JsonRecord = {};
  for (const [key, v] of Object.entries(value)) out[key] = decode(v);
  return out;
}

type BytesKind = "Uint8Array" | "Buffer" | "ArrayBuffer";

function bytesKind(value: unknown): BytesKind | undefined {
  const NodeBuffer = (globalThis as { Buffer?: { isBuffer(v: unknown): boolean } }).Buffer;
  if (NodeBuffer?.isBuffer(value)) return "Buffer";
  if (value instanceof Uint8Array && Object.getPrototypeOf(value) === Uint8Array.prototype) return "Uint8Array";
  if (value instanceof ArrayBuffer) return "ArrayBuffer";
  return undefined;
}

function toBase64(value: Uint8Array | ArrayBuffer): string {
  const bytes = value instanceof ArrayBuffer ? new Uint8Array(value) : value;
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function fromBase64(b64: string, kind: BytesKind): Uint8Array | ArrayBuffer {
  const NodeBuffer = (globalThis as { Buffer?: { from(s: string, e: string): Uint8Array } }).Buffer;
  if (kind === "Buffer" && NodeBuffer) return NodeBuffer.from(b64, "base64");
  const binary = atob(b64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return kind === "ArrayBuffer" ? bytes.buffer : bytes;
}

// --- data: the SDK's many ways of holding a file or an image --------------------------------

/** Where a file's content sits in the Responses part, and how to give it back. */
interface Shaped {
  /** The Responses content part (`input_image`, `input_file` or `input_text`). */
  part: JsonRecord;
  /** How the SDK held it (kept in `ai_sdk`). */
  d: JsonRecord;
}

const TAGGED_FIELD: Record<string, string> = { data: "data", url: "url", reference: "reference", text: "text" };

/** The Responses part for `data` (any of the SDK's data shapes) as an image or a file;
 * `undefined` when it cannot be shaped (the part then travels whole, as an opaque item). */
function shapeData(data: unknown, options: { mediaType?: unknown; filename?: unknown; image: boolean }): Shaped | undefined {
  if (isRecord(data) && typeof data["type"] === "string" && data["type"] in TAGGED_FIELD) {
    const field = TAGGED_FIELD[data["type"]]!;
    if (!(field in data)) return undefined;
    const { [field]: inner, ...wrapper } = data;
    if (data["type"] === "text") {
      if (typeof inner !== "string") return undefined;
      return { part: { type: "input_text", text: inner }, d: { k: "text", w: encode(wrapper) } };
    }
    const shaped = shapeData(inner, options);
    return shaped && { part: shaped.part, d: { ...shaped.d, w: encode(wrapper) } };
  }
  const media = typeof options.mediaType === "string" ? options.mediaType : undefined;
  let url: string;
  let k: string;
  if (typeof data === "string") {
    k = /^(https?|data):/i.test(data) ? "str" : "b64";
    url = k === "str" ? data : `data:${mediaTypeOf(media, data)};base64,${data}`;
  } else if (data instanceof URL) {
    k = "URL";
    url = data.href;
  } else if (bytesKind(data)) {
    k = bytesKind(data)!;
    const b64 = toBase64(data as Uint8Array | ArrayBuffer);
    url = `data:${mediaTypeOf(media, b64)};base64,${b64}`;
  } else if (isPlainObject(data)) {
    const ids = Object.values(data).filter((v): v is string => typeof v === "string");
    const id = typeof data["openai"] === "string" ? data["openai"] : ids[0];
    if (id === undefined) return undefined;
    const part = options.image ? { type: "input_image", file_id: id } : withFilename({ type: "input_file", file_id: id }, options.filename);
    return { part, d: { k: "ref", ref: encode(data) } };
  } else {
    return undefined;
  }
  if (options.image) return { part: { type: "input_image", image_url: url }, d: { k } };
  const where = url.startsWith("data:") ? "file_data" : "file_url";
  return { part: withFilename({ type: "input_file", [where]: url }, options.filename), d: { k } };
}

/** `data` as the SDK held it, from the Responses part `shapeData` made and its `d`. */
function unshapeData(part: JsonRecord, d: JsonRecord): unknown {
  const wrapper = d["w"] === undefined ? undefined : (decode(d["w"]) as JsonRecord);
  const k = d["k"];
  let value: unknown;
  if (k === "text") {
    value = part["text"];
  } else if (k === "ref") {
    value = decode(d["ref"]);
  } else {
    const url = String(part["image_url"] ?? part["file_data"] ?? part["file_url"]);
    const b64 = url.slice(url.indexOf(",") + 1);
    if (k === "str") value = url;
    else if (k === "b64") value = b64;
    else if (k === "URL") value = new URL(url);
    else value = fromBase64(b64, k as BytesKind);
  }
  if (!wrapper) return value;
  return { ...wrapper, [TAGGED_FIELD[String(wrapper["type"])]!]: value };
}

function withFilename(part: JsonRecord, filename: unknown): JsonRecord {
  return typeof filename === "string" ? { ...part, filename } : part;
}

function isImageMedia(mediaType: unknown): boolean {
  return typeof mediaType === "string" && /^image(\/|$)/i.test(mediaType);
}

/** A full media type for a data URL: the given one, or for a bare `image` (or none) the
 * type the bytes' signature names. */
function mediaTypeOf(mediaType: string | undefined, b64: string): string {
  if (mediaType && mediaType.includes("/") && !mediaType.endsWith("/*")) return mediaType;
  const sniffed = [
    ["iVBORw0KGgo", "image/png"],
    ["/9j/", "image/jpeg"],
    ["R0lGOD", "image/gif"],
    ["UklGR", "image/webp"],
    ["JVBERi0", "application/pdf"],
  ].find(([prefix]) => b64.startsWith(prefix!));
  return sniffed?.[1] ?? (mediaType && !mediaType.includes("/") ? `${mediaType}/octet-stream` : "application/octet-stream");
}

// --- parts ----------------------------------------------------------------------------------

/** `part` without `keys`, encoded: what the item's payload does not hold. */
function rest(part: JsonRecord, ...keys: string[]): JsonRecord {
  const out: JsonRecord = {};
  for (const [key, v] of Object.entries(part)) if (!keys.includes(key)) out[key] = encode(v);
  return out;
}

/** A text, image or file part as a Responses content part, or `undefined` (no counterpart). */
function contentPart(part: Part, role: string): { part: JsonRecord; r: JsonRecord } | undefined {
  switch (part.type) {
    case "text":
      if (typeof part["text"] !== "string") return undefined;
      return { part: { type: role === "assistant" ? "output_text" : "input_text", text: part["text"] }, r: rest(part, "text") };
    case "image": {
      const shaped = shapeData(part["image"], { mediaType: part["mediaType"], image: true });
      return shaped && { part: shaped.part, r: { ...rest(part, "image"), $d: shaped.d } };
    }
    case "file": {
      const image = isImageMedia(part["mediaType"]);
      const shaped = shapeData(part["data"], { mediaType: part["mediaType"], filename: part["filename"], image });
      return shaped && { part: shaped.part, r: { ...rest(part, "data"), $d: shaped.d } };
    }
    default:
      return undefined;
  }
}

function uncontentPart(part: JsonRecord, r: JsonRecord): Part {
  const { $d, ...others } = r;
  const out = decode(others) as Part;
  if (out.type === "text") return { ...out, text: part["text"] };
  const field = out.type === "image" ? "image" : "data";
  return { ...out, [field]: unshapeData(part, $d as JsonRecord) };
}

const DENIED = "Tool execution denied.";

/** A tool result's `output` as a Responses `output` (a string or parts), and what it does not
 * hold. */
function shapeOutput(output: unknown): { output: string | JsonRecord[]; r: JsonRecord } {
  if (!isRecord(output)) return { output: "", r: { $whole: encode(output) } };
  const value = output["value"];
  switch (output["type"]) {
    case "text":
    case "error-text":
      if (typeof value !== "string") break;
      return { output: value, r: rest(output, "value") };
    case "json":
    case "error-json":
      if (isExactJson(value)) return { output: JSON.stringify(value), r: rest(output, "value") };
      return { output: JSON.stringify(value) ?? "", r: rest(output) };
    case "execution-denied":
      if (typeof output["reason"] === "string") return { output: output["reason"], r: rest(output, "reason") };
      return { output: DENIED, r: { ...rest(output), $default: true } };
    case "content": {
      if (!Array.isArray(value)) break;
      const parts = value.map(shapeOutputPart);
      return { output: parts.map((p) => p.part), r: { ...rest(output, "value"), $parts: parts.map((p) => p.r) } };
    }
  }
  return { output: typeof value === "string" ? value : "", r: { $whole: encode(output) } };
}

function unshapeOutput(output: unknown, r: JsonRecord): unknown {
  if ("$whole" in r) return decode(r["$whole"]);
  const { $parts, $default, ...others } = r;
  const out = decode(others) as JsonRecord;
  switch (out["type"]) {
    case "text":
    case "error-text":
      return { ...out, value: output };
    case "json":
    case "error-json":
      return "value" in out ? out : { ...out, value: JSON.parse(String(output)) };
    case "execution-denied":
      return $default ? out : { ...out, reason: output };
    case "content": {
      const parts = output as JsonRecord[];
      return { ...out, value: ($parts as JsonRecord[]).map((pr, i) => unshapeOutputPart(parts[i]!, pr)) };
    }
    default:
      throw new TypeError(`unknown tool output type ${JSON.stringify(out["type"])}`);
  }
}

/** The parts of a `content` tool output: which field holds the data, and whether it is an
 * image (`"media"`: when its media type says so). */
const OUTPUT_DATA: Record<string, { field: string; image: boolean | "media" }> = {
  file: { field: "data", image: "media" },
  "file-data": { field: "data", image: "media" },
  "file-url": { field: "url", image: "media" },
  "file-id": { field: "fileId", image: false },
  "file-reference": { field: "providerReference", image: false },
  "image-data": { field: "data", image: true },
  "image-url": { field: "url", image: true },
  "image-file-id": { field: "fileId", image: true },
  "image-file-reference": { field: "providerReference", image: true },
};

function shapeOutputPart(part: unknown): { part: JsonRecord; r: JsonRecord } {
  if (isRecord(part)) {
    if (part["type"] === "text" && typeof part["text"] === "string") {
      return { part: { type: "input_text", text: part["text"] }, r: rest(part, "text") };
    }
    const spec = OUTPUT_DATA[String(part["type"])];
    if (spec && spec.field in part) {
      const image = spec.image === "media" ? isImageMedia(part["mediaType"]) : spec.image;
      let data = part[spec.field];
      if (spec.field === "fileId" && typeof data === "string") data = { $id: data }; // a bare id
      const shaped = shapeData(data, { mediaType: part["mediaType"], filename: part["filename"], image });
      if (shaped) return { part: shaped.part, r: { ...rest(part, spec.field), $d: shaped.d } };
    }
  }
  return { part: { type: "input_text", text: "" }, r: { $whole: encode(part) } };
}

function unshapeOutputPart(part: JsonRecord, r: JsonRecord): unknown {
  if ("$whole" in r) return decode(r["$whole"]);
  const { $d, ...others } = r;
  const out = decode(others) as JsonRecord;
  if (out["type"] === "text") return { ...out, text: part["text"] };
  const spec = OUTPUT_DATA[String(out["type"])]!;
  let data = unshapeData(part, $d as JsonRecord);
  if (spec.field === "fileId" && isRecord(data) && Object.keys(data).length === 1 && typeof data["$id"] === "string") data = data["$id"];
  return { ...out, [spec.field]: data };
}

// --- messages -> items ----------------------------------------------------------------------

/** One item's worth of a message: a run of content parts, or one part of its own kind. */
type Run = { kind: "content"; parts: Part[] } | { kind: "single"; part: Part };

/** The Responses items for `messages`, each with its `ai_sdk` field; `fromServiceItems` gives
 * `messages` back. Throws `TypeError` for a value no JSON can carry (a function, a class
 * instance other than bytes, `URL` and `Date`). */
export function toServiceItems(messages: readonly AiMessage[], newKey: () => string = messageKey): JsonRecord[] {
  return messages.flatMap((message) => messageItems(message, newKey()));
}

function messageItems(message: AiMessage, m: string): JsonRecord[] {
  if (!isRecord(message) || typeof message.role !== "string") {
    throw new TypeError("a ModelMessage is an object with a role");
  }
  const { content, ...head } = message;
  const msg = rest(head);
  const role = message.role;
  if (typeof content === "string") {
    const responsesRole = role === "tool" ? "user" : role;
    return [withField({ type: "message", role: responsesRole, content }, { v: LAYOUT, m, msg, c: "s", parts: [] })];
  }
  if (!Array.isArray(content)) throw new TypeError(`a ${role} message's content is a string or a list of parts`);
  if (content.length === 0) return [withField({ type: AI_PART_TYPE }, { v: LAYOUT, m, msg, parts: [] })];
  const runs: Run[] = [];
  for (const part of content as Part[]) {
    if (!isRecord(part)) throw new TypeError(`a ${role} message's parts are objects`);
    const last = runs[runs.length - 1];
    if (isContentType(part.type) && contentPart(part, role)) {
      if (last?.kind === "content") last.parts.push(part);
      else runs.push({ kind: "content", parts: [part] });
    } else {
      runs.push({ kind: "single", part });
    }
  }
  let index = 0;
  return runs.map((run) => {
    const item = runItem(role, run, m, msg, index);
    index += run.kind === "content" ? run.parts.length : 1;
    return item;
  });
}

function isContentType(type: unknown): boolean {
  return type === "text" || type === "image" || type === "file";
}

/** The item for one run of a message (also used to check an item read back against its
 * `ai_sdk`: the same run gives the same item). */
function runItem(role: string, run: Run, m: string, msg: JsonRecord, index: number): JsonRecord {
  const field = (parts: JsonRecord[]): AiField => ({ v: LAYOUT, m, msg, ...(index ? { i: index } : {}), parts });
  if (run.kind === "content") {
    const shaped = run.parts.map((part) => contentPart(part, role)!);
    const responsesRole = role === "tool" ? "user" : role;
    return withField({ type: "message", role: responsesRole, content: shaped.map((s) => s.part) }, field(shaped.map((s) => s.r)));
  }
  const part = run.part;
  switch (part.type) {
    case "reasoning": {
      if (typeof part["text"] !== "string") break;
      const item: JsonRecord = { type: "reasoning", summary: part["text"] ? [{ type: "summary_text", text: part["text"] }] : [] };
      const r = rest(part, "text");
      const openai = isRecord(part["providerOptions"]) ? part["providerOptions"]["openai"] : undefined;
      if (isRecord(openai) && typeof openai["reasoningEncryptedContent"] === "string") {
        // the one large value OpenAI sends back: in its own field, out of `ai_sdk`
        item["encrypted_content"] = openai["reasoningEncryptedContent"];
        const { reasoningEncryptedContent: _, ...others } = openai;
        r["providerOptions"] = encode({ ...(part["providerOptions"] as JsonRecord), openai: others });
        r["$enc"] = true;
      }
      return withField(item, field([r]));
    }
    case "tool-call": {
      if (typeof part["toolCallId"] !== "string" || typeof part["toolName"] !== "string") break;
      const input = part["input"];
      const exact = isExactJson(input);
      const item = { type: "function_call", call_id: part["toolCallId"], name: part["toolName"], arguments: JSON.stringify(input) ?? "" };
      return withField(item, field([exact ? rest(part, "toolCallId", "toolName", "input") : rest(part, "toolCallId", "toolName")]));
    }
    case "tool-result": {
      if (typeof part["toolCallId"] !== "string") break;
      const shaped = shapeOutput(part["output"]);
      const item = { type: "function_call_output", call_id: part["toolCallId"], output: shaped.output };
      return withField(item, field([{ ...rest(part, "toolCallId", "output"), $out: shaped.r }]));
    }
  }
  // no Responses counterpart: the whole part, as an opaque item
  return withField({ type: AI_PART_TYPE }, field([encode(part) as JsonRecord]));
}

function withField(item: JsonRecord, field: AiField): JsonRecord {
  return { ...item, [AI_FIELD]: field };
}

function messageKey(): string {
  return crypto.randomUUID().replace(/-/g, "").slice(0, 16);
}

// --- items -> messages ----------------------------------------------------------------------

interface Building {
  message: AiMessage;
  /** The `ai_sdk` key of the message (`undefined` while it holds only items read by payload). */
  m: string | undefined;
  /** Its parts, each with its position in the message (`ai_sdk.i`; a part read by payload
   * goes right after the part before it). */
  parts: { at: number; part: unknown }[];
  stringContent: boolean;
}

function addParts(building: Building, parts: readonly unknown[], first?: number): void {
  const after = building.parts.length ? building.parts[building.parts.length - 1]!.at : -1;
  parts.forEach((part, k) => building.parts.push({ at: first === undefined ? after + 0.5 : first + k, part }));
}

/** `ModelMessage`s from Responses items: exactly the messages `toServiceItems` was given for
 * its items, in any order the projection put them in (items of one message go back to it, in
 * their places); items without a valid `ai_sdk` field (written by another client, or changed
 * by the projection: a cleared tool output, trimmed reasoning, a placeholder output, the
 * summary) read by their payload: `message` → a system, user or assistant message (system
 * and developer as system), `function_call` → a `tool-call` part, `function_call_output` → a
 * `tool-result` (its `toolName` from its call; its text as `text` output), `reasoning` →
 * `reasoning` parts (dropped when the projection emptied it); other types are left out. Such
 * items join the message before them when it has their role. */
export function fromServiceItems(items: readonly JsonRecord[]): AiMessage[] {
  const out: Building[] = [];
  const byKey = new Map<string, Building>();
  const toolNames = new Map<string, string>();
  for (const item of items) {
    if (item["type"] === "function_call" && typeof item["call_id"] === "string" && typeof item["name"] === "string") {
      toolNames.set(item["call_id"], item["name"]);
    }
    const exact = readExact(item);
    const last = out[out.length - 1];
    if (exact) {
      const { field, parts } = exact;
      const role = decode(field.msg["role"]);
      const first = field.i ?? 0;
      const known = byKey.get(field.m);
      if (known) {
        addParts(known, parts, first); // a later item of it, or one the render moved away from it
      } else if (last && last.m === undefined && !last.stringContent && field.c !== "s" && last.message.role === role && role !== "system") {
        // parts of this message the projection changed came first: they are its parts
        last.m = field.m;
        last.message = decode(field.msg) as AiMessage;
        for (const p of last.parts) p.at = first - 1 + p.at / (last.parts.length + 1);
        addParts(last, parts, first);
        byKey.set(field.m, last);
      } else {
        const building: Building = { message: decode(field.msg) as AiMessage, m: field.m, parts: [], stringContent: field.c === "s" };
        if (field.c === "s") building.message.content = item["content"];
        addParts(building, parts, first);
        out.push(building);
        byKey.set(field.m, building);
      }
      continue;
    }
    const read = readByPayload(item, toolNames);
    if (!read) continue;
    if (last && !last.stringContent && last.message.role === read.role && read.role !== "system") {
      addParts(last, read.parts);
    } else if (read.content !== undefined) {
      out.push({ message: { role: read.role, content: read.content }, m: undefined, parts: [], stringContent: true });
    } else {
      const building: Building = { message: { role: read.role, content: [] }, m: undefined, parts: [], stringContent: false };
      addParts(building, read.parts);
      out.push(building);
    }
  }
  return out.map((b) => {
    if (b.stringContent) return b.message;
    const parts = [...b.parts].sort((x, y) => x.at - y.at); // stable
    return { ...b.message, content: parts.map((p) => p.part) };
  });
}

/** The parts an item holds per its `ai_sdk` field, if that field is valid and still matches
 * the item (the same parts give the same item back). */
function readExact(item: JsonRecord): { field: AiField; parts: unknown[] } | undefined {
  const field = item[AI_FIELD];
  if (!isRecord(field) || field["v"] !== LAYOUT || typeof field["m"] !== "string" || !isRecord(field["msg"]) || !Array.isArray(field["parts"])
    || (field["i"] !== undefined && !Number.isInteger(field["i"]))) {
    return undefined;
  }
  const f = field as unknown as AiField;
  try {
    const role = decode(f.msg["role"]);
    if (typeof role !== "string") return undefined;
    const parts = partsOf(item, f);
    if (parts === undefined) return undefined;
    // check: the parts give this very item (a payload the projection changed does not)
    let again: JsonRecord;
    if (f.c === "s") {
      again = withField({ type: "message", role: role === "tool" ? "user" : role, content: item["content"] }, f);
    } else if (parts.length === 0) {
      again = withField({ type: AI_PART_TYPE }, f);
    } else if (item["type"] === "message") {
      again = runItem(role, { kind: "content", parts: parts as Part[] }, f.m, f.msg, f.i ?? 0);
    } else {
      again = runItem(role, { kind: "single", part: parts[0] as Part }, f.m, f.msg, f.i ?? 0);
    }
    return deepEqual(again, item) ? { field: f, parts } : undefined;
  } catch {
    return undefined;
  }
}

function partsOf(item: JsonRecord, f: AiField): unknown[] | undefined {
  if (f.c === "s") return typeof item["content"] === "string" ? [] : undefined;
  const [r] = f.parts;
  switch (item["type"]) {
    case "message": {
      const content = item["content"];
      if (!Array.isArray(content) || content.length !== f.parts.length) return undefined;
      return content.map((part, i) => uncontentPart(part as JsonRecord, f.parts[i]!));
    }
    case AI_PART_TYPE:
      return f.parts.length === 0 ? [] : [decode(r)];
    case "reasoning": {
      if (!r) return undefined;
      const summary = item["summary"];
      if (!Array.isArray(summary) || summary.length > 1) return undefined;
      const { $enc, ...others } = r;
      const part = decode(others) as JsonRecord;
      part["text"] = summary.length ? (summary[0] as JsonRecord)["text"] : "";
      if ($enc) {
        const options = part["providerOptions"] as JsonRecord;
        part["providerOptions"] = { ...options, openai: { ...(options["openai"] as JsonRecord), reasoningEncryptedContent: item["encrypted_content"] } };
      }
      return [part];
    }
    case "function_call": {
      if (!r) return undefined;
      const part = decode(r) as JsonRecord;
      const input = "input" in part ? {} : { input: JSON.parse(String(item["arguments"])) as unknown };
      return [{ ...part, toolCallId: item["call_id"], toolName: item["name"], ...input }];
    }
    case "function_call_output": {
      if (!r) return undefined;
      const { $out, ...others } = r;
      const part = decode(others) as JsonRecord;
      return [{ ...part, toolCallId: item["call_id"], output: unshapeOutput(item["output"], $out as JsonRecord) }];
    }
    default:
      return undefined;
  }
}

interface ReadItem {
  role: "system" | "user" | "assistant" | "tool";
  /** String content: a message of its own. */
  content?: string;
  parts: unknown[];
}

function readByPayload(item: JsonRecord, toolNames: Map<string, string>): ReadItem | undefined {
  const type = item["type"] ?? (typeof item["role"] === "string" ? "message" : undefined);
  switch (type) {
    case "message": {
      const role = item["role"] === "system" || item["role"] === "developer" ? "system" : item["role"] === "assistant" ? "assistant" : "user";
      const content = item["content"];
      if (typeof content === "string") return { role, content, parts: [] };
      if (!Array.isArray(content)) return undefined;
      if (role === "system") {
        return { role, content: content.map((p) => (isRecord(p) && typeof p["text"] === "string" ? p["text"] : "")).join("\n"), parts: [] };
      }
      const parts = content.flatMap((p) => (isRecord(p) ? payloadPart(p, role) : []));
      return parts.length ? { role, parts } : undefined;
    }
    case "function_call": {
      const args = String(item["arguments"] ?? "");
      let input: unknown = args;
      try {
        input = args ? JSON.parse(args) : {};
      } catch {
        // not JSON: the raw text is the input
      }
      return { role: "assistant", parts: [{ type: "tool-call", toolCallId: item["call_id"], toolName: item["name"], input }] };
    }
    case "function_call_output": {
      const callId = String(item["call_id"]);
      const raw = item["output"];
      const output = Array.isArray(raw)
        ? { type: "content", value: raw.flatMap((p) => (isRecord(p) ? payloadOutputPart(p) : [])) }
        : { type: "text", value: typeof raw === "string" ? raw : JSON.stringify(raw) };
      return { role: "tool", parts: [{ type: "tool-result", toolCallId: callId, toolName: toolNames.get(callId) ?? "unknown", output }] };
    }
    case "reasoning": {
      const summary = Array.isArray(item["summary"]) ? item["summary"] : [];
      const texts = summary.map((s) => (isRecord(s) ? s["text"] : s)).filter((t): t is string => typeof t === "string" && t !== "");
      if (texts.length === 0) return undefined; // trimmed by the projection, or nothing to say
      const openai: JsonRecord = {};
      if (typeof item["id"] === "string" && item["id"].startsWith("rs_")) openai["itemId"] = item["id"];
      if (typeof item["encrypted_content"] === "string") openai["reasoningEncryptedContent"] = item["encrypted_content"];
      const providerOptions = Object.keys(openai).length ? { providerOptions: { openai } } : {};
      return { role: "assistant", parts: texts.map((text) => ({ type: "reasoning", text, ...providerOptions })) };
    }
    default:
      return undefined; // hosted tool calls and the like: `ai` has no counterpart
  }
}

function payloadPart(part: JsonRecord, role: string): unknown[] {
  switch (part["type"]) {
    case "input_text":
    case "output_text":
    case "text":
      return typeof part["text"] === "string" ? [{ type: "text", text: part["text"] }] : [];
    case "refusal":
      return typeof part["refusal"] === "string" ? [{ type: "text", text: part["refusal"] }] : [];
    case "input_image":
    case "input_file":
      return role === "user" ? filePart(part) : [];
    default:
      return [];
  }
}

/** An `input_image` or `input_file` as a `file` part (the SDK's way for both). */
function filePart(part: JsonRecord): unknown[] {
  const image = part["type"] === "input_image";
  const filename = typeof part["filename"] === "string" ? { filename: part["filename"] } : {};
  const mediaType = image ? "image" : "application/octet-stream";
  const url = part[image ? "image_url" : "file_data"] ?? part["file_url"];
  const dataUrl = typeof url === "string" ? /^data:([^;,]+)[^,]*,(.*)$/s.exec(url) : null;
  if (dataUrl) return [{ type: "file", mediaType: dataUrl[1], data: { type: "data", data: dataUrl[2] }, ...filename }];
  if (typeof url === "string" && URL.canParse(url)) return [{ type: "file", mediaType, data: { type: "url", url: new URL(url) }, ...filename }];
  if (typeof part["file_id"] === "string") return [{ type: "file", mediaType, data: { type: "reference", reference: { openai: part["file_id"] } }, ...filename }];
  return [];
}

function payloadOutputPart(part: JsonRecord): unknown[] {
  if (typeof part["text"] === "string") return [{ type: "text", text: part["text"] }];
  return filePart(part); // the same shape as a message's file part
}

// --- helpers --------------------------------------------------------------------------------

function isRecord(value: unknown): value is JsonRecord {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isPlainObject(value: unknown): value is JsonRecord {
  if (!isRecord(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Equality of JSON values (key order ignored). */
function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  }
  if (!isRecord(a) || !isRecord(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => k in b && deepEqual(a[k], b[k]));
}
