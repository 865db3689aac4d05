/**
 * An OpenAI Agents SDK (JavaScript) session whose items live in the Session Memory Service:
 * `run(agent, input, { session: new ServiceSession(client, "user-42") })`.
 *
 * `ServiceSession` implements the SDK's `Session` interface with the semantics of its own
 * `MemorySession` (given the same calls, both return the same items):
 *
 * - `addItems(items)`: one atomic append (`openai-responses` format, the session created on
 *   first use), retried with the same `Idempotency-Key`, so a retried batch lands once;
 * - `getItems(limit?)`: the items exactly as added, oldest first; the newest `limit` of them
 *   with a limit (`[]` for `limit <= 0`);
 * - `popItem()`: removes the newest item and returns it exactly as added (`undefined` if none);
 * - `clearSession()`: removes every item.
 *
 * A session that does not exist yet reads as empty. What the service adds: popped and cleared
 * items stay in its history; `getPrompt()` is the budgeted next-turn prompt (the session's
 * `config.context` budget or `context` overrides, after a compaction its summary first as a
 * `system` message); `history: "prompt"` makes `getItems()` without a limit return that prompt,
 * so the runner sends it to the model.
 *
 * Items are mapped between the SDK's shapes and the Responses API's (see `agentsItems.ts`), so
 * the service can budget, compact, search and render them. Nothing from the SDK is imported at
 * run time: only its types.
 */

import type { AgentInputItem, Session } from "@openai/agents";

import type { SessionMemoryClient } from "./client.js";
import { ConflictError, NotFoundError } from "./errors.js";
import type { Budget } from "./types.js";
import { fromServiceItem, toServiceItem, type JsonRecord } from "./agentsItems.js";

export { fromServiceItem, toServiceItem } from "./agentsItems.js";

const FORMAT = "openai-responses";
const PAGE = 1000; // the most items one GET .../items returns

export interface ServiceSessionOptions {
  /** What `getItems()` without a limit returns: every item as added (`"exact"`, the default)
   * or the budgeted prompt of `getPrompt()` (`"prompt"`). */
  history?: "exact" | "prompt";
  /** Budget overrides for `getPrompt()` (`max_tokens`, `max_items`, ...). */
  context?: Budget;
}

export class ServiceSession implements Session {
  readonly client: SessionMemoryClient;
  readonly sessionId: string;
  readonly history: "exact" | "prompt";
  readonly context: Budget;

  constructor(client: SessionMemoryClient, sessionId: string, options: ServiceSessionOptions = {}) {
    const history = options.history ?? "exact";
    if (history !== "exact" && history !== "prompt") {
      throw new TypeError(`history must be "exact" or "prompt", not ${JSON.stringify(history)}`);
    }
    this.client = client;
    this.sessionId = sessionId;
    this.history = history;
    this.context = { ...options.context };
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The items as added, oldest first: all of them, or the newest `limit`. With
   * `history: "prompt"` and no limit, the budgeted prompt of `getPrompt()`. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit === undefined && this.history === "prompt") return this.getPrompt();
    if (limit !== undefined && limit <= 0) return [];
    try {
      if (limit !== undefined && limit <= PAGE) {
        const page = await this.client.listItems(this.sessionId, { last: limit, format: FORMAT });
        return page.items.map((item) => fromServiceItem(item) as AgentInputItem);
      }
      const items: AgentInputItem[] = [];
      for await (const item of this.client.iterItems(this.sessionId, { pageSize: PAGE, format: FORMAT })) {
        items.push(fromServiceItem(item) as AgentInputItem);
      }
      return limit === undefined ? items : items.slice(-limit);
    } catch (error) {
      if (error instanceof NotFoundError) return [];
      throw error;
    }
  }

  /** The next-turn prompt as SDK items (`POST .../context`): the session's budget, overridden
   * by `context` and then by `budget`; after a compaction the summary first, as a `system`
   * message. `[]` for a session that does not exist. */
  async getPrompt(budget: Budget = {}): Promise<AgentInputItem[]> {
    try {
      const context = await this.client.getContext(this.sessionId, { ...this.context, ...budget, format: FORMAT });
      return (context.input ?? []).map((item) => fromServiceItem(item) as AgentInputItem);
    } catch (error) {
      if (error instanceof NotFoundError) return [];
      throw error;
    }
  }

  /** Append the items atomically, creating the session on first use. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) return;
    const batch = items.map((item) => toServiceItem(JSON.parse(JSON.stringify(item)) as JsonRecord));
    await this.client.appendItems(
      this.sessionId,
      { format: FORMAT, items: batch as never },
      { create: true, idempotencyKey: `smc-${crypto.randomUUID()}` }, // even if auto keys are off
    );
  }

  /** Remove the newest item and return it as it was added; `undefined` when there is none.
   * (An item written in another format that Responses input cannot carry is removed and
   * `undefined` returned.) */
  async popItem(): Promise<AgentInputItem | undefined> {
    try {
      const popped = await this.client.popItem(this.sessionId, { format: FORMAT });
      return popped.rendered ? (fromServiceItem(popped.rendered) as AgentInputItem) : undefined;
    } catch (error) {
      if (error instanceof NotFoundError) return undefined;
      if (error instanceof ConflictError && error.code === "empty-working-memory") return undefined;
      throw error;
    }
  }

  /** Remove every item (the service's history keeps them). */
  async clearSession(): Promise<void> {
    try {
      await this.client.clearItems(this.sessionId);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
    }
  }
}
