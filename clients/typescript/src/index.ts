/**
 * The Session Memory Service client for TypeScript and JavaScript (ESM, Node 20.3+ or any
 * runtime with `fetch`).
 *
 * ```ts
 * import { SessionMemoryClient } from "session-memory-client";
 * const sm = new SessionMemoryClient({ baseUrl: "http://127.0.0.1:8080" });
 * ```
 *
 * The OpenAI Agents SDK session is in `session-memory-client/agents`, the Vercel AI SDK message
 * history in `session-memory-client/ai`; the raw generated types
 * of the whole API (`paths`, `components`, `operations`) in `session-memory-client/openapi`.
 */

export {
  DEFAULT_BASE_URL,
  DEFAULT_RETRY,
  SessionMemoryClient,
  VERSION,
  seg,
  type AppendOptions,
  type CallOptions,
  type ClientOptions,
  type RetryPolicy,
  type VersionedOptions,
  type WriteOptions,
} from "./client.js";
export * from "./errors.js";
export type * from "./types.js";
