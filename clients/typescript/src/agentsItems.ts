/**
 * Between the OpenAI Agents SDK's items (`AgentInputItem`: `callId`, `function_call_result`,
 * reasoning `content` of `input_text` parts, images as `image`) and the Responses API input
 * items the service understands (`call_id`, `function_call_output`, reasoning `summary`,
 * `image_url` / `file_id`), so that the service can project, compact, search and render a
 * JavaScript agent's session like any other.
 *
 * The mapping only renames what the service reads; every other field (`providerData`,
 * `status`, `name`, `namespace`, `caller`, ...) rides along unchanged, and types the service
 * does not render (hosted tool calls, computer and shell calls, ...) are sent as they are (the
 * service stores them verbatim). `fromServiceItem(toServiceItem(item))` gives back `item`
 * exactly: where the mapping could not be reversed for some item, the whole SDK item travels
 * with it under `agents_sdk_item` and is what comes back.
 */

export type JsonRecord = Record<string, unknown>;

/** Extra field of a stored item: what the reverse mapping needs, or the whole SDK item. */
export const SDK_FIELD = "agents_sdk";
export const SDK_ITEM_FIELD = "agents_sdk_item";

const SINGLE_OUTPUT: Record<string, string> = { text: "input_text", image: "input_image", file: "input_file" };
const SINGLE_OUTPUT_BACK: Record<string, string> = { input_text: "text", input_image: "image", input_file: "file" };

/** An Agents SDK item as a Responses input item for the service. */
export function toServiceItem(item: JsonRecord): JsonRecord {
  const mapped = forward(item);
  return deepEqual(backward(mapped), item) ? mapped : { ...mapped, [SDK_ITEM_FIELD]: item };
}

/** A Responses input item read from the service as an Agents SDK item: exactly the SDK item
 * stored with `toServiceItem`, or the mapping of an item another client wrote. */
export function fromServiceItem(item: JsonRecord): JsonRecord {
  const whole = item[SDK_ITEM_FIELD];
  if (isRecord(whole)) return whole;
  return backward(item);
}

function forward(item: JsonRecord): JsonRecord {
  switch (item["type"] ?? "message") {
    case "message":
      return Array.isArray(item["content"]) ? { ...item, content: item["content"].map(partForward) } : item;
    case "function_call":
      return renameKey(item, "callId", "call_id");
    case "function_call_result": {
      const out: JsonRecord = { ...renameKey(item, "callId", "call_id"), type: "function_call_output" };
      const output = item["output"];
      if (Array.isArray(output)) {
        out["output"] = output.map(partForward);
      } else if (isRecord(output) && typeof output["type"] === "string" && output["type"] in SINGLE_OUTPUT) {
        out["output"] = [partForward({ ...output, type: SINGLE_OUTPUT[output["type"]] })];
        out[SDK_FIELD] = { output: "single" };
      }
      return out;
    }
    case "reasoning": {
      const { content, rawContent, ...rest } = item;
      const out: JsonRecord = { ...rest };
      if (Array.isArray(content)) {
        out["summary"] = content.map((p) => (isRecord(p) && p["type"] === "input_text" ? { ...p, type: "summary_text" } : p));
      }
      if (rawContent !== undefined) out["content"] = rawContent;
      return out;
    }
    default:
      return item;
  }
}

function backward(item: JsonRecord): JsonRecord {
  switch (item["type"] ?? "message") {
    case "message":
      return Array.isArray(item["content"]) ? { ...item, content: item["content"].map(partBackward) } : item;
    case "function_call":
      return renameKey(item, "call_id", "callId");
    case "function_call_output": {
      const { [SDK_FIELD]: marker, ...rest } = item;
      const out: JsonRecord = { ...renameKey(rest, "call_id", "callId"), type: "function_call_result" };
      const output = item["output"];
      if (Array.isArray(output)) {
        const parts = output.map(partBackward);
        const single = isRecord(marker) && marker["output"] === "single" && parts.length === 1 && isRecord(parts[0]);
        if (single) {
          const part = parts[0] as JsonRecord;
          out["output"] = { ...part, type: SINGLE_OUTPUT_BACK[String(part["type"])] ?? part["type"] };
        } else {
          out["output"] = parts;
        }
      }
      return out;
    }
    case "reasoning": {
      const { summary, content, ...rest } = item;
      const out: JsonRecord = { ...rest };
      if (Array.isArray(summary)) {
        out["content"] = summary.map((p) => (isRecord(p) && p["type"] === "summary_text" ? { ...p, type: "input_text" } : p));
      }
      if (content !== undefined) out["rawContent"] = content;
      return out;
    }
    default:
      return item;
  }
}

// Content parts: the SDK names an image or file by `image` / `file` (a string, `{ id }` or
// `{ url }`); the Responses API by `image_url` / `file_id`, `file_data` / `file_url` / `file_id`.
function partForward(part: unknown): unknown {
  if (!isRecord(part)) return part;
  if (part["type"] === "input_image" && "image" in part) {
    const { image, ...rest } = part;
    if (typeof image === "string") return { ...rest, image_url: image };
    if (isRecord(image) && typeof image["id"] === "string" && Object.keys(image).length === 1) return { ...rest, file_id: image["id"] };
  }
  if (part["type"] === "input_file" && "file" in part) {
    const { file, ...rest } = part;
    if (typeof file === "string") return { ...rest, file_data: file };
    if (isRecord(file) && Object.keys(file).length === 1) {
      if (typeof file["id"] === "string") return { ...rest, file_id: file["id"] };
      if (typeof file["url"] === "string") return { ...rest, file_url: file["url"] };
    }
  }
  return part;
}

function partBackward(part: unknown): unknown {
  if (!isRecord(part)) return part;
  if (part["type"] === "input_image") {
    const { image_url, file_id, ...rest } = part;
    if (typeof image_url === "string" && file_id === undefined) return { ...rest, image: image_url };
    if (typeof file_id === "string" && image_url === undefined) return { ...rest, image: { id: file_id } };
  }
  if (part["type"] === "input_file") {
    const { file_data, file_id, file_url, ...rest } = part;
    const given = [file_data, file_id, file_url].filter((v) => v !== undefined).length;
    if (given === 1) {
      if (typeof file_data === "string") return { ...rest, file: file_data };
      if (typeof file_id === "string") return { ...rest, file: { id: file_id } };
      if (typeof file_url === "string") return { ...rest, file: { url: file_url } };
    }
  }
  return part;
}

function renameKey(item: JsonRecord, from: string, to: string): JsonRecord {
  if (!(from in item) || to in item) return item;
  const out: JsonRecord = {};
  for (const [key, value] of Object.entries(item)) out[key === from ? to : key] = value;
  return out;
}

function isRecord(value: unknown): value is JsonRecord {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Structural equality of JSON values (key order ignored, as JSON objects have none). */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  }
  if (!isRecord(a) || !isRecord(b)) return false;
  const keys = Object.keys(a).filter((k) => a[k] !== undefined);
  const other = Object.keys(b).filter((k) => b[k] !== undefined);
  return keys.length === other.length && keys.every((k) => deepEqual(a[k], b[k]));
}
