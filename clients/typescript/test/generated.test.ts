// src/openapi.ts is what openapi-typescript (pinned in package-lock.json) generates from the
// committed openapi/openapi.json: regenerate it and compare.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), "..");

test("src/openapi.ts matches the committed OpenAPI document", () => {
  const where = mkdtempSync(join(tmpdir(), "sm-openapi-"));
  try {
    execFileSync(process.execPath, [join(PACKAGE, "scripts/check-generated.mjs"), "--out", join(where, "openapi.ts")], { stdio: "pipe" });
    const fresh = readFileSync(join(where, "openapi.ts"), "utf8");
    const committed = readFileSync(join(PACKAGE, "src/openapi.ts"), "utf8");
    assert.ok(fresh.includes('"/v1/sessions/{session_id}/items"'));
    if (committed !== fresh) {
      const a = committed.split("\n");
      const b = fresh.split("\n");
      const found = a.findIndex((text, i) => text !== b[i]);
      const line = found === -1 ? a.length : found; // or the fresh file is longer
      assert.fail(
        `src/openapi.ts is stale (first difference at line ${line + 1}: ${JSON.stringify(a[line])} ` +
          `should be ${JSON.stringify(b[line])}): run \`npm run generate\` in clients/typescript`,
      );
    }
  } finally {
    rmSync(where, { recursive: true, force: true });
  }
});
