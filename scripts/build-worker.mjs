#!/usr/bin/env node
// Bundles the Cloudflare Workers entry (engine/src/entries/worker.ts) into one ES module for
// workerd: `node:*` stays external (compatibility flag `nodejs_compat`), as does
// `cloudflare:sockets` (pg-cloudflare's TCP).
//
// Usage: node scripts/build-worker.mjs [outfile] [--analyze] [--check]
//   (default outfile dist-worker/worker.mjs). Prints {"outfile","bytes","gzip_bytes","budget_bytes"}.
//   --analyze  also prints where the bytes come from (per package, per engine folder).
//   --check    exits 1 when `bytes` is over WORKER_BUNDLE_BUDGET_BYTES (CI runs it).
// Tests and the benchmark import `buildWorker(outfile)`.
import { mkdirSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * The most the Worker's modules may weigh together, bytes as uploaded (before compression).
 * Cloudflare counts every module of an upload towards a Worker's size, and a bigger script
 * parses longer at each isolate start. Raising it is a reviewed change with its reason.
 */
export const WORKER_BUNDLE_BUDGET_BYTES = 1_000_000;

/**
 * Code the Workers entry cannot reach, replaced by a module that says so if it ever runs:
 * - GitHub App authentication: the serverless entries authenticate with GITHUB_TOKEN only
 *   (engine/src/entries/serverless.ts), so @octokit/auth-app and its OAuth helpers (~22 KB)
 *   would be dead weight;
 * - pg's native binding (`pg.native`, ~8 KB): it needs the `pg-native` addon, which workerd
 *   cannot load; the stub fails the way a missing addon does (MODULE_NOT_FOUND), so
 *   `pg.native` is null, as pg documents for an absent addon;
 * - Kysely's schema builder (`db.schema`: create/alter/drop table, index, view, type; ~19 KB):
 *   the store migrates with raw SQL (adapters/postgres/migrations.ts) and never builds DDL with
 *   Kysely. The workerd store contract test (test/serverless/store-contract.workerd.test.ts)
 *   runs every store operation in this bundle, so a use of it would fail there, by name.
 * Each stub's `filter` and `importer` name the module exactly; if a dependency moves it, the
 * stub stops matching and the budget check shows the bytes coming back.
 */
const UNREACHABLE = [
  {
    filter: /^@octokit\/auth-app$/,
    contents:
      'export function createAppAuth() { throw new Error("[engine] GitHub App authentication is not built into the Workers bundle; set GITHUB_TOKEN (docs/deploying.md)"); }',
    loader: "js",
  },
  {
    filter: /^\.\/native$/,
    importer: /[\\/]node_modules[\\/]pg[\\/]lib[\\/]index\.js$/,
    contents:
      'const e = new Error("Cannot find module \'pg-native\' (no native addons on Workers)"); e.code = "MODULE_NOT_FOUND"; throw e;',
    loader: "js",
  },
  {
    filter: /^\.\/schema\/schema\.js$/,
    importer: /[\\/]node_modules[\\/]kysely[\\/]dist[\\/]esm[\\/](kysely|index)\.js$/,
    contents:
      'export class SchemaModule { constructor() { throw new Error("[store] Kysely\'s schema builder (db.schema) is not built into the Workers bundle: write the DDL as a migration (adapters/postgres/migrations.ts)"); } }',
    loader: "js",
  },
];

/**
 * Bundles the entry to `outfile`. Resolves to `{ bytes, gzipBytes, metafile }`: `bytes` sums
 * every module written (what an upload counts), `gzipBytes` their gzip size (level 9).
 * Throws on a build error. `o.entry` (repository-relative) and `o.alias` (esbuild aliases) let
 * tests bundle another worker the same way (test/workerd/contract-worker.ts).
 */
export async function buildWorker(outfile, o = {}) {
  mkdirSync(dirname(outfile), { recursive: true });
  const r = await build({
    entryPoints: [resolve(root, o.entry ?? "engine/src/entries/worker.ts")],
    ...(o.alias ? { alias: o.alias } : {}),
    absWorkingDir: root,
    bundle: true,
    outfile,
    platform: "neutral",
    format: "esm",
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "browser"],
    jsx: "automatic",
    jsxImportSource: "hono/jsx",
    external: ["node:*", "cloudflare:sockets"],
    minify: true,
    // Non-ASCII text (→, ≥, …) as is: workerd reads modules as UTF-8; escapes cost 6 bytes each.
    charset: "utf8",
    logLevel: "warning",
    metafile: true,
    plugins: [
      {
        name: "unreachable-on-workers",
        setup(b) {
          for (const u of UNREACHABLE) {
            b.onResolve({ filter: u.filter }, (args) =>
              u.importer && !u.importer.test(args.importer)
                ? undefined
                : { path: args.path, namespace: "unreachable", pluginData: u },
            );
          }
          b.onLoad({ filter: /.*/, namespace: "unreachable" }, (args) => ({
            contents: args.pluginData.contents,
            loader: args.pluginData.loader,
          }));
        },
      },
      {
        // pg and its helpers import Node built-ins by bare name (`events`, `util`): workerd
        // provides them as `node:*` under nodejs_compat.
        name: "node-builtins",
        setup(b) {
          const builtins = new Set(builtinModules);
          // A `require` of an external cannot run in an ES module: route each built-in through a
          // small ES shim (bundled), whose own `import` of `node:*` stays external.
          b.onResolve({ filter: /^(node:)?[a-z_]+(\/[a-z_]+)?$/ }, (args) => {
            const name = args.path.replace(/^node:/, "");
            if (args.namespace === "node-shim" || !builtins.has(name)) return undefined;
            return { path: name, namespace: "node-shim" };
          });
          b.onResolve({ filter: /.*/, namespace: "node-shim" }, (args) => ({
            path: args.path,
            external: true,
          }));
          // pg-connection-string reads TLS files with `fs` only for sslcert/sslkey/sslrootcert
          // parameters; workerd has no file system, so `fs` is a stub that says so.
          b.onLoad({ filter: /^fs$/, namespace: "node-shim" }, () => ({
            contents:
              'const no = () => { throw new Error("[engine] no file system on Workers: pass TLS material inline, not as files"); }; export const readFileSync = no; export default { readFileSync: no };',
            loader: "js",
          }));
          b.onLoad({ filter: /.*/, namespace: "node-shim" }, (args) => ({
            contents: `import * as m from "node:${args.path}"; export * from "node:${args.path}"; export default (m.default ?? m);`,
            loader: "js",
          }));
        },
      },
    ],
  });
  const files = Object.keys(r.metafile.outputs).filter((f) => !f.endsWith(".map"));
  const bytes = files.reduce((n, f) => n + r.metafile.outputs[f].bytes, 0);
  const gzipBytes = files.reduce(
    (n, f) => n + gzipSync(readFileSync(resolve(root, f)), { level: 9 }).length,
    0,
  );
  return { bytes, gzipBytes, metafile: r.metafile };
}

/**
 * Where a bundle's bytes come from: output bytes per npm package (`zod`, `@octokit/core`) and
 * per engine folder (`engine/src/http/dashboard`), largest first. `depth` is how many path
 * segments name an engine folder (default 4).
 * @returns {{ name: string, bytes: number }[]}
 */
export function breakdown(metafile, depth = 4) {
  const by = new Map();
  for (const out of Object.values(metafile.outputs)) {
    for (const [path, input] of Object.entries(out.inputs)) {
      const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
      const name = pkg ? pkg[1] : path.split("/").slice(0, depth).join("/");
      by.set(name, (by.get(name) ?? 0) + input.bytesInOutput);
    }
  }
  return [...by].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const named = args.find((a) => !a.startsWith("--"));
  const outfile = named ? resolve(named) : resolve(root, "dist-worker/worker.mjs");
  const built = await buildWorker(outfile);
  console.log(
    JSON.stringify({
      outfile,
      bytes: built.bytes,
      gzip_bytes: built.gzipBytes,
      budget_bytes: WORKER_BUNDLE_BUDGET_BYTES,
    }),
  );
  if (args.includes("--analyze")) {
    for (const { name, bytes } of breakdown(built.metafile).slice(0, 40)) {
      console.log(`${String(bytes).padStart(9)}  ${name}`);
    }
  }
  if (args.includes("--check") && built.bytes > WORKER_BUNDLE_BUDGET_BYTES) {
    console.error(
      `[build-worker] the Workers bundle is ${built.bytes} bytes, over its budget of ${WORKER_BUNDLE_BUDGET_BYTES}; see what grew with --analyze (scripts/build-worker.mjs)`,
    );
    process.exit(1);
  }
}
