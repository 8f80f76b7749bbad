#!/usr/bin/env node
// The `baton` command: runs the TypeScript CLI (engine/src/cli/main.ts) through tsx, without a
// build step. tsx is told where the project's tsconfig is, so JSX (hono/jsx) and `.ts`
// imports resolve the same from any working directory.
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { register } from "tsx/esm/api";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
register({ tsconfig: join(root, "tsconfig.json") });
await import(pathToFileURL(join(root, "engine/src/cli/main.ts")).href);
