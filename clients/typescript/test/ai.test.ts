// The Vercel AI SDK message history: its samples are typed by the installed `ai` package's own
// types (a table per union, keyed by every member's `type`, so a part, output or data type the
// SDK adds fails to compile here until it has samples), saved and loaded back deep-equal
// through a live server, and driven through `generateText` and `streamText` with the SDK's
// mock language model across several turns with tool calls.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { generateText, stepCountIs, streamText, tool, type ModelMessage } from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";
import { z } from "zod";

import {
  OUTPUT_PART_STORED_AS,
  OUTPUT_STORED_AS,
  STORED_AS,
  ServiceMessageHistory,
  fromServiceItems,
  toServiceItems,
  type ModelMessagePart,
  type ToolResultContentPart,
  type ToolResultOutput,
} from "session-memory-client/ai";
import { client, newId } from "./helpers.js";

const sm = client();

// --- samples, one table per union of the SDK ----------------------------------------------

type PartOf<K extends ModelMessagePart["type"]> = Extract<ModelMessagePart, { type: K }>;
type FileData = Extract<PartOf<"file">["data"], { type: string }>;
type Role = ModelMessage["role"];

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const PNG_BYTES = Uint8Array.from(Buffer.from(PNG, "base64"));
const PDF = Buffer.from("%PDF-1.4 a tiny document");

const FILE_DATA: { [K in FileData["type"]]: Extract<FileData, { type: K }>[] } = {
  data: [{ type: "data", data: PNG }, { type: "data", data: PNG_BYTES }],
  url: [{ type: "url", url: new URL("https://example.com/chart.png") }],
  reference: [{ type: "reference", reference: { openai: "file-abc", anthropic: "file_011" } }],
  text: [{ type: "text", text: "Inline notes: the build is green." }],
};

const OUTPUT_PARTS: { [K in ToolResultContentPart["type"]]: Extract<ToolResultContentPart, { type: K }>[] } = {
  text: [{ type: "text", text: "rows: 2" }, { type: "text", text: "cached", providerOptions: { anthropic: { cacheControl: { type: "ephemeral" } } } }],
  file: [
    { type: "file", mediaType: "image/png", data: { type: "data", data: PNG } },
    { type: "file", mediaType: "application/pdf", data: { type: "url", url: new URL("https://example.com/report.pdf") }, filename: "report.pdf" },
    { type: "file", mediaType: "text/plain", data: { type: "text", text: "log line" } },
  ],
  "file-data": [{ type: "file-data", data: PDF.toString("base64"), mediaType: "application/pdf", filename: "a.pdf" }],
  "file-url": [{ type: "file-url", url: "https://example.com/b.pdf", mediaType: "application/pdf" }],
  "file-id": [{ type: "file-id", fileId: "file-1" }, { type: "file-id", fileId: { openai: "file-2", anthropic: "file_2" } }],
  "file-reference": [{ type: "file-reference", providerReference: { openai: "file-3" } }],
  "image-data": [{ type: "image-data", data: PNG, mediaType: "image/png" }],
  "image-url": [{ type: "image-url", url: "https://example.com/c.png" }],
  "image-file-id": [{ type: "image-file-id", fileId: "file-4" }],
  "image-file-reference": [{ type: "image-file-reference", providerReference: { openai: "file-5" } }],
  custom: [{ type: "custom", providerOptions: { acme: { widget: 1 } } }],
};

const OUTPUTS: { [K in ToolResultOutput["type"]]: Extract<ToolResultOutput, { type: K }>[] } = {
  text: [{ type: "text", value: "sunny, 21C" }],
  json: [{ type: "json", value: { temp: 21, tags: ["dry", null], nested: { ok: true } } }, { type: "json", value: "a bare string" }],
  "execution-denied": [{ type: "execution-denied" }, { type: "execution-denied", reason: "the user said no", providerOptions: { openai: { x: 1 } } }],
  "error-text": [{ type: "error-text", value: "Error: timeout" }],
  "error-json": [{ type: "error-json", value: { code: 503 } }],
  content: [{ type: "content", value: Object.values(OUTPUT_PARTS).flat() }],
};

// each output sample is the result of a call of its own
const OUTPUT_SAMPLES = Object.values(OUTPUTS).flat();
const outputCall = (i: number): PartOf<"tool-call"> => ({ type: "tool-call", toolCallId: `call_out_${i}`, toolName: "lookup", input: { i } });
const toolResult = (output: ToolResultOutput, i = 0): PartOf<"tool-result"> => ({ type: "tool-result", toolCallId: `call_out_${i}`, toolName: "lookup", output });

const PARTS: { [K in ModelMessagePart["type"]]: PartOf<K>[] } = {
  text: [
    { type: "text", text: "What is in these?" },
    { type: "text", text: "keys with undefined values stay", providerOptions: undefined },
  ],
  image: [
    { type: "image", image: PNG, mediaType: "image/png" },
    { type: "image", image: PNG_BYTES },
    { type: "image", image: new URL("https://example.com/cat.jpg"), providerOptions: { openai: { imageDetail: "low" } } },
    { type: "image", image: { openai: "file-img" } },
    { type: "image", image: "https://example.com/dog.webp" },
  ],
  file: [
    ...Object.values(FILE_DATA).flat().map((data): PartOf<"file"> => ({ type: "file", data, mediaType: data.type === "text" ? "text/plain" : "image/png" })),
    { type: "file", data: PDF, mediaType: "application/pdf", filename: "tiny.pdf" },
    { type: "file", data: PDF.buffer.slice(PDF.byteOffset, PDF.byteOffset + PDF.byteLength) as ArrayBuffer, mediaType: "application/pdf" },
    { type: "file", data: PDF.toString("base64"), mediaType: "application/pdf" },
    { type: "file", data: new URL("https://example.com/paper.pdf"), mediaType: "application/pdf" },
    { type: "file", data: { openai: "file-pdf" }, mediaType: "application/pdf" },
    { type: "file", data: PNG_BYTES, mediaType: "image" },
  ],
  reasoning: [
    { type: "reasoning", text: "The user wants two cities.", providerOptions: { anthropic: { signature: "EqQBCkYIBxgCKkD" } } },
    { type: "reasoning", text: "", providerOptions: { openai: { itemId: "rs_1", reasoningEncryptedContent: "gAAAAABo-encrypted" } } },
  ],
  "reasoning-file": [{ type: "reasoning-file", data: PNG_BYTES, mediaType: "image/png" }],
  "tool-call": [
    { type: "tool-call", toolCallId: "call_1", toolName: "weather", input: { city: "Paris" }, providerOptions: { google: { thoughtSignature: "CiQB" } } },
    { type: "tool-call", toolCallId: "call_2", toolName: "web_search", input: { query: "rome" }, providerExecuted: true },
    { type: "tool-call", toolCallId: "call_3", toolName: "odd", input: { when: undefined, n: 1 }, providerExecuted: undefined },
    ...OUTPUT_SAMPLES.map((_, i) => outputCall(i)),
  ],
  "tool-result": [
    { type: "tool-result", toolCallId: "call_2", toolName: "web_search", output: { type: "json", value: [{ url: "https://example.com/rome" }] } },
    { type: "tool-result", toolCallId: "call_1", toolName: "weather", output: { type: "text", value: "sunny, 21C" }, providerOptions: { google: { thoughtSignature: "CiQB" } } },
    { type: "tool-result", toolCallId: "call_3", toolName: "odd", output: { type: "json", value: null } },
    ...OUTPUT_SAMPLES.map((output, i) => toolResult(output, i)),
  ],
  "tool-approval-request": [{ type: "tool-approval-request", approvalId: "appr_1", toolCallId: "call_1", reason: "costs money" }],
  "tool-approval-response": [{ type: "tool-approval-response", approvalId: "appr_1", approved: true, reason: "fine" }],
  custom: [{ type: "custom", kind: "acme.widget", providerOptions: { acme: { id: 7 } } }],
};

// The messages: every sample of every table, in the roles whose content may hold it.
const [providerResult, ...results] = PARTS["tool-result"];
const MESSAGES: ModelMessage[] = [
  { role: "system", content: "Be brief.", providerOptions: { anthropic: { cacheControl: { type: "ephemeral" } } } },
  { role: "user", content: "Hello" },
  { role: "user", content: [...PARTS.text, ...PARTS.image, ...PARTS.file], providerOptions: undefined },
  {
    role: "assistant",
    content: [
      ...PARTS["reasoning-file"],
      ...PARTS.reasoning,
      PARTS.text[0]!,
      PARTS.file[0]!,
      ...PARTS.custom,
      ...PARTS["tool-call"],
      providerResult!,
      ...PARTS["tool-approval-request"],
    ],
  },
  { role: "tool", content: [...results, ...PARTS["tool-approval-response"]] },
  { role: "assistant", content: [] },
  { role: "assistant", content: "Paris is sunny.", providerOptions: { openai: { itemId: "msg_1" } } },
];

const ROLES: { [K in Role]: true } = { system: true, user: true, assistant: true, tool: true };

/** A value with what `deepStrictEqual` might not tell apart spelled out: the class of each
 * byte container and URL, and keys whose value is `undefined`. */
function reveal(value: unknown): unknown {
  if (value === undefined) return "<undefined>";
  if (value instanceof URL) return { URL: value.href };
  if (Buffer.isBuffer(value)) return { Buffer: value.toString("hex") };
  if (value instanceof Uint8Array) return { [value.constructor.name]: Buffer.from(value).toString("hex") };
  if (value instanceof ArrayBuffer) return { ArrayBuffer: Buffer.from(value).toString("hex") };
  if (Array.isArray(value)) return value.map(reveal);
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, reveal(v)]));
  }
  return value;
}

function assertExact(actual: unknown, expected: unknown): void {
  assert.deepStrictEqual(actual, expected);
  assert.deepStrictEqual(reveal(actual), reveal(expected));
}

const wire = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

function partsOf(messages: ModelMessage[]): unknown[] {
  return messages.flatMap((m) => (typeof m.content === "string" ? [] : (m.content as unknown[])));
}

describe("ModelMessage <-> Responses items", () => {
  test("the samples cover every member of the SDK's unions", () => {
    const used = new Set(partsOf(MESSAGES));
    for (const [type, samples] of Object.entries(PARTS)) {
      assert.ok(samples.length > 0 && samples.every((s) => used.has(s)), `every ${type} sample is in a message`);
    }
    const outputs = new Set(PARTS["tool-result"].map((p) => p.output));
    for (const sample of Object.values(OUTPUTS).flat()) assert.ok(outputs.has(sample));
    const content = OUTPUTS.content[0]!.value;
    for (const sample of Object.values(OUTPUT_PARTS).flat()) assert.ok(content.includes(sample));
    const data = new Set(PARTS.file.map((p) => p.data));
    for (const sample of Object.values(FILE_DATA).flat()) assert.ok(data.has(sample));
    assert.deepEqual(new Set(MESSAGES.map((m) => m.role)), new Set(Object.keys(ROLES)));
    // the adapter's own tables name the same members
    assert.deepEqual(Object.keys(STORED_AS).sort(), Object.keys(PARTS).sort());
    assert.deepEqual(Object.keys(OUTPUT_STORED_AS).sort(), Object.keys(OUTPUTS).sort());
    assert.deepEqual(Object.keys(OUTPUT_PART_STORED_AS).sort(), Object.keys(OUTPUT_PARTS).sort());
  });

  test("every message comes back deep-equal from its items, through JSON", () => {
    const items = wire(toServiceItems(MESSAGES));
    assertExact(fromServiceItems(items), MESSAGES);
    // each message on its own too (a message's items are all it needs)
    for (const message of MESSAGES) assertExact(fromServiceItems(wire(toServiceItems([message]))), [message]);
  });

  test("each part is stored as the table says, in the Responses shape", () => {
    for (const [type, samples] of Object.entries(PARTS)) {
      for (const sample of samples) {
        const role = type === "tool-approval-response" ? "tool" : ["image", "file"].includes(type) ? "user" : "assistant";
        const [item, ...others] = toServiceItems([{ role, content: [sample] } as ModelMessage]);
        assert.equal(others.length, 0);
        assert.equal(item!["type"], STORED_AS[type as ModelMessagePart["type"]], type);
      }
    }
    const items = toServiceItems([{ role: "tool", content: [toolResult(OUTPUTS.content[0]!)] }]);
    const output = items[0]!["output"] as { type: string }[];
    const expected = OUTPUTS.content[0]!.value.map((p) =>
      (p.type === "file" || p.type === "file-data" || p.type === "file-url") && p.mediaType?.startsWith("image") ? "input_image"
        : p.type === "file" && p.data.type === "text" ? "input_text" : OUTPUT_PART_STORED_AS[p.type],
    );
    assert.deepEqual(output.map((p) => p.type), expected);
    for (const sample of Object.values(OUTPUTS).flat()) {
      const [stored] = toServiceItems([{ role: "tool", content: [toolResult(sample)] }]);
      assert.equal(Array.isArray(stored!["output"]) ? "parts" : "text", OUTPUT_STORED_AS[sample.type] === "parts" ? "parts" : "text");
    }
    // the payloads the service reads
    const [call] = toServiceItems([{ role: "assistant", content: [PARTS["tool-call"][0]!] }]);
    assert.deepEqual({ ...call, ai_sdk: undefined }, { type: "function_call", call_id: "call_1", name: "weather", arguments: '{"city":"Paris"}', ai_sdk: undefined });
    const [denied] = toServiceItems([{ role: "tool", content: [toolResult(OUTPUTS["execution-denied"][1]!)] }]);
    assert.equal(denied!["output"], "the user said no");
    const [reasoning] = toServiceItems([{ role: "assistant", content: [PARTS.reasoning[1]!] }]);
    assert.equal(reasoning!["encrypted_content"], "gAAAAABo-encrypted");
    assert.doesNotMatch(JSON.stringify(reasoning!["ai_sdk"]), /gAAAAABo/); // not stored twice
  });

  test("items moved away from their message go back to it, in their place", () => {
    // the service's Responses render puts a call's output right after the call, moving what
    // stood between them (here a tool approval request) to after the outputs
    const messages: ModelMessage[] = [
      { role: "assistant", content: [PARTS["tool-call"][0]!, ...PARTS["tool-approval-request"], { type: "text", text: "asked" }] },
      { role: "tool", content: [PARTS["tool-result"][1]!] },
    ];
    const [call, approval, text, output] = wire(toServiceItems(messages));
    assertExact(fromServiceItems([call!, text!, output!, approval!]), messages);
    // a part the projection changed (a cleared output: no ai_sdk) stays in its message
    const cleared = { type: "function_call_output", call_id: "call_1", output: "[tool result cleared: weather(call_1)]" };
    assert.deepStrictEqual(fromServiceItems([call!, approval!, text!, cleared]).map((m) => m.role), ["assistant", "tool"]);
    assert.deepStrictEqual(fromServiceItems([call!, approval!, text!, cleared])[1], {
      role: "tool",
      content: [{ type: "tool-result", toolCallId: "call_1", toolName: "weather", output: { type: "text", value: "[tool result cleared: weather(call_1)]" } }],
    });
  });

  test("a value no JSON can carry is refused before anything is sent", async () => {
    const bad = [{ role: "user", content: [{ type: "text", text: "x", providerOptions: { a: { f: (() => 1) as never } } }] }] as ModelMessage[];
    assert.throws(() => toServiceItems(bad), TypeError);
    const history = new ServiceMessageHistory(sm, newId("ai-bad"));
    await assert.rejects(history.save(bad), TypeError);
    assert.deepEqual(await history.load(), []);
  });
});

describe("ServiceMessageHistory", () => {
  test("saves and loads every kind of message exactly; the service understands them", async () => {
    const history = new ServiceMessageHistory(sm, newId("ai"));
    assert.deepEqual(await history.load(), []); // a session that does not exist yet is empty
    assert.deepEqual(await history.prompt(), []);
    await history.save(MESSAGES.slice(0, 3));
    await history.save(MESSAGES.slice(3));
    await history.save([]);
    assertExact(await history.load(), MESSAGES);
    // no budget: the prompt is the whole conversation, and the SDK takes it
    const prompt = await history.prompt();
    assertExact(prompt, MESSAGES);
    const model = new MockLanguageModelV4({ doGenerate: async () => answer("ok"), supportedUrls: { "*": [/^https:/] } }); // no downloads
    await generateText({ model, messages: [...prompt, { role: "user", content: "next" }], allowSystemInMessages: true });
    assert.match(JSON.stringify(model.doGenerateCalls[0]!.prompt), /keys with undefined values stay/);

    const stored = (await sm.listItems(history.sessionId, { limit: 1000 })).items;
    const types = stored.map((i) => i.type);
    assert.equal(types.filter((t) => t === "function_call").length, PARTS["tool-call"].length);
    assert.equal(types.filter((t) => t === "function_call_output").length, PARTS["tool-result"].length);
    assert.equal(types.filter((t) => t === "reasoning").length, 2);
    assert.ok(stored.every((i) => i.format === "openai-responses"));
    const user = stored.find((i) => i.type === "message" && i.role === "user" && Array.isArray(i.content))!;
    assert.ok(user.tokens > 100, "images are counted"); // text + the image charge

    // another client reads it in its own format: tool calls and their results
    const chat = await sm.getContext(history.sessionId, { format: "openai-chat" });
    const toolCalls = (chat.messages ?? []).flatMap((m) => (m["tool_calls"] as { id: string }[] | undefined) ?? []);
    assert.ok(toolCalls.some((c) => c.id === "call_1"));
    assert.ok((chat.messages ?? []).some((m) => m["role"] === "tool" && JSON.stringify(m["content"]).includes("sunny, 21C")));
    const anthropic = await sm.getContext(history.sessionId, { format: "anthropic" });
    assert.match(JSON.stringify(anthropic.messages), /"tool_use".*"weather"/);
    const hits = await sm.search({ q: "sunny", mode: "fulltext" }, { sessionId: history.sessionId });
    assert.ok(hits.items.length >= 1);

    await history.clear();
    assert.deepEqual(await history.load(), []);
    assert.equal((await sm.listHistory(history.sessionId, { limit: 1000 })).items.length, stored.length); // kept in the history
  });

  test("the budgeted prompt: summary first, cleared tool results, trimmed reasoning", async () => {
    const id = newId("ai-budget");
    const history = new ServiceMessageHistory(sm, id, { context: { max_recent_tool_results: 1, trim_old_reasoning: true } });
    const turn = (n: number): ModelMessage[] => [
      { role: "user", content: `Question ${n}: the weather in city ${n}?` },
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: `Look up city ${n}.`, providerOptions: { anthropic: { signature: `sig${n}` } } },
          { type: "tool-call", toolCallId: `c${n}`, toolName: "weather", input: { city: n } },
        ],
      },
      { role: "tool", content: [{ type: "tool-result", toolCallId: `c${n}`, toolName: "weather", output: { type: "json", value: { n, sky: "clear" } } }] },
      { role: "assistant", content: [{ type: "text", text: `City ${n} is clear.` }] },
    ];
    const all = [...turn(1), ...turn(2), ...turn(3)];
    await history.save(all);

    const prompt = await history.prompt();
    // the newest turn is as saved; older tool results are cleared (as text, naming their
    // tool), older reasoning is gone
    assertExact(prompt.slice(-4), turn(3));
    const older = prompt.slice(0, -4);
    const olderResults = partsOf(older).filter((p): p is PartOf<"tool-result"> => (p as { type: string }).type === "tool-result");
    assert.equal(olderResults.length, 2);
    for (const r of olderResults) {
      assert.equal(r.toolName, "weather");
      assert.equal(r.output.type, "text");
      assert.match(String((r.output as { value: string }).value), /cleared/);
    }
    assert.ok(!partsOf(older).some((p) => (p as { type: string }).type === "reasoning"));
    assertExact(await history.load(), all); // the memory itself is untouched

    // a smaller budget keeps whole turns: no tool result without its call
    const small = await history.prompt({ max_items: 5 });
    assert.ok(small.length < prompt.length);
    const smallCalls = new Set(partsOf(small).flatMap((p) => ((p as { type: string }).type === "tool-call" ? [(p as PartOf<"tool-call">).toolCallId] : [])));
    for (const p of partsOf(small)) if ((p as { type: string }).type === "tool-result") assert.ok(smallCalls.has((p as PartOf<"tool-result">).toolCallId));

    // after a compaction the summary comes first, as a system message
    await sm.compact(id, { policy: "structured", keep_last_items: 4 });
    const compacted = await history.prompt();
    assert.equal(compacted[0]?.role, "system");
    assert.match(String(compacted[0]?.content), /weather/);
    assertExact(compacted.slice(1), turn(3));

    // every prompt is a prompt the SDK takes
    for (const messages of [prompt, small, compacted]) {
      const model = new MockLanguageModelV4({ doGenerate: async () => answer("ok") });
      const result = await generateText({ model, messages: [...messages, { role: "user", content: "next" }], allowSystemInMessages: true });
      assert.equal(result.text, "ok");
      assert.ok(model.doGenerateCalls[0]!.prompt.length >= messages.length);
    }
  });

  test("items other clients wrote read as ModelMessages the SDK takes", async () => {
    const id = newId("ai-foreign");
    await sm.appendItems(id, {
      format: "openai-chat",
      items: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: null, tool_calls: [{ id: "call_9", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } }] },
        { role: "tool", tool_call_id: "call_9", content: "sunny" },
        { role: "assistant", content: "Sunny." },
      ],
    }, { create: true });
    const history = new ServiceMessageHistory(sm, id);
    const expected: ModelMessage[] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: [{ type: "tool-call", toolCallId: "call_9", toolName: "weather", input: { city: "Paris" } }] },
      { role: "tool", content: [{ type: "tool-result", toolCallId: "call_9", toolName: "weather", output: { type: "text", value: "sunny" } }] },
      { role: "assistant", content: "Sunny." },
    ];
    assert.deepStrictEqual(await history.load(), expected);
    assert.deepStrictEqual(await history.prompt(), expected);
    const model = new MockLanguageModelV4({ doGenerate: async () => answer("Still sunny.") });
    const result = await generateText({ model, messages: [...(await history.prompt()), { role: "user", content: "And now?" }], allowSystemInMessages: true });
    assert.equal(result.text, "Still sunny.");
  });
});

// --- driven by generateText / streamText with the SDK's mock model --------------------------

type GenerateFn = Extract<NonNullable<NonNullable<ConstructorParameters<typeof MockLanguageModelV4>[0]>["doGenerate"]>, (...args: never[]) => unknown>;
type GenerateResult = Awaited<ReturnType<GenerateFn>>;
type CallOptions = Parameters<GenerateFn>[0];

const USAGE: GenerateResult["usage"] = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 2, text: 2, reasoning: 0 },
};

function answer(text: string): GenerateResult {
  return { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: "stop" }, usage: USAGE, warnings: [] };
}

const promptText = (options: CallOptions): string => JSON.stringify(options.prompt);

/** The script of a three-turn conversation; each step checks what the model was sent. */
function scriptedModel(): MockLanguageModelV4 {
  const steps: ((options: CallOptions) => GenerateResult)[] = [
    // turn 1: reasoning, two tool calls at once (one tool fails)
    (): GenerateResult => ({
      content: [
        { type: "reasoning", text: "Two cities: call both.", providerMetadata: { anthropic: { signature: "sig-1" } } },
        { type: "tool-call", toolCallId: "call_p", toolName: "weather", input: '{"city":"Paris"}', providerMetadata: { google: { thoughtSignature: "ts-1" } } },
        { type: "tool-call", toolCallId: "call_r", toolName: "weather", input: '{"city":"Rome"}' },
      ],
      finishReason: { unified: "tool-calls", raw: "tool_use" },
      usage: USAGE,
      warnings: [],
    }),
    (options) => {
      assert.match(promptText(options), /sunny in Paris/);
      assert.match(promptText(options), /no station in Rome/); // the failed tool's error
      return answer("Paris is sunny; Rome has no station.");
    },
    // turn 2: sees turn 1, calls a tool again
    (options) => {
      assert.match(promptText(options), /What is the weather in Paris and Rome\?/);
      assert.match(promptText(options), /Paris is sunny; Rome has no station\./);
      assert.match(promptText(options), /"toolCallId":"call_p"/);
      return {
        content: [{ type: "tool-call", toolCallId: "call_f", toolName: "forecast", input: '{"city":"Paris","days":1}' }],
        finishReason: { unified: "tool-calls", raw: "tool_use" },
        usage: USAGE,
        warnings: [],
      };
    },
    (options) => {
      assert.match(promptText(options), /rain in Paris in 1 day/);
      return answer("Rain tomorrow in Paris.");
    },
  ];
  let step = 0;
  return new MockLanguageModelV4({
    doGenerate: async (options) => {
      const next = steps[step++];
      if (!next) throw new Error("the script is over");
      return next(options);
    },
    doStream: async (options) => {
      // turn 3, streamed: sees both earlier turns
      assert.match(promptText(options), /Rain tomorrow in Paris\./);
      assert.match(promptText(options), /"toolCallId":"call_f"/);
      return {
        stream: convertArrayToReadableStream([
          { type: "stream-start", warnings: [] },
          { type: "text-start", id: "t1" },
          { type: "text-delta", id: "t1", delta: "You're " },
          { type: "text-delta", id: "t1", delta: "welcome." },
          { type: "text-end", id: "t1" },
          { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: USAGE },
        ]),
      };
    },
  });
}

const TOOLS = {
  weather: tool({
    description: "The weather in a city",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }: { city: string }) => {
      if (city === "Rome") throw new Error(`no station in ${city}`);
      return `sunny in ${city}`;
    },
  }),
  forecast: tool({
    description: "The forecast",
    inputSchema: z.object({ city: z.string(), days: z.number() }),
    execute: async ({ city, days }: { city: string; days: number }) => ({ text: `rain in ${city} in ${days} day` }),
  }),
};

interface Memory {
  read(): Promise<ModelMessage[]>;
  save(messages: ModelMessage[]): Promise<void>;
}

/** Three turns: generateText with tools (twice), then streamText; each turn's prompt is the
 * memory plus the new user message, and the turn is saved back. */
async function converse(memory: Memory): Promise<{ texts: string[]; model: MockLanguageModelV4 }> {
  const model = scriptedModel();
  const texts: string[] = [];
  for (const question of ["What is the weather in Paris and Rome?", "And tomorrow?"]) {
    const user: ModelMessage = { role: "user", content: question };
    const result = await generateText({ model, instructions: "Be brief.", messages: [...(await memory.read()), user], tools: TOOLS, stopWhen: stepCountIs(4) });
    texts.push(result.text);
    await memory.save([user, ...result.responseMessages]);
  }
  const user: ModelMessage = { role: "user", content: "Thanks!" };
  const streamed = streamText({ model, instructions: "Be brief.", messages: [...(await memory.read()), user] });
  texts.push(await streamed.text);
  await memory.save([user, ...(await streamed.responseMessages)]);
  return { texts, model };
}

describe("generateText and streamText with a ServiceMessageHistory", () => {
  test("three turns with tool calls: the model sees the same prompts as with an in-memory array", async () => {
    const history = new ServiceMessageHistory(sm, newId("ai-run"));
    const ours = await converse({ read: () => history.prompt(), save: (m) => history.save(m) });
    const array: ModelMessage[] = [];
    const theirs = await converse({ read: async () => [...array], save: async (m) => void array.push(...m) });

    assert.deepEqual(ours.texts, ["Paris is sunny; Rome has no station.", "Rain tomorrow in Paris.", "You're welcome."]);
    assert.deepEqual(ours.texts, theirs.texts);
    assert.deepStrictEqual(ours.model.doGenerateCalls.map((c) => c.prompt), theirs.model.doGenerateCalls.map((c) => c.prompt));
    assert.deepStrictEqual(ours.model.doStreamCalls.map((c) => c.prompt), theirs.model.doStreamCalls.map((c) => c.prompt));
    assert.equal(ours.model.doGenerateCalls.length, 4);

    // the memory holds exactly what the SDK produced, and the service sees calls and results
    assertExact(await history.load(), array);
    const parts = partsOf(array) as { type: string; output?: { type: string } }[];
    assert.ok(parts.some((p) => p.type === "reasoning"));
    assert.ok(parts.some((p) => p.type === "tool-result" && p.output?.type === "error-text"));
    assert.ok(parts.some((p) => p.type === "tool-result" && p.output?.type === "json"));
    const stored = (await sm.listItems(history.sessionId, { limit: 1000 })).items.map((i) => i.type);
    assert.equal(stored.filter((t) => t === "function_call").length, 3);
    assert.equal(stored.filter((t) => t === "function_call_output").length, 3);
  });
});
