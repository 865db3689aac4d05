/**
 * Memory for Vercel AI SDK apps (the `ai` package): an app's `ModelMessage[]` saved to and
 * loaded from the Session Memory Service exactly, and the budgeted next-turn prompt as
 * `ModelMessage[]`, ready for `generateText` / `streamText`.
 *
 * ```ts
 * const history = new ServiceMessageHistory(sm, "chat-42", { context: { max_tokens: 8000 } });
 * const messages = [...(await history.prompt()), { role: "user", content: "And tomorrow?" }];
 * const result = await generateText({ model, messages, tools });
 * await history.save([messages.at(-1)!, ...result.responseMessages]);
 * ```
 *
 * - `save(messages)`: one atomic append (the session is created on first use), retried with
 *   the same `Idempotency-Key`, so a retried save lands once;
 * - `load()`: every message saved, oldest first, deep-equal to what was saved;
 * - `prompt(budget?)`: the projection (`POST .../context`): the session's `config.context`
 *   budget, overridden by `context` and then by `budget`; after a compaction its summary
 *   first, as a system message;
 * - `clear()`: removes every message (the service's history keeps them).
 *
 * The messages are stored as `openai-responses` items, each with an `ai_sdk` field holding
 * what the Responses shape does not (see `aiMessages.ts`). Nothing from `ai` is imported at
 * run time: only its types.
 */

import type { ModelMessage } from "ai";

import type { SessionMemoryClient } from "./client.js";
import { NotFoundError } from "./errors.js";
import type { Budget } from "./types.js";
import { AI_PART_TYPE, fromServiceItems as fromItems, toServiceItems as toItems, type AiMessage } from "./aiMessages.js";
import type { JsonRecord } from "./agentsItems.js";

export { AI_FIELD, AI_PART_TYPE, decode, encode } from "./aiMessages.js";

const FORMAT = "openai-responses";
const PAGE = 1000; // the most items one GET .../items returns

/** A part of any message's content. */
export type ModelMessagePart = Exclude<ModelMessage["content"], string>[number];
/** A tool result's `output`. */
export type ToolResultOutput = Extract<ModelMessagePart, { type: "tool-result" }>["output"];
/** A part of a `content` tool output. */
export type ToolResultContentPart = Extract<ToolResultOutput, { type: "content" }>["value"][number];

/** The Responses item each part type is stored as (a run of text, image and file parts is
 * one `message` item). Typed over the installed `ai`'s part union: a part type a newer SDK
 * adds does not compile here until it is given its place. */
export const STORED_AS: { readonly [K in ModelMessagePart["type"]]: string } = {
  text: "message",
  image: "message",
  file: "message",
  reasoning: "reasoning",
  "tool-call": "function_call",
  "tool-result": "function_call_output",
  "tool-approval-request": AI_PART_TYPE,
  "tool-approval-response": AI_PART_TYPE,
  custom: AI_PART_TYPE,
  "reasoning-file": AI_PART_TYPE,
};

/** What a `function_call_output`'s `output` holds for each tool output type. */
export const OUTPUT_STORED_AS: { readonly [K in ToolResultOutput["type"]]: "text" | "JSON text" | "parts" } = {
  text: "text",
  "error-text": "text",
  json: "JSON text",
  "error-json": "JSON text",
  "execution-denied": "text",
  content: "parts",
};

/** The Responses part each part of a `content` tool output is stored as (an image media
 * type makes a file an `input_image`). */
export const OUTPUT_PART_STORED_AS: { readonly [K in ToolResultContentPart["type"]]: string } = {
  text: "input_text",
  file: "input_file",
  "file-data": "input_file",
  "file-url": "input_file",
  "file-id": "input_file",
  "file-reference": "input_file",
  "image-data": "input_image",
  "image-url": "input_image",
  "image-file-id": "input_image",
  "image-file-reference": "input_image",
  custom: "input_text",
};

/** The Responses items (`openai-responses` format) for `messages`, each with its `ai_sdk`
 * field; `fromServiceItems` gives back messages deep-equal to `messages`. Throws `TypeError`
 * for a value no JSON can carry (a function, a class instance other than bytes, `URL` and
 * `Date`). */
export function toServiceItems(messages: readonly ModelMessage[]): JsonRecord[] {
  return toItems(messages as readonly AiMessage[]);
}

/** `ModelMessage`s from Responses items: exactly the messages `toServiceItems` made them
 * from; items other clients wrote, or the projection changed, by their payload. */
export function fromServiceItems(items: readonly JsonRecord[]): ModelMessage[] {
  return fromItems(items) as unknown as ModelMessage[];
}

export interface ServiceMessageHistoryOptions {
  /** Budget overrides for `prompt()` (`max_tokens`, `max_items`, `max_recent_tool_results`, ...). */
  context?: Budget;
}

/** An `ai` app's conversation (`ModelMessage[]`) kept in one session of the service. */
export class ServiceMessageHistory {
  readonly client: SessionMemoryClient;
  readonly sessionId: string;
  readonly context: Budget;

  constructor(client: SessionMemoryClient, sessionId: string, options: ServiceMessageHistoryOptions = {}) {
    this.client = client;
    this.sessionId = sessionId;
    this.context = { ...options.context };
  }

  /** Every message saved, oldest first, exactly as saved (`[]` for a session that does not
   * exist yet). */
  async load(): Promise<ModelMessage[]> {
    const items: JsonRecord[] = [];
    try {
      for await (const item of this.client.iterItems(this.sessionId, { pageSize: PAGE, format: FORMAT })) {
        items.push(item as JsonRecord);
      }
    } catch (error) {
      if (error instanceof NotFoundError) return [];
      throw error;
    }
    return fromServiceItems(items);
  }

  /** Append `messages` atomically, creating the session on first use. */
  async save(messages: readonly ModelMessage[]): Promise<void> {
    if (messages.length === 0) return;
    await this.client.appendItems(
      this.sessionId,
      { format: FORMAT, items: toServiceItems(messages) as never },
      { create: true, idempotencyKey: `smc-${crypto.randomUUID()}` }, // even if auto keys are off
    );
  }

  /** The next-turn prompt as `ModelMessage[]`: what the service's projection keeps within the
   * budget (the session's, overridden by `context`, then by `budget`), after a compaction
   * its summary first, as a system message. `[]` for a session that does not exist. */
  async prompt(budget: Budget = {}): Promise<ModelMessage[]> {
    try {
      const context = await this.client.getContext(this.sessionId, { ...this.context, ...budget, format: FORMAT });
      return fromServiceItems((context.input ?? []) as JsonRecord[]);
    } catch (error) {
      if (error instanceof NotFoundError) return [];
      throw error;
    }
  }

  /** Remove every message (the service's history keeps them). */
  async clear(): Promise<void> {
    try {
      await this.client.clearItems(this.sessionId);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
    }
  }
}
