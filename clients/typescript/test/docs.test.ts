// The TypeScript snippet of docs/clients.md's Vercel AI SDK section, as printed: compiled with
// strict types against the built package and the installed `ai`, then run against the live
// server with the SDK's mock model standing in for a provider.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { tool, type LanguageModel, type ToolSet } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";

import { ServiceMessageHistory } from "session-memory-client/ai";
import { client, newId } from "./helpers.js";

const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const DOC = join(PACKAGE, "..", "..", "docs", "clients.md");

function snippet(): string {
  const section = readFileSync(DOC, "utf8").split(/^## Vercel AI SDK/m)[1]?.split(/^## /m)[0];
  assert.ok(section, "docs/clients.md has a Vercel AI SDK section");
  const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
  assert.equal(blocks.length, 1, "the section has one ts snippet");
  return blocks[0]!;
}

type ChatTurn = (model: LanguageModel, chatId: string, text: string, tools?: ToolSet) => Promise<string>;

test("the Vercel AI SDK snippet of docs/clients.md compiles and runs", async () => {
  // inside the package, so that "session-memory-client" and "ai" resolve as in an app
  const where = join(PACKAGE, "build-test", "docs");
  rmSync(where, { recursive: true, force: true });
  mkdirSync(join(where, "src"), { recursive: true });
  writeFileSync(join(where, "src", "chat.ts"), snippet());
  writeFileSync(
    join(where, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2022", "DOM"],
        types: ["node"], strict: true, skipLibCheck: true, rootDir: "src", outDir: "out",
      },
      include: ["src/*.ts"],
    }),
  );
  const tsc = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");
  try {
    execFileSync(process.execPath, [tsc, "-p", where], { stdio: "pipe" });
  } catch (error) {
    assert.fail(`the snippet does not compile:\n${(error as { stdout?: Buffer }).stdout?.toString() ?? String(error)}`);
  }
  const { chatTurn } = (await import(pathToFileURL(join(where, "out", "chat.js")).href)) as { chatTurn: ChatTurn };

  const prompts: string[] = [];
  let step = 0;
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => {
      prompts.push(JSON.stringify(options.prompt));
      const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
      const stop = { unified: "stop", raw: "stop" } as const;
      switch (step++) {
        case 0:
          return { content: [{ type: "text", text: "The Eiffel Tower is in Paris." }], finishReason: stop, usage, warnings: [] };
        case 1:
          return {
            content: [{ type: "tool-call", toolCallId: "call_1", toolName: "population", input: '{"city":"Paris"}' }],
            finishReason: { unified: "tool-calls", raw: "tool_use" },
            usage,
            warnings: [],
          };
        default:
          return { content: [{ type: "text", text: "About 2.1 million." }], finishReason: stop, usage, warnings: [] };
      }
    },
  });
  const population = tool({
    description: "A city's population",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }: { city: string }) => ({ city, population: 2_100_000 }),
  });

  const chatId = newId("docs-ai");
  assert.equal(await chatTurn(model, chatId, "What city is the Eiffel Tower in?"), "The Eiffel Tower is in Paris.");
  assert.equal(await chatTurn(model, chatId, "And its population?", { population }), "About 2.1 million.");
  // the second turn was sent the first, read back from the service
  assert.match(prompts[1]!, /The Eiffel Tower is in Paris\./);
  assert.match(prompts[2]!, /2100000/);
  const saved = await new ServiceMessageHistory(client(), chatId).load();
  assert.deepEqual(saved.map((m) => m.role), ["user", "assistant", "user", "assistant", "tool", "assistant"]);
});
