// The OpenAI Agents SDK session: checked against the real `@openai/agents` types (it is
// assigned to `Session` below, compiled by tsc), compared call by call with the SDK's own
// MemorySession, and driven by the SDK's Runner with a scripted model (no network but the
// live server's).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  Agent,
  MemorySession,
  Runner,
  Usage,
  tool,
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type Session,
} from "@openai/agents";
import { z } from "zod";

import { ServiceSession, fromServiceItem, toServiceItem } from "session-memory-client/agents";
import { client, newId } from "./helpers.js";

const sm = client();

// Items as the SDK writes them, one of each kind a run produces or a user passes in.
const SDK_ITEMS: AgentInputItem[] = [
  { role: "user", content: "What is the weather in Paris?" },
  { type: "message", role: "system", content: "Be brief." },
  { type: "message", role: "user", content: [{ type: "input_text", text: "and this image" }, { type: "input_image", image: "https://example.com/a.png", detail: "auto" }, { type: "input_image", image: { id: "file_1" } }] },
  { type: "message", role: "user", content: [{ type: "input_file", file: "data:application/pdf;base64,JVBERi0=", filename: "a.pdf" }, { type: "input_file", file: { url: "https://example.com/b.pdf" } }] },
  { type: "reasoning", id: "rs_1", content: [{ type: "input_text", text: "The user wants the weather." }], providerData: { encryptedContent: "gAAAA" } },
  { type: "function_call", id: "fc_1", callId: "call_1", name: "get_weather", arguments: '{"city":"Paris"}', status: "completed", providerData: { model: "gpt-x" } },
  { type: "function_call_result", name: "get_weather", callId: "call_1", status: "completed", output: { type: "text", text: "sunny, 21C" } },
  { type: "function_call", callId: "call_2", name: "screenshot", arguments: "{}", status: "completed" },
  { type: "function_call_result", name: "screenshot", callId: "call_2", status: "completed", output: { type: "image", image: "data:image/png;base64,iVBORw0KGgo=", detail: "low" } },
  { type: "function_call", callId: "call_3", name: "lookup", arguments: "{}" },
  { type: "function_call_result", name: "lookup", callId: "call_3", status: "completed", output: [{ type: "input_text", text: "row 1" }, { type: "input_image", image: "https://example.com/c.png" }] },
  { type: "function_call", callId: "call_4", name: "echo", arguments: "{}" },
  { type: "function_call_result", name: "echo", callId: "call_4", status: "incomplete", output: "plain string" },
  { type: "hosted_tool_call", id: "ws_1", name: "web_search_call", status: "completed", providerData: { action: { type: "search", query: "paris" } } },
  { type: "computer_call", id: "cu_1", callId: "call_5", status: "completed", action: { type: "click", x: 1, y: 2, button: "left" } },
  { type: "computer_call_result", callId: "call_5", output: { type: "computer_screenshot", data: "data:image/png;base64,iVBORw0KGgo=" } },
  { type: "message", role: "assistant", id: "msg_1", status: "completed", content: [{ type: "output_text", text: "Sunny, 21C.", providerData: { annotations: [] } }, { type: "refusal", refusal: "no" }] },
];

describe("ServiceSession", () => {
  test("is an Agents SDK Session", async () => {
    const session: Session = new ServiceSession(sm, "any");
    assert.equal(await session.getSessionId(), "any");
    assert.throws(() => new ServiceSession(sm, "x", { history: "all" as never }), TypeError);
  });

  test("every kind of SDK item comes back exactly as added, and the service understands them", async () => {
    const session = new ServiceSession(sm, newId("agents"));
    await session.addItems(SDK_ITEMS);
    assert.deepEqual(await session.getItems(), SDK_ITEMS);
    assert.deepEqual(await session.getItems(3), SDK_ITEMS.slice(-3));

    const stored = (await sm.listItems(session.sessionId)).items;
    assert.deepEqual(
      stored.slice(4, 13).map((i) => i.type),
      ["reasoning", "function_call", "function_call_output", "function_call", "function_call_output", "function_call", "function_call_output", "function_call", "function_call_output"],
    );
    // only the item whose shape the mapping cannot reverse carries its SDK form
    const raw = (await sm.listItems(session.sessionId, { format: "openai-responses" })).items;
    assert.deepEqual(raw.filter((i) => "agents_sdk_item" in i).length, 0);
    // rendered for another provider: the tool round trip is a tool call and its result
    const chat = await sm.getContext(session.sessionId, { format: "openai-chat" });
    const calls = (chat.messages ?? []).flatMap((m) => (m["tool_calls"] as { id: string }[] | undefined) ?? []);
    assert.ok(calls.some((c) => c.id === "call_1"));
    assert.ok((chat.messages ?? []).some((m) => m["role"] === "tool" && m["tool_call_id"] === "call_1" && JSON.stringify(m["content"]).includes("sunny")));
    const hits = await sm.search({ q: "sunny" }, { sessionId: session.sessionId });
    assert.ok(hits.items.length >= 1);
  });

  test("the same calls give the same answers as the SDK's MemorySession", async () => {
    const ours = new ServiceSession(sm, newId("same"));
    const theirs = new MemorySession();
    const both = async <T>(call: (s: Session) => Promise<T>): Promise<T> => {
      const [a, b] = await Promise.all([call(ours), call(theirs)]);
      assert.deepEqual(a, b);
      return a;
    };
    await both((s) => s.getItems()); // a session that does not exist yet is empty
    await both((s) => s.popItem());
    await both((s) => s.clearSession());
    await both((s) => s.addItems(SDK_ITEMS.slice(0, 7)));
    await both((s) => s.addItems([]));
    await both((s) => s.getItems());
    for (const limit of [0, -1, 1, 2, 7, 50]) await both((s) => s.getItems(limit));
    assert.deepEqual(await both((s) => s.popItem()), SDK_ITEMS[6]);
    await both((s) => s.getItems());
    await both((s) => s.addItems(SDK_ITEMS.slice(7)));
    await both((s) => s.getItems(4));
    await both((s) => s.clearSession());
    await both((s) => s.getItems());
    await both((s) => s.popItem());
    // the service keeps what was popped and cleared
    assert.equal((await sm.listHistory(ours.sessionId)).items.length, SDK_ITEMS.length);
  });

  test("an item the mapping cannot reverse travels whole", async () => {
    // a Responses-style part handed to the SDK as is: `image_url` would read back as `image`
    const odd = { type: "message", role: "user", content: [{ type: "input_image", image_url: "https://example.com/x.png" }] } as unknown as AgentInputItem;
    const mapped = toServiceItem(odd as never);
    assert.equal(mapped["type"], "message");
    assert.deepEqual(mapped["agents_sdk_item"], odd);
    assert.deepEqual(fromServiceItem(mapped), odd);
    const session = new ServiceSession(sm, newId("odd"));
    await session.addItems([{ role: "user", content: "first" }, odd]);
    assert.deepEqual(await session.getItems(1), [odd]);
    assert.deepEqual(await session.popItem(), odd);
  });

  test("items another client wrote in Responses format read as SDK items", async () => {
    const id = newId("foreign");
    await sm.appendItems(id, {
      format: "openai-responses",
      items: [
        { type: "function_call", call_id: "call_9", name: "f", arguments: "{}" },
        { type: "function_call_output", call_id: "call_9", output: "done" },
        { type: "reasoning", id: "rs_9", summary: [{ type: "summary_text", text: "thinking" }] },
      ],
    }, { create: true });
    const items = await new ServiceSession(sm, id).getItems();
    assert.deepEqual(items, [
      { type: "function_call", callId: "call_9", name: "f", arguments: "{}" },
      { type: "function_call_result", callId: "call_9", output: "done" },
      { type: "reasoning", id: "rs_9", content: [{ type: "input_text", text: "thinking" }] },
    ]);
  });
});

/** A Model that answers from a script: each turn sees the request, returns output items. */
class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  constructor(private readonly script: ((request: ModelRequest) => ModelResponse["output"])[]) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const next = this.script.shift();
    if (!next) throw new Error("the script is over");
    return { usage: new Usage(), output: next(request), responseId: `resp_${this.requests.length}` };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("not scripted");
  }
}

const inputTexts = (request: ModelRequest): string => JSON.stringify(request.input);

function script(): ScriptedModel {
  return new ScriptedModel([
    () => [{ type: "function_call", id: "fc_1", callId: "call_1", name: "get_weather", arguments: '{"city":"Paris"}', status: "completed" }],
    (request) => {
      assert.match(inputTexts(request), /sunny in Paris/); // the tool's result is in the input
      return [{ type: "message", role: "assistant", id: "msg_1", status: "completed", content: [{ type: "output_text", text: "It is sunny in Paris." }] }];
    },
    (request) => {
      // the second run sees the first one, read back from the session
      assert.match(inputTexts(request), /What is the weather in Paris\?/);
      assert.match(inputTexts(request), /It is sunny in Paris\./);
      return [{ type: "message", role: "assistant", id: "msg_2", status: "completed", content: [{ type: "output_text", text: "Tomorrow too." }] }];
    },
  ]);
}

async function converse(session: Session): Promise<{ finals: unknown[]; model: ScriptedModel }> {
  const model = script();
  const getWeather = tool({
    name: "get_weather",
    description: "The weather in a city",
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => `sunny in ${city}`,
  });
  const agent = new Agent({ name: "assistant", instructions: "Be brief.", model, tools: [getWeather] });
  const runner = new Runner({ tracingDisabled: true });
  const first = await runner.run(agent, "What is the weather in Paris?", { session });
  const second = await runner.run(agent, "And tomorrow?", { session });
  return { finals: [first.finalOutput, second.finalOutput], model };
}

describe("Runner with a ServiceSession", () => {
  test("two runs: the second sees the first; the items match a MemorySession run", async () => {
    const session = new ServiceSession(sm, newId("runner"));
    const ours = await converse(session);
    const theirs = await converse(new MemorySession());
    assert.deepEqual(ours.finals, ["It is sunny in Paris.", "Tomorrow too."]);
    assert.deepEqual(ours.finals, theirs.finals);
    const items = await session.getItems();
    assert.deepEqual(items.map((i) => i.type ?? "message"), ["message", "function_call", "function_call_result", "message", "message", "message"]);
    // the model saw the same input with either session
    assert.deepEqual(ours.model.requests.map((r) => r.input), theirs.model.requests.map((r) => r.input));

    const canonical = (await sm.listItems(session.sessionId)).items.map((i) => i.type);
    assert.deepEqual(canonical, ["message", "function_call", "function_call_output", "message", "message", "message"]);
  });

  test("history: 'prompt' sends the budgeted prompt, the compaction summary first", async () => {
    const id = newId("prompt");
    await converse(new ServiceSession(sm, id));
    await sm.compact(id, { policy: "structured", keep_last_items: 2 });
    const session = new ServiceSession(sm, id, { history: "prompt", context: { max_items: 50 } });
    const prompt = await session.getItems();
    assert.equal(prompt.length, 3);
    assert.deepEqual({ type: prompt[0]?.type, role: (prompt[0] as { role?: string }).role }, { type: "message", role: "system" });
    assert.match(JSON.stringify(prompt[0]), /get_weather/);
    assert.deepEqual(await session.getItems(2), (await new ServiceSession(sm, id).getItems()).slice(-2)); // a limit reads exactly
    const smaller = await session.getPrompt({ max_items: 1 });
    assert.ok(smaller.length < prompt.length);
    assert.deepEqual(smaller[0], prompt[0]); // the summary stays
  });
});
