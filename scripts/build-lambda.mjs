#!/usr/bin/env node
// Bundles the AWS Lambda entry (engine/src/entries/lambda.ts) into one ES module for the
// nodejs20.x / nodejs22.x runtimes: handler `index.handler`. Usage:
// node scripts/build-lambda.mjs [outfile] (default dist-lambda/index.mjs); zip the folder and
// upload it (docs/deploying.md). Prints {"outfile","bytes"}. The benchmark imports
// `buildLambda(outfile)`.
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Bundles the entry to `outfile`; resolves to its size in bytes. Throws on a build error. */
export async function buildLambda(outfile) {
  mkdirSync(dirname(outfile), { recursive: true });
  const r = await build({
    entryPoints: [resolve(root, "engine/src/entries/lambda.ts")],
    bundle: true,
    outfile,
    platform: "node",
    target: "node20",
    format: "esm",
    jsx: "automatic",
    jsxImportSource: "hono/jsx",
    // pg's optional native binding and the Workers socket shim are never loaded on Lambda.
    external: ["pg-native", "cloudflare:sockets"],
    // CommonJS dependencies (pg) call `require` for Node built-ins.
    banner: {
      js: "import { createRequire as __baton_cr } from 'node:module'; const require = __baton_cr(import.meta.url);",
    },
    minify: true,
    logLevel: "warning",
    metafile: true,
  });
  return Object.values(r.metafile.outputs)[0].bytes;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outfile = resolve(process.argv[2] ?? resolve(root, "dist-lambda/index.mjs"));
  console.log(JSON.stringify({ outfile, bytes: await buildLambda(outfile) }));
}
