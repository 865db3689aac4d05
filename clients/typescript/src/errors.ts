/**
 * What the client throws.
 *
 * - `SessionMemoryError`: the base of everything thrown on purpose.
 *   - `ProblemError`: the service answered with an error status. It carries the RFC 9457
 *     problem document (`type`, `title`, `status`, `detail`, `errors` on a 422); the status
 *     picks a subclass (`NotFoundError`, `ConflictError`, ...), so callers can use
 *     `instanceof` instead of comparing numbers, or `code` (`session-not-found`, ...).
 *   - `ConnectionError`: no answer at all (connection refused or reset, timeout) after the
 *     retries; `cause` is the underlying error.
 */

import type { Problem } from "./types.js";

export const PROBLEM_BASE = "https://session-memory.dev/problems/";

export class SessionMemoryError extends Error {
  override name = "SessionMemoryError";
}

export class ProblemError extends SessionMemoryError {
  override name = "ProblemError";
  /** The problem document (a synthetic one, `type` `about:blank`, if the body was not one). */
  readonly problem: Problem;
  /** The HTTP status. */
  readonly status: number;
  /** The response's headers (`retry-after`, `x-request-id`, ...). */
  readonly headers: Headers;

  constructor(problem: Problem, status: number, headers: Headers = new Headers()) {
    super(`${status} ${problem.title ?? ""}: ${problem.detail ?? ""}`);
    this.problem = problem;
    this.status = status;
    this.headers = headers;
  }

  /** The problem `type` URI, stable per kind of error. */
  get type(): string {
    return this.problem.type ?? "about:blank";
  }

  /** The last segment of `type` (`session-not-found`, `version-mismatch`, ...). */
  get code(): string {
    return this.type.startsWith(PROBLEM_BASE) ? this.type.slice(PROBLEM_BASE.length) : this.type;
  }

  get title(): string {
    return this.problem.title ?? "";
  }

  get detail(): string {
    return this.problem.detail ?? "";
  }

  /** Field-level errors of a 422 (`loc`, `msg`, `type`); empty otherwise. */
  get errors(): NonNullable<Problem["errors"]> {
    return this.problem.errors ?? [];
  }

  /** Seconds the service asked to wait (503), if it said. */
  get retryAfter(): number | undefined {
    return parseRetryAfter(this.headers.get("retry-after"));
  }
}

/** 400: a malformed header. */
export class BadRequestError extends ProblemError {
  override name = "BadRequestError";
}
/** 401: missing, unknown or revoked API key. */
export class AuthenticationError extends ProblemError {
  override name = "AuthenticationError";
}
/** 403: the key lacks the scope, or the session is outside its prefix. */
export class PermissionDeniedError extends ProblemError {
  override name = "PermissionDeniedError";
}
/** 404: no such session, item or snapshot (or not visible to this key). */
export class NotFoundError extends ProblemError {
  override name = "NotFoundError";
}
/** 409: the session exists, an item id is taken, working memory is empty (pop), ... */
export class ConflictError extends ProblemError {
  override name = "ConflictError";
}
/** 412: `ifMatch` did not match the session's version. */
export class PreconditionFailedError extends ProblemError {
  override name = "PreconditionFailedError";
}
/** 413: body, batch, item or metadata too large. */
export class PayloadTooLargeError extends ProblemError {
  override name = "PayloadTooLargeError";
}
/** 422: invalid input (see `errors`), or an `Idempotency-Key` reused with another body. */
export class InvalidInputError extends ProblemError {
  override name = "InvalidInputError";
}
/** 502: the model used by an `llm` compaction failed. */
export class UpstreamError extends ProblemError {
  override name = "UpstreamError";
}
/** 503: session busy or a backend unavailable; retried before it is thrown. */
export class UnavailableError extends ProblemError {
  override name = "UnavailableError";
}

/** No answer from the service (after the retries); `cause` says why. */
export class ConnectionError extends SessionMemoryError {
  override name = "ConnectionError";
  constructor(message: string, options: { cause: unknown }) {
    super(message, options);
  }
}

const BY_STATUS: Record<number, typeof ProblemError> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  412: PreconditionFailedError,
  413: PayloadTooLargeError,
  422: InvalidInputError,
  502: UpstreamError,
  503: UnavailableError,
};

/** The typed error for an error answer, from its status, headers and body text. */
export function problemError(status: number, statusText: string, headers: Headers, body: string): ProblemError {
  let parsed: unknown;
  try {
    parsed = body ? JSON.parse(body) : undefined;
  } catch {
    parsed = undefined;
  }
  const problem: Problem =
    isObject(parsed) && typeof parsed["type"] === "string"
      ? (parsed as Problem)
      : { type: "about:blank", title: statusText, status, detail: body.slice(0, 500) };
  const Class = BY_STATUS[status] ?? ProblemError;
  return new Class(problem, status, headers);
}

export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const seconds = Number(value);
  return Number.isFinite(seconds) ? seconds : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
