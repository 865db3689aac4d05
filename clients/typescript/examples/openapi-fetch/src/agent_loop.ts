// One agent loop through a client generated from openapi/openapi.json (openapi-typescript types
// + openapi-fetch): create a session, append a user message, append an assistant tool call and
// its output in openai-chat format, read the context, compact, snapshot, restore.
//
// Usage: node build/src/agent_loop.js <base-url> <api-key> <session-id>
// Prints one JSON object with what it observed; tests/clients/test_generated_clients.py checks it.
// `generated/schema.d.ts` is produced by openapi-typescript at test time (never committed); the
// npm packages are clients/typescript's (openapi-fetch, openapi-typescript, typescript).

import createClient from "openapi-fetch";
import type { components, paths } from "../generated/schema.js";

type Problem = components["schemas"]["Problem"];
type Session = components["schemas"]["SessionRead"];

const [baseUrl, apiKey, sessionId] = process.argv.slice(2);
if (!baseUrl || !apiKey || !sessionId) {
  throw new Error("usage: agent_loop <base-url> <api-key> <session-id>");
}

const client = createClient<paths>({
  baseUrl,
  headers: { Authorization: `Bearer ${apiKey}` },
});

function must<T>(
  step: string,
  result: { data?: T; error?: Problem | unknown; response: Response },
): T {
  if (result.data === undefined) {
    throw new Error(`${step}: HTTP ${result.response.status} ${JSON.stringify(result.error)}`);
  }
  return result.data;
}

// openapi-fetch percent-encodes path parameters (encodeURIComponent): the id may hold spaces,
// "@", ":" or any non-ASCII character. Idempotency keys are visible ASCII, so they are built
// from the encoded form.
const path = { session_id: sessionId };
const idempotencyBase = encodeURIComponent(sessionId);

async function main(): Promise<void> {
  const created: Session = must(
    "createSession",
    await client.POST("/v1/sessions", {
      body: { id: sessionId, metadata: { agent: "typescript" } },
      params: { header: { "idempotency-key": `${idempotencyBase}-create` } },
    }),
  );

  const read: Session = must(
    "getSession",
    await client.GET("/v1/sessions/{session_id}", { params: { path } }),
  );

  must(
    "append user message",
    await client.POST("/v1/sessions/{session_id}/items", {
      params: { path },
      body: {
        format: "openai-chat",
        items: [{ role: "user", content: "What is the weather in Paris?" }],
      },
    }),
  );

  const toolTurn = must(
    "append tool call and output",
    await client.POST("/v1/sessions/{session_id}/items", {
      params: { path, header: { "idempotency-key": `${idempotencyBase}-turn-1` } },
      body: {
        format: "openai-chat",
        items: [
          {
            role: "assistant",
            content: null,
            tool_calls: [
              {
                id: "call_1",
                type: "function",
                function: { name: "get_weather", arguments: '{"city": "Paris"}' },
              },
            ],
          },
          { role: "tool", tool_call_id: "call_1", content: "sunny, 21C" },
        ],
      },
    }),
  );

  must(
    "append answer and next question",
    await client.POST("/v1/sessions/{session_id}/items", {
      params: { path },
      body: {
        format: "openai-chat",
        items: [
          { role: "assistant", content: "It is sunny in Paris, 21C." },
          { role: "user", content: "And tomorrow?" },
        ],
      },
    }),
  );

  const context = must(
    "read context",
    await client.POST("/v1/sessions/{session_id}/context", {
      params: { path },
      body: { format: "openai-chat", max_tokens: 4000 },
    }),
  );

  const compacted = must(
    "compact",
    await client.POST("/v1/sessions/{session_id}/compact", {
      params: { path },
      body: { policy: "structured", keep_last_items: 1 },
    }),
  );

  const snapshot = must(
    "snapshot",
    await client.POST("/v1/sessions/{session_id}/snapshots", {
      params: { path },
      body: { label: "after compaction" },
    }),
  );

  must(
    "append after the snapshot",
    await client.POST("/v1/sessions/{session_id}/items", {
      params: { path },
      body: { format: "canonical", items: [{ type: "message", role: "user", content: "oops" }] },
    }),
  );

  const restored = must(
    "restore",
    await client.POST("/v1/sessions/{session_id}/restore", {
      params: { path },
      body: { snapshot_id: snapshot.id },
    }),
  );

  const missing = await client.GET("/v1/sessions/{session_id}", {
    params: { path: { session_id: `${sessionId}-missing` } },
  });
  const problem = missing.error as Problem | undefined;

  const after = must("read context again", await client.GET("/v1/sessions/{session_id}/context", {
    params: { path, query: { format: "openai-chat" } },
  }));

  console.log(
    JSON.stringify({
      created_version: created.version,
      created_id: created.id,
      read_id: read.id,
      tool_turn_types: toolTurn.items.map((item) => item.type),
      context_messages: context.messages ?? [],
      context_tokens: context.report.projected_tokens,
      compacted_items: compacted.compacted_items,
      summary: compacted.summary ?? null,
      snapshot_items: snapshot.item_count,
      restored_items: restored.restored_items,
      undo_snapshot_id: restored.undo_snapshot_id,
      restored_session_items: restored.session.item_count,
      missing_status: missing.response.status,
      missing_type: problem?.type ?? null,
      final_messages: after.messages ?? [],
    }),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
