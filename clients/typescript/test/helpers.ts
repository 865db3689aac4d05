// What every test shares: the server under test (SESSION_MEMORY_URL, default
// http://127.0.0.1:8080; SESSION_MEMORY_API_KEY when its auth is on), fresh session ids, and
// an HTTP proxy in front of it that can lose an answer or answer 503, at the network level.

import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";

import { SessionMemoryClient, type ClientOptions } from "session-memory-client";

export const BASE_URL = (process.env["SESSION_MEMORY_URL"] ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
export const API_KEY = process.env["SESSION_MEMORY_API_KEY"] || undefined;

export function client(options: ClientOptions = {}): SessionMemoryClient {
  return new SessionMemoryClient({ baseUrl: BASE_URL, apiKey: API_KEY, ...options });
}

export function newId(prefix = "ts"): string {
  return `${prefix}-${crypto.randomUUID().slice(0, 12)}`;
}

export interface Seen {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  /** The server's `idempotent-replayed` header, when the request was forwarded. */
  replayed: string | undefined;
  /** What the proxy did: forwarded the answer, lost it after the server answered, or 503. */
  action: "forward" | "lose" | "503" | "hang";
}

export type Decide = (req: { method: string; path: string }, index: number) => Seen["action"];

/** An HTTP proxy to the server under test. `decide` says, per request, whether to forward the
 * answer, drop the connection after the server has answered (the write happened; the client
 * never learns it), answer 503 itself without forwarding, or never answer. */
export class Proxy {
  readonly seen: Seen[] = [];
  #server: http.Server;
  #port = 0;

  constructor(decide: Decide, port = 0) {
    this.#port = port;
    const upstream = new URL(BASE_URL);
    this.#server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const path = req.url ?? "/";
        const index = this.seen.length;
        const action = decide({ method: req.method ?? "GET", path }, index);
        const record: Seen = {
          method: req.method ?? "GET",
          path,
          idempotencyKey: header(req.headers["idempotency-key"]),
          replayed: undefined,
          action,
        };
        this.seen.push(record);
        if (action === "hang") return; // until the client gives up, or stop()
        if (action === "503") {
          const body = JSON.stringify({ type: "https://session-memory.dev/problems/unavailable", title: "Unavailable", status: 503, detail: "injected by the test proxy" });
          res.writeHead(503, { "content-type": "application/problem+json", "retry-after": "0" });
          res.end(body);
          return;
        }
        const forward = http.request(
          { host: upstream.hostname, port: upstream.port, method: req.method, path, headers: { ...req.headers, host: upstream.host } },
          (answer) => {
            const parts: Buffer[] = [];
            answer.on("data", (c: Buffer) => parts.push(c));
            answer.on("end", () => {
              record.replayed = header(answer.headers["idempotent-replayed"]);
              if (action === "lose") {
                req.socket.resetAndDestroy(); // the server has applied it; the answer is lost
                return;
              }
              res.writeHead(answer.statusCode ?? 502, answer.headers);
              res.end(Buffer.concat(parts));
            });
          },
        );
        forward.on("error", () => req.socket.destroy());
        forward.end(Buffer.concat(chunks));
      });
    });
  }

  async start(): Promise<this> {
    this.#server.listen(this.#port, "127.0.0.1");
    await once(this.#server, "listening");
    this.#port = (this.#server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    this.#server.close();
    await once(this.#server, "close");
  }
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
