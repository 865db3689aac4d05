// Every operation of the client against the live server named by SESSION_MEMORY_URL.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  AuthenticationError,
  ConflictError,
  InvalidInputError,
  NotFoundError,
  PreconditionFailedError,
  ProblemError,
  SessionMemoryClient,
  seg,
  type AnthropicMessage,
  type ChatMessage,
  type Item,
} from "session-memory-client";
import { API_KEY, BASE_URL, client, newId } from "./helpers.js";

const sm = client();

describe("sessions", () => {
  test("create, get, list, update and delete", async () => {
    const id = newId("sess");
    const created = await sm.createSession({ id, metadata: { agent: "ts" }, config: { context: { max_tokens: 8000 } } });
    assert.equal(created.id, id);
    assert.equal(created.version, 1);
    assert.deepEqual(created.metadata, { agent: "ts" });

    const read = await sm.getSession(id);
    assert.equal(read.version, 1);
    assert.equal(read.item_count, 0);

    const page = await sm.listSessions({ prefix: id });
    assert.deepEqual(page.items.map((s) => s.id), [id]);

    const updated = await sm.updateSession(id, { summary: "so far", metadata: { agent: "ts", n: 2 } }, { ifMatch: 1 });
    assert.equal(updated.summary, "so far");
    assert.equal(updated.version, 2);
    const cleared = await sm.updateSession(id, { summary: null });
    assert.equal(cleared.summary, null);
    assert.deepEqual(cleared.metadata, { agent: "ts", n: 2 }); // untouched: not in the body

    await sm.deleteSession(id);
    await assert.rejects(sm.getSession(id), NotFoundError);
  });

  test("a generated id, and ids real apps use, in every path", async () => {
    const generated = await sm.createSession();
    assert.ok(generated.id.length > 0);
    for (const id of ["user@example.com", "tenant:user 17", "a?b#c%d&e=f+g", "élan-日本-🙂", "(quoted)!*'"]) {
      const full = `${id}-${crypto.randomUUID().slice(0, 6)}`;
      await sm.createSession({ id: full });
      const appended = await sm.appendItems(full, { format: "canonical", items: [{ type: "message", role: "user", content: "hi" }] });
      const item = appended.items[0] as Item;
      assert.equal((await sm.getSession(full)).id, full);
      assert.equal((await sm.getItem(full, item.id)).id, item.id);
      assert.equal((await sm.listItems(full)).items.length, 1);
      await sm.deleteSession(full);
    }
    assert.equal(seg("a/b c@d"), "a%2Fb%20c%40d");
    assert.equal(seg("x!'()*"), "x%21%27%28%29%2A");
  });
});

describe("append in every format", () => {
  test("openai-chat: a tool round trip, read back exactly as written and as context", async () => {
    const id = newId("chat");
    const messages: ChatMessage[] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "sunny, 21C" },
      { role: "assistant", content: "Sunny, 21C." },
    ];
    const appended = await sm.appendItems(id, { format: "openai-chat", items: messages }, { create: true });
    assert.deepEqual(appended.items.map((i) => i.type), ["message", "message", "function_call", "function_call_output", "message"]);
    const back = await sm.listItems(id, { format: "openai-chat" });
    assert.deepEqual(back.items, messages);
    const context = await sm.getContext(id, { format: "openai-chat", max_tokens: 4000 });
    assert.deepEqual(context.messages, messages);
    assert.equal(context.report.source_items, 5);
  });

  test("openai-responses: items come back byte-identical", async () => {
    const id = newId("resp");
    const items = [
      { type: "message", role: "user", content: [{ type: "input_text", text: "Read a.py" }] },
      { type: "function_call", id: "fc_1", call_id: "call_a", name: "read_file", arguments: '{"path":"a.py"}', status: "completed" },
      { type: "function_call_output", call_id: "call_a", output: "print('hi')" },
      { type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "python" } },
      { type: "message", role: "assistant", id: "msg_1", status: "completed", content: [{ type: "output_text", text: "It prints hi.", annotations: [] }] },
    ];
    await sm.appendItems(id, { format: "openai-responses", items: items as never }, { create: true });
    const back = await sm.listItems(id, { format: "openai-responses" });
    assert.deepEqual(back.items, items);
    const context = await sm.getContext(id, { format: "openai-responses" });
    assert.deepEqual(context.input, items);
  });

  test("anthropic: system, tool_use and tool_result", async () => {
    const id = newId("anth");
    const items: AnthropicMessage[] = [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "sunny" }] },
    ];
    const appended = await sm.appendItems(id, { format: "anthropic", system: "Be brief.", items }, { create: true });
    assert.deepEqual(appended.items.map((i) => i.type), ["message", "message", "function_call", "function_call_output"]);
    const context = await sm.getContext(id, { format: "anthropic" });
    assert.equal(context.system, "Be brief.");
    assert.deepEqual(context.messages, items);
  });

  test("canonical, with pinned items, pop and clear", async () => {
    const id = newId("canon");
    await sm.createSession({ id });
    const first = await sm.appendItems(id, {
      items: [
        { type: "message", role: "system", content: "rules", pinned: true },
        { type: "message", role: "user", content: "one" },
        { type: "message", role: "user", content: "two" },
      ],
    });
    assert.equal(first.version, 2);
    assert.equal(first.items[0]?.pinned, true);
    const last = await sm.listItems(id, { last: 1 });
    assert.deepEqual(last.items.map((i) => (i as { content?: unknown }).content), ["two"]);
    const items: Item[] = [];
    for await (const item of sm.iterItems(id, { pageSize: 1 })) items.push(item);
    assert.deepEqual(items.map((i) => i.seq), [1, 2, 3]);

    const popped = await sm.popItem(id, { format: "openai-chat" });
    assert.deepEqual(popped.rendered, { role: "user", content: "two" });
    const cleared = await sm.clearItems(id);
    assert.equal(cleared.cleared_items, 2);
    await assert.rejects(sm.popItem(id), (e: unknown) => e instanceof ConflictError && e.code === "empty-working-memory");
    const history = await sm.listHistory(id);
    assert.equal(history.items.length, 3); // popped and cleared items stay in history
  });

  test("pages follow next_cursor, sent as cursor; after_seq still pages the same", async () => {
    const id = newId("pages");
    const sent: URL[] = [];
    const watched = client({
      fetch: (input, init) => {
        sent.push(new URL(input instanceof Request ? input.url : input));
        return fetch(input, init);
      },
    });
    const texts = ["one", "two", "three", "four"];
    await watched.appendItems(id, { items: texts.map((content) => ({ type: "message", role: "user", content })) }, { create: true });
    sent.length = 0;
    const items: Item[] = [];
    for await (const item of watched.iterItems(id, { pageSize: 1 })) items.push(item);
    assert.deepEqual(items.map((i) => (i as { content?: unknown }).content), texts);
    assert.deepEqual(sent.map((url) => url.searchParams.get("cursor")), [null, "1", "2", "3"]);
    assert.ok(sent.every((url) => !url.searchParams.has("after_seq")));

    const first = await sm.listHistory(id, { limit: 2 });
    assert.equal(first.next_cursor, 2);
    const next = await sm.listHistory(id, { cursor: first.next_cursor, limit: 2 });
    assert.deepEqual(next.items.map((i) => i.seq), [3, 4]);
    assert.deepEqual(await sm.listHistory(id, { after_seq: 2, limit: 2 }), next);
    const events = await sm.listEvents(id, { limit: 1 });
    assert.notEqual(events.next_cursor, null);
    const after = await sm.listEvents(id, { cursor: events.next_cursor!, limit: 1 });
    assert.ok(after.items[0]!.seq > events.items[0]!.seq);
  });
});

describe("context, compaction, snapshots, history, search", () => {
  test("compact, snapshot, restore, fork, events, search", async () => {
    const id = newId("flow");
    const marker = `tram${crypto.randomUUID().replace(/-/g, "").slice(0, 10)}`; // this run's only
    const turns = ["Plan the trip to Lisbon", "Book the flight", "Find a hotel near Alfama", `What about ${marker}?`];
    for (const text of turns) {
      await sm.appendItems(id, { format: "openai-chat", items: [{ role: "user", content: text }, { role: "assistant", content: `Done: ${text}` }] }, { create: true });
    }
    const budgeted = await sm.getContext(id, { format: "openai-chat", max_items: 2 });
    assert.equal(budgeted.messages?.length, 2);
    assert.ok(budgeted.report.dropped_items >= 6);

    const dry = await sm.compact(id, { policy: "structured", keep_last_items: 2, dry_run: true });
    assert.equal((await sm.getSession(id)).item_count, 8); // a dry run changes nothing
    assert.equal(dry.compacted_items, 6);
    const compacted = await sm.compact(id, { policy: "structured", keep_last_items: 2 });
    assert.equal(compacted.compacted_items, 6);
    assert.match(compacted.summary ?? "", /Lisbon/);
    assert.equal((await sm.listCompactions(id)).items[0]?.id, compacted.id);
    const prompt = await sm.getContext(id, { format: "openai-chat" });
    assert.equal(prompt.messages?.[0]?.["role"], "system"); // the summary leads

    const snapshot = await sm.createSnapshot(id, { label: "after compaction" });
    assert.equal(snapshot.item_count, 2);
    await sm.appendItems(id, { items: [{ type: "message", role: "user", content: "oops" }] });
    const snapshots = await sm.listSnapshots(id);
    assert.equal(snapshots.items[0]?.id, snapshot.id);
    const restored = await sm.restore(id, { snapshot_id: snapshot.id });
    assert.equal(restored.restored_items, 2);
    assert.equal(restored.session.item_count, 2);
    const undone = await sm.restore(id, { snapshot_id: restored.undo_snapshot_id });
    assert.equal(undone.session.item_count, 3); // "oops" is back

    const document = await sm.exportSnapshot(id, snapshot.id);
    const copy = newId("copy");
    await sm.createSession({ id: copy });
    assert.equal((await sm.restore(copy, { snapshot: document })).session.item_count, 2);
    const forked = await sm.fork(id, { new_session_id: newId("fork"), snapshot_id: snapshot.id });
    assert.equal(forked.item_count, 2);
    await sm.deleteSnapshot(id, snapshot.id);
    await assert.rejects(sm.exportSnapshot(id, snapshot.id), NotFoundError);

    const events = (await sm.listEvents(id)).items.map((e) => e.type);
    assert.deepEqual(events.slice(-7), ["compacted", "snapshot_created", "appended", "restored", "restored", "forked", "snapshot_deleted"]);

    const history = await sm.listHistory(id);
    assert.ok(history.items.length >= 9);
    const inMemory = await sm.search({ q: "Alfama" }, { sessionId: id });
    assert.equal(inMemory.items.length, 0); // compacted away from working memory...
    const inHistory = await sm.search({ q: "Alfama", scope: "history" }, { sessionId: id });
    assert.ok(inHistory.items.length >= 1 && inHistory.items.every((h) => h.session_id === id)); // ...not from history
    const everywhere = await sm.search({ q: marker });
    assert.deepEqual([...new Set(everywhere.items.map((h) => h.session_id))].sort(), [copy, id, forked.id].sort()); // this session, its restored copy and its fork
  });
});

describe("typed problems", () => {
  test("404, 409, 412 and 422 are ProblemError subclasses with the problem document", async () => {
    const id = newId("err");
    const missing = await sm.getSession(id).catch((e: unknown) => e);
    assert.ok(missing instanceof NotFoundError && missing instanceof ProblemError);
    assert.equal(missing.status, 404);
    assert.equal(missing.code, "session-not-found");
    assert.equal(missing.type, "https://session-memory.dev/problems/session-not-found");
    assert.equal(missing.title, "Session not found");
    assert.match(missing.detail, new RegExp(id));

    await sm.createSession({ id });
    await assert.rejects(sm.createSession({ id }), (e: unknown) => e instanceof ConflictError && e.status === 409);
    await assert.rejects(
      sm.appendItems(id, { items: [{ type: "message", role: "user", content: "x" }] }, { ifMatch: 7 }),
      (e: unknown) => e instanceof PreconditionFailedError && e.status === 412,
    );
    const invalid = await sm.appendItems(id, { format: "openai-chat", items: [{ role: "nobody", content: 1 }] as never }).catch((e: unknown) => e);
    assert.ok(invalid instanceof InvalidInputError);
    assert.equal(invalid.status, 422);
    assert.ok(invalid.errors.length >= 1 && invalid.errors.every((e) => Array.isArray(e.loc)));
    // a failed write changed nothing
    const session = await sm.getSession(id);
    assert.equal(session.version, 1);
    assert.equal(session.item_count, 0);
  });

  test("the same Idempotency-Key replays the first answer; with another body it is a 422", async () => {
    const id = newId("idem");
    const body = { items: [{ type: "message" as const, role: "user" as const, content: "once" }] };
    const first = await sm.appendItems(id, body, { create: true, idempotencyKey: `k-${id}` });
    const again = await sm.appendItems(id, body, { create: true, idempotencyKey: `k-${id}` });
    assert.deepEqual(again, first);
    assert.equal((await sm.getSession(id)).item_count, 1);
    await assert.rejects(
      sm.appendItems(id, { items: [{ type: "message", role: "user", content: "other" }] }, { create: true, idempotencyKey: `k-${id}` }),
      InvalidInputError,
    );
  });

  test("authentication: the key is sent as a bearer token", async () => {
    if (API_KEY) {
      const wrong = new SessionMemoryClient({ baseUrl: BASE_URL, apiKey: "sm-wrong-key-0123456789abcdef0123456789" });
      const error = await wrong.listSessions().catch((e: unknown) => e);
      assert.ok(error instanceof AuthenticationError);
      assert.equal(error.status, 401);
      const none = new SessionMemoryClient({ baseUrl: BASE_URL });
      await assert.rejects(none.listSessions(), AuthenticationError);
    } else {
      // auth off (a local server with the defaults): no key needed
      const none = new SessionMemoryClient({ baseUrl: BASE_URL });
      assert.ok(Array.isArray((await none.listSessions({ limit: 1 })).items));
    }
    assert.equal((await sm.health()).status, "ok");
  });
});
