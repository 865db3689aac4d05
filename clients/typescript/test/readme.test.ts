// The README's examples type-check as TypeScript against the built package (the project's
// test command also runs the first one, as pasted, against a live server).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), "..");

test("every js and ts example of the README type-checks", () => {
  const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
  const blocks = [...readme.matchAll(/```(?:js|ts)\n([\s\S]*?)```/g)].map((m) => m[1]!);
  assert.ok(blocks.length >= 2, "the README has a js and a ts example");
  // inside the package, so that "session-memory-client" resolves to it by its own name
  const where = join(PACKAGE, "build-test", "readme");
  rmSync(where, { recursive: true, force: true });
  mkdirSync(where, { recursive: true });
  blocks.forEach((code, i) => writeFileSync(join(where, `example${i}.ts`), code));
  writeFileSync(
    join(where, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2022", "DOM"],
        types: ["node"], strict: true, noEmit: true, skipLibCheck: true,
      },
      include: ["*.ts"],
    }),
  );
  const tsc = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");
  try {
    execFileSync(process.execPath, [tsc, "-p", where], { stdio: "pipe" });
  } catch (error) {
    const out = error as { stdout?: Buffer };
    assert.fail(`a README example does not type-check:\n${out.stdout?.toString() ?? String(error)}`);
  }
});
