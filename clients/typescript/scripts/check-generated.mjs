#!/usr/bin/env node
// Regenerates the API types from the committed openapi/openapi.json with the pinned
// openapi-typescript and fails if src/openapi.ts differs (run `npm run generate` to update it).
// `--out FILE` writes the fresh types there instead of comparing.

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const spec = resolve(pkg, "../../openapi/openapi.json");
const outIndex = process.argv.indexOf("--out");
const scratch = outIndex === -1 ? mkdtempSync(join(tmpdir(), "sm-openapi-")) : undefined;
const out = outIndex === -1 ? join(scratch, "openapi.ts") : resolve(process.argv[outIndex + 1]);

const cli = join(pkg, "node_modules/openapi-typescript/bin/cli.js");
execFileSync(process.execPath, [cli, spec, "--default-non-nullable", "false", "-o", out], { stdio: "pipe" });

if (scratch !== undefined) {
  const same = readFileSync(out, "utf8") === readFileSync(join(pkg, "src/openapi.ts"), "utf8");
  rmSync(scratch, { recursive: true, force: true });
  if (!same) {
    console.error("src/openapi.ts differs from what openapi/openapi.json generates: run `npm run generate` in clients/typescript");
    process.exit(1);
  }
}
