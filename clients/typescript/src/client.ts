/**
 * `SessionMemoryClient`: one method per API operation, over `fetch`.
 *
 * Bodies and queries use the service's wire names and the types generated from its OpenAPI
 * document; what is not part of the body (an `Idempotency-Key`, `If-Match`, `?create=true`, an
 * `AbortSignal`) goes in the last, options argument. Errors are thrown as `ProblemError`
 * subclasses (see `errors.ts`).
 *
 * Retries:
 * - reads (GET, `POST .../context`) and writes sent with an `Idempotency-Key` (every POST
 *   write gets one unless `autoIdempotency` is off) are retried on 503 and on a lost answer
 *   (connection refused or reset, timeout), with the same key, so a write whose answer was
 *   lost is applied exactly once;
 * - writes that take no key (PATCH, DELETE) are retried on 503 and when the connection could
 *   not be made (the request never reached the server);
 * - the wait is the server's `Retry-After` when it sent one (capped), else exponential backoff
 *   with jitter.
 */

import { ConnectionError, parseRetryAfter, problemError } from "./errors.js";
import type {
  Append,
  AppendResult,
  ClearResult,
  CompactionPage,
  CompactRequest,
  CompactResult,
  Context,
  ContextRequest,
  CursorQuery,
  EventPage,
  ForkRequest,
  Format,
  Health,
  HistoryPage,
  Item,
  ItemPage,
  ListItemsQuery,
  ListSessionsQuery,
  PageQuery,
  PopResult,
  RenderedItemPage,
  RestoreRequest,
  RestoreResult,
  SearchQuery,
  SearchResults,
  Session,
  SessionCreate,
  SessionPage,
  SessionUpdate,
  Snapshot,
  SnapshotDocument,
  SnapshotPage,
} from "./types.js";

export const VERSION = "0.1.0";
export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";

/** How often and how long to retry. `maxAttempts` counts the first try (1: no retries). */
export interface RetryPolicy {
  maxAttempts: number;
  /** First backoff, in milliseconds; doubled on each attempt. */
  backoffMs: number;
  /** Cap of any one wait (a `Retry-After` included), in milliseconds. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 4, backoffMs: 200, maxDelayMs: 5000 };

export interface ClientOptions {
  /** Default `http://127.0.0.1:8080`. */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer <apiKey>`; needed whenever the server's auth is on. */
  apiKey?: string | undefined;
  /** Per attempt, in milliseconds (default 30 000). */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Give every POST write an `Idempotency-Key` of its own (default true). */
  autoIdempotency?: boolean;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

/** Options of any call. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Options of a write that the server orders by the session's version. */
export interface VersionedOptions extends CallOptions {
  /** The session `version` the write expects (412 `PreconditionFailedError` otherwise). */
  ifMatch?: number | string;
}

/** Options of a POST write: it can be replayed safely with its `Idempotency-Key`. */
export interface WriteOptions extends VersionedOptions {
  /** Reused on every retry; generated when omitted (unless `autoIdempotency` is off). */
  idempotencyKey?: string;
}

export interface AppendOptions extends WriteOptions {
  /** Create the session if it does not exist. */
  create?: boolean;
}

type RetryClass = "safe" | "connect-only";
type QueryValue = string | number | boolean | null | undefined;

interface Call {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, QueryValue> | undefined;
  body?: unknown;
  headers?: Record<string, string>;
  retry: RetryClass;
  signal?: AbortSignal | undefined;
}

/** A path segment, percent-encoded (every character but letters, digits and `-._~`): ids may
 * hold `@`, spaces, `:`, `?`, `#`, `%`, `/`-free Unicode. */
export function seg(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export class SessionMemoryClient {
  readonly baseUrl: string;
  readonly retry: RetryPolicy;
  readonly autoIdempotency: boolean;
  readonly timeoutMs: number;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.autoIdempotency = options.autoIdempotency ?? true;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#headers = {
      accept: "application/json",
      "user-agent": `session-memory-client-js/${VERSION}`,
      ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
      ...options.headers,
    };
  }

  // --- sessions ------------------------------------------------------------------------------

  /** Create a session (`id` generated when omitted); `ConflictError` if it exists. */
  createSession(body: SessionCreate = {}, options: WriteOptions = {}): Promise<Session> {
    return this.#send({ method: "POST", path: "/v1/sessions", body, ...this.#write(options) });
  }

  /** Read a session; its `version` is what `ifMatch` expects. */
  getSession(sessionId: string, options: CallOptions = {}): Promise<Session> {
    return this.#send({ method: "GET", path: `/v1/sessions/${seg(sessionId)}`, retry: "safe", signal: options.signal });
  }

  /** A page of sessions by id (`prefix`, `limit`); pass `next_cursor` back as `cursor`. */
  listSessions(query: ListSessionsQuery = {}, options: CallOptions = {}): Promise<SessionPage> {
    return this.#send({ method: "GET", path: "/v1/sessions", query, retry: "safe", signal: options.signal });
  }

  /** Change only the fields given (`metadata`, `config`, `summary`); `null` clears one. */
  updateSession(sessionId: string, body: SessionUpdate, options: VersionedOptions = {}): Promise<Session> {
    return this.#send({
      method: "PATCH",
      path: `/v1/sessions/${seg(sessionId)}`,
      body,
      headers: ifMatchHeader(options.ifMatch),
      retry: "connect-only",
      signal: options.signal,
    });
  }

  /** Delete a session and everything it holds. */
  async deleteSession(sessionId: string, options: VersionedOptions = {}): Promise<void> {
    await this.#send({
      method: "DELETE",
      path: `/v1/sessions/${seg(sessionId)}`,
      headers: ifMatchHeader(options.ifMatch),
      retry: "connect-only",
      signal: options.signal,
    });
  }

  // --- items ---------------------------------------------------------------------------------

  /** Append a batch atomically: `{ format, items }` in `canonical` (the default),
   * `openai-chat`, `openai-responses`, `anthropic` (which also takes `system`) or `gemini`
   * (Gemini `contents`, which also takes `system_instruction`). Items are
   * stored exactly as sent. Retried with the same `Idempotency-Key`, so it lands once. */
  appendItems(sessionId: string, body: Append, options: AppendOptions = {}): Promise<AppendResult> {
    return this.#send({
      method: "POST",
      path: `/v1/sessions/${seg(sessionId)}/items`,
      query: options.create ? { create: true } : undefined,
      body,
      ...this.#write(options),
    });
  }

  /** Working memory, oldest first after `cursor` (the previous page's `next_cursor`), or the
   * newest `last` items. `after_seq` is the older name of `cursor` (the same seq), still
   * taken; `cursor` wins when both are sent. Without `format`: the stored items with their
   * envelope (`id`, `seq`, `tokens`, ...). With `format`: the items as that provider's items
   * or messages, exactly as written when they were written in it, else rendered in its
   * idiom (`notes` says what it cannot carry). */
  listItems(sessionId: string, query?: ListItemsQuery & { format?: undefined }, options?: CallOptions): Promise<ItemPage>;
  listItems(sessionId: string, query: ListItemsQuery & { format: Format }, options?: CallOptions): Promise<RenderedItemPage>;
  listItems(sessionId: string, query: ListItemsQuery = {}, options: CallOptions = {}): Promise<ItemPage | RenderedItemPage> {
    return this.#send({ method: "GET", path: `/v1/sessions/${seg(sessionId)}/items`, query, retry: "safe", signal: options.signal });
  }

  /** All of working memory, oldest first, one page at a time. */
  iterItems(sessionId: string, options?: { pageSize?: number; format?: undefined } & CallOptions): AsyncGenerator<Item>;
  iterItems(sessionId: string, options: { pageSize?: number; format: Format } & CallOptions): AsyncGenerator<Record<string, unknown>>;
  async *iterItems(
    sessionId: string,
    options: { pageSize?: number; format?: Format | undefined } & CallOptions = {},
  ): AsyncGenerator<Item | Record<string, unknown>> {
    let cursor: number | undefined;
    for (;;) {
      const query: ListItemsQuery = { limit: options.pageSize ?? 500, format: options.format };
      if (cursor !== undefined) query.cursor = cursor;
      const page: ItemPage | RenderedItemPage = await this.#send({
        method: "GET",
        path: `/v1/sessions/${seg(sessionId)}/items`,
        query,
        retry: "safe",
        signal: options.signal,
      });
      yield* page.items;
      if (page.next_cursor === null) return;
      cursor = page.next_cursor;
    }
  }

  /** One item of working memory, by its item id. */
  getItem(sessionId: string, itemId: string, options: CallOptions = {}): Promise<Item> {
    return this.#send({ method: "GET", path: `/v1/sessions/${seg(sessionId)}/items/${seg(itemId)}`, retry: "safe", signal: options.signal });
  }

  /** Remove and return the newest item (it stays in history); `ConflictError`
   * (`empty-working-memory`) when there is none. With `format`, `rendered` is the item in it. */
  popItem(sessionId: string, options: WriteOptions & { format?: Format } = {}): Promise<PopResult> {
    return this.#send({
      method: "POST",
      path: `/v1/sessions/${seg(sessionId)}/items/pop`,
      query: { format: options.format },
      ...this.#write(options),
    });
  }

  /** Empty working memory and the summary (the items stay in history). */
  clearItems(sessionId: string, options: VersionedOptions = {}): Promise<ClearResult> {
    return this.#send({
      method: "DELETE",
      path: `/v1/sessions/${seg(sessionId)}/items`,
      headers: ifMatchHeader(options.ifMatch),
      retry: "connect-only",
      signal: options.signal,
    });
  }

  // --- context and compaction ----------------------------------------------------------------

  /** The next-turn prompt in `format` (default `canonical`): `items`, `messages` (openai-chat),
   * `input` (openai-responses), `system` + `messages` (anthropic) or `system_instruction` +
   * `contents` (gemini), and its `report`. Budget
   * fields (`max_tokens`, `max_items`, `max_chars`, `tokenizer`, ...) override the session's
   * `config.context`; `null` lifts one. Never changes the session. */
  getContext(sessionId: string, request: ContextRequest = {}, options: CallOptions = {}): Promise<Context> {
    return this.#send({ method: "POST", path: `/v1/sessions/${seg(sessionId)}/context`, body: request, retry: "safe", signal: options.signal });
  }

  /** Compact working memory into a summary (`policy` `structured` by default server-side;
   * `window`, `llm`); the compacted items stay in history. */
  compact(sessionId: string, request: CompactRequest = {}, options: WriteOptions = {}): Promise<CompactResult> {
    return this.#send({ method: "POST", path: `/v1/sessions/${seg(sessionId)}/compact`, body: request, ...this.#write(options) });
  }

  /** Past compaction results, newest first. */
  listCompactions(sessionId: string, query: CursorQuery = {}, options: CallOptions = {}): Promise<CompactionPage> {
    return this.#send({ method: "GET", path: `/v1/sessions/${seg(sessionId)}/compactions`, query, retry: "safe", signal: options.signal });
  }

  // --- snapshots -----------------------------------------------------------------------------

  /** Freeze the session's state (optionally `label`led). */
  createSnapshot(sessionId: string, body: { label?: string | null } = {}, options: WriteOptions = {}): Promise<Snapshot> {
    return this.#send({ method: "POST", path: `/v1/sessions/${seg(sessionId)}/snapshots`, body, ...this.#write(options) });
  }

  /** Snapshots, newest first. */
  listSnapshots(sessionId: string, query: CursorQuery = {}, options: CallOptions = {}): Promise<SnapshotPage> {
    return this.#send({ method: "GET", path: `/v1/sessions/${seg(sessionId)}/snapshots`, query, retry: "safe", signal: options.signal });
  }

  /** A snapshot as one JSON document, restorable here or on another server. */
  exportSnapshot(sessionId: string, snapshotId: string, options: CallOptions = {}): Promise<SnapshotDocument> {
    return this.#send({
      method: "GET",
      path: `/v1/sessions/${seg(sessionId)}/snapshots/${seg(snapshotId)}`,
      retry: "safe",
      signal: options.signal,
    });
  }

  async deleteSnapshot(sessionId: string, snapshotId: string, options: CallOptions = {}): Promise<void> {
    await this.#send({
      method: "DELETE",
      path: `/v1/sessions/${seg(sessionId)}/snapshots/${seg(snapshotId)}`,
      retry: "connect-only",
      signal: options.signal,
    });
  }

  /** Restore `{ snapshot_id }` or an exported `{ snapshot }` document; the answer's
   * `undo_snapshot_id` names the snapshot taken just before, which undoes it. */
  restore(sessionId: string, request: RestoreRequest, options: WriteOptions = {}): Promise<RestoreResult> {
    return this.#send({ method: "POST", path: `/v1/sessions/${seg(sessionId)}/restore`, body: request, ...this.#write(options) });
  }

  /** A new session from this one's current state, or from one of its snapshots. */
  fork(sessionId: string, request: ForkRequest = {}, options: WriteOptions = {}): Promise<Session> {
    return this.#send({ method: "POST", path: `/v1/sessions/${seg(sessionId)}/fork`, body: request, ...this.#write(options) });
  }

  // --- history, events, search ---------------------------------------------------------------

  /** The operation log, oldest first; pass `next_cursor` back as `cursor` (`after_seq`: its
   * older name, as in `listItems`). */
  listEvents(sessionId: string, query: PageQuery = {}, options: CallOptions = {}): Promise<EventPage> {
    return this.#send({ method: "GET", path: `/v1/sessions/${seg(sessionId)}/events`, query, retry: "safe", signal: options.signal });
  }

  /** Every item ever appended (compacted, popped and cleared ones too), oldest first; pass
   * `next_cursor` back as `cursor` (`after_seq`: its older name, as in `listItems`). */
  listHistory(sessionId: string, query: PageQuery = {}, options: CallOptions = {}): Promise<HistoryPage> {
    return this.#send({ method: "GET", path: `/v1/sessions/${seg(sessionId)}/history`, query, retry: "safe", signal: options.signal });
  }

  /** Search one session (`sessionId`), or every session the key sees. `mode`: `hybrid` (the
   * server's default: meaning and words fused), `fulltext` or `semantic`; each hit carries
   * `scores.fulltext` and `scores.semantic`. `scope: "history"` includes archived items. */
  search(query: SearchQuery, options: CallOptions & { sessionId?: string } = {}): Promise<SearchResults> {
    const path = options.sessionId === undefined ? "/v1/search" : `/v1/sessions/${seg(options.sessionId)}/search`;
    return this.#send({ method: "GET", path, query, retry: "safe", signal: options.signal });
  }

  /** `GET /healthz`. */
  health(options: CallOptions = {}): Promise<Health> {
    return this.#send({ method: "GET", path: "/healthz", retry: "safe", signal: options.signal });
  }

  // --- transport -----------------------------------------------------------------------------

  #write(options: WriteOptions): Pick<Call, "headers" | "retry" | "signal"> {
    const key = options.idempotencyKey ?? (this.autoIdempotency ? `smc-${crypto.randomUUID()}` : undefined);
    return {
      headers: { ...ifMatchHeader(options.ifMatch), ...(key === undefined ? {} : { "idempotency-key": key }) },
      retry: key === undefined ? "connect-only" : "safe",
      signal: options.signal,
    };
  }

  async #send<T>(call: Call): Promise<T> {
    const url = this.baseUrl + call.path + queryString(call.query);
    const headers: Record<string, string> = { ...this.#headers, ...call.headers };
    let body: string | undefined;
    if (call.body !== undefined) {
      body = JSON.stringify(call.body);
      headers["content-type"] = "application/json";
    }
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= this.retry.maxAttempts;
      let status: number;
      let text: string;
      let response: Response;
      const timeout = AbortSignal.timeout(this.timeoutMs);
      const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
      try {
        // the body is read inside the try: a connection lost mid-answer is a lost answer too
        response = await this.#fetch(url, { method: call.method, headers, body, signal });
        status = response.status;
        text = await response.text();
      } catch (error) {
        if (call.signal?.aborted) throw call.signal.reason ?? error;
        const reachable = neverReachedServer(error);
        if (last || !(reachable || call.retry === "safe")) {
          throw new ConnectionError(`${call.method} ${call.path}: ${describe(error)}`, { cause: error });
        }
        await sleep(this.#delay(attempt, undefined), call.signal);
        continue;
      }
      if (status === 503 && !last) {
        await sleep(this.#delay(attempt, parseRetryAfter(response.headers.get("retry-after"))), call.signal);
        continue;
      }
      if (status >= 400) throw problemError(status, response.statusText, response.headers, text);
      return (status === 204 || text === "" ? undefined : JSON.parse(text)) as T;
    }
  }

  #delay(attempt: number, retryAfterSeconds: number | undefined): number {
    if (retryAfterSeconds !== undefined) {
      return Math.max(0, Math.min(retryAfterSeconds * 1000, this.retry.maxDelayMs));
    }
    const base = this.retry.backoffMs * 2 ** (attempt - 1);
    return Math.min(this.retry.maxDelayMs, base * (0.5 + Math.random() / 2));
  }
}

function ifMatchHeader(ifMatch: number | string | undefined): Record<string, string> {
  if (ifMatch === undefined) return {};
  return { "if-match": typeof ifMatch === "number" ? `"${ifMatch}"` : ifMatch };
}

function queryString(query: Record<string, QueryValue> | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null) continue;
    params.append(key, typeof value === "boolean" ? (value ? "true" : "false") : String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

// Codes of a connection that was never made: the request cannot have reached the server.
const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function neverReachedServer(error: unknown): boolean {
  const codes: string[] = [];
  const collect = (value: unknown, depth: number): void => {
    if (typeof value !== "object" || value === null || depth > 4) return;
    const record = value as { code?: unknown; cause?: unknown; errors?: unknown };
    if (typeof record.code === "string") codes.push(record.code);
    if (Array.isArray(record.errors)) record.errors.forEach((e) => collect(e, depth + 1));
    collect(record.cause, depth + 1);
  };
  collect(error, 0);
  return codes.length > 0 && codes.every((code) => CONNECT_CODES.has(code));
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${(error.cause as Error & { code?: string }).code ?? error.cause.message}` : "";
  return `${error.message}${cause}`;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
