// Retries, at the network level: an HTTP proxy in front of the live server drops connections
// after the server has answered (a lost answer) or answers 503 itself.

import assert from "node:assert/strict";
import { test } from "node:test";

import { ConnectionError, SessionMemoryClient, UnavailableError } from "session-memory-client";
import { API_KEY, Proxy, client, newId, type Decide } from "./helpers.js";

const FAST = { maxAttempts: 3, backoffMs: 10, maxDelayMs: 50 };
const sm = client();

async function through(decide: Decide, body: (proxied: SessionMemoryClient, proxy: Proxy) => Promise<void>): Promise<void> {
  const proxy = await new Proxy(decide).start();
  try {
    await body(new SessionMemoryClient({ baseUrl: proxy.url, apiKey: API_KEY, retry: FAST }), proxy);
  } finally {
    await proxy.stop();
  }
}

const firstMatching = (method: string, suffix: string, action: "lose" | "503"): Decide => {
  let done = false;
  return (req) => {
    if (!done && req.method === method && req.path.split("?")[0]!.endsWith(suffix)) {
      done = true;
      return action;
    }
    return "forward";
  };
};

test("a lost append answer is retried with the same Idempotency-Key and applied once", async () => {
  const id = newId("lost");
  await sm.createSession({ id });
  await through(firstMatching("POST", "/items", "lose"), async (proxied, proxy) => {
    const result = await proxied.appendItems(id, { items: [{ type: "message", role: "user", content: "once" }] });
    assert.equal(result.version, 2);
    const appends = proxy.seen.filter((s) => s.path.endsWith("/items"));
    assert.deepEqual(appends.map((s) => s.action), ["lose", "forward"]);
    assert.ok(appends[0]!.idempotencyKey?.startsWith("smc-"));
    assert.equal(appends[1]!.idempotencyKey, appends[0]!.idempotencyKey);
    assert.deepEqual(appends.map((s) => s.replayed), [undefined, "true"]); // the server replayed it
  });
  assert.equal((await sm.getSession(id)).item_count, 1);
});

test("a lost pop answer is retried with the same key: one item is popped", async () => {
  const id = newId("pop");
  await sm.appendItems(id, { items: [1, 2, 3].map((n) => ({ type: "message" as const, role: "user" as const, content: `m${n}` })) }, { create: true });
  await through(firstMatching("POST", "/items/pop", "lose"), async (proxied, proxy) => {
    const popped = await proxied.popItem(id, { format: "openai-chat" });
    assert.deepEqual(popped.rendered, { role: "user", content: "m3" });
    assert.equal(proxy.seen.filter((s) => s.path.includes("/pop")).length, 2);
  });
  assert.equal((await sm.getSession(id)).item_count, 2);
});

test("a read whose answer is lost is retried", async () => {
  const id = newId("read");
  await sm.createSession({ id });
  await through(firstMatching("POST", "/context", "lose"), async (proxied, proxy) => {
    const context = await proxied.getContext(id, { format: "anthropic" });
    assert.equal(context.version, 1);
    assert.equal(proxy.seen.length, 2);
  });
});

test("a write without a key (PATCH) is not replayed after a lost answer", async () => {
  const id = newId("patch");
  await sm.createSession({ id });
  await through(firstMatching("PATCH", `/${id}`, "lose"), async (proxied, proxy) => {
    const error = await proxied.updateSession(id, { summary: "s" }).catch((e: unknown) => e);
    assert.ok(error instanceof ConnectionError, String(error));
    assert.ok(error.cause instanceof Error);
    assert.equal(proxy.seen.length, 1); // sent once: it may have been applied
  });
  assert.equal((await sm.getSession(id)).summary, "s"); // it was
});

test("with auto keys off, a POST write is not replayed after a lost answer", async () => {
  const id = newId("nokey");
  await sm.createSession({ id });
  const proxy = await new Proxy(firstMatching("POST", "/items", "lose")).start();
  try {
    const proxied = new SessionMemoryClient({ baseUrl: proxy.url, apiKey: API_KEY, retry: FAST, autoIdempotency: false });
    await assert.rejects(proxied.appendItems(id, { items: [{ type: "message", role: "user", content: "x" }] }), ConnectionError);
    assert.equal(proxy.seen.length, 1);
    assert.equal(proxy.seen[0]!.idempotencyKey, undefined);
  } finally {
    await proxy.stop();
  }
});

test("503 is retried with the same key; when it lasts, UnavailableError carries Retry-After", async () => {
  const id = newId("busy");
  await sm.createSession({ id });
  await through(firstMatching("POST", "/items", "503"), async (proxied, proxy) => {
    const result = await proxied.appendItems(id, { items: [{ type: "message", role: "user", content: "hi" }] });
    assert.equal(result.version, 2);
    assert.deepEqual(proxy.seen.map((s) => s.action), ["503", "forward"]);
    assert.equal(proxy.seen[0]!.idempotencyKey, proxy.seen[1]!.idempotencyKey);
  });
  await through(() => "503", async (proxied, proxy) => {
    const error = await proxied.deleteSession(id).catch((e: unknown) => e);
    assert.ok(error instanceof UnavailableError);
    assert.equal(error.status, 503);
    assert.equal(error.retryAfter, 0);
    assert.equal(proxy.seen.length, FAST.maxAttempts);
  });
  assert.equal((await sm.getSession(id)).item_count, 1);
});

test("a refused connection is retried, even for a write without a key", async () => {
  const id = newId("refused");
  await sm.createSession({ id });
  // reserve a free port, then close it: nothing listens there until the proxy starts
  const probe = await new Proxy(() => "forward").start();
  const port = Number(new URL(probe.url).port);
  await probe.stop();
  const proxied = new SessionMemoryClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: API_KEY, retry: { maxAttempts: 8, backoffMs: 100, maxDelayMs: 400 } });
  const late = new Proxy(() => "forward", port);
  const started = new Promise<void>((resolve) => setTimeout(() => void late.start().then(() => resolve()), 250));
  try {
    const deleted = proxied.deleteSession(id);
    await deleted;
    await started;
    assert.equal(late.seen.length, 1);
    assert.equal(late.seen[0]!.method, "DELETE");
  } finally {
    await started;
    await late.stop();
  }
  await assert.rejects(sm.getSession(id), (e: unknown) => (e as { status?: number }).status === 404);

  const nowhere = new SessionMemoryClient({ baseUrl: `http://127.0.0.1:${port}`, retry: FAST });
  const error = await nowhere.getSession(id).catch((e: unknown) => e);
  assert.ok(error instanceof ConnectionError);
  assert.match(error.message, /ECONNREFUSED/);
});

test("a timeout is a lost answer: reads are retried, a PATCH is not", async () => {
  const id = newId("slow");
  await sm.createSession({ id });
  const proxy = await new Proxy(() => "hang").start();
  try {
    const impatient = new SessionMemoryClient({ baseUrl: proxy.url, apiKey: API_KEY, timeoutMs: 150, retry: { maxAttempts: 2, backoffMs: 10 } });
    const read = await impatient.getSession(id).catch((e: unknown) => e);
    assert.ok(read instanceof ConnectionError);
    assert.equal((read.cause as Error).name, "TimeoutError");
    assert.equal(proxy.seen.length, 2);
    await assert.rejects(impatient.updateSession(id, { summary: "x" }), ConnectionError);
    assert.equal(proxy.seen.length, 3); // sent once
  } finally {
    await proxy.stop();
  }
});

test("a caller's abort stops the call at once, with no retry", async () => {
  const controller = new AbortController();
  controller.abort(new Error("caller gave up"));
  await assert.rejects(sm.getSession(newId("abort"), { signal: controller.signal }), /caller gave up/);
  const proxy = await new Proxy(() => "hang").start();
  try {
    const proxied = new SessionMemoryClient({ baseUrl: proxy.url, apiKey: API_KEY });
    const later = new AbortController();
    setTimeout(() => later.abort(new Error("later")), 100);
    const started = Date.now();
    await assert.rejects(proxied.listSessions({}, { signal: later.signal }), /later/);
    assert.ok(Date.now() - started < 5000);
    assert.equal(proxy.seen.length, 1);
  } finally {
    await proxy.stop();
  }
});
