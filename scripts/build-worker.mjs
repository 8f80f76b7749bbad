#!/usr/bin/env node
// Bundles the Cloudflare Workers entry (engine/src/entries/worker.ts) into one ES module for
// workerd: `node:*` stays external (compatibility flag `nodejs_compat`), as does
// `cloudflare:sockets` (pg-cloudflare's TCP). Usage: node scripts/build-worker.mjs [outfile]
// (default dist-worker/worker.mjs). Prints {"outfile","bytes"}. Tests and the benchmark import
// `buildWorker(outfile)`.
import { mkdirSync } from "node:fs";
import { builtinModules } from "node:module";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Bundles the entry to `outfile`; resolves to its size in bytes. Throws on a build error.
 * `o.entry` (repository-relative) and `o.alias` (esbuild aliases) let tests bundle another
 * worker the same way (test/workerd/contract-worker.ts).
 */
export async function buildWorker(outfile, o = {}) {
  mkdirSync(dirname(outfile), { recursive: true });
  const r = await build({
    entryPoints: [resolve(root, o.entry ?? "engine/src/entries/worker.ts")],
    ...(o.alias ? { alias: o.alias } : {}),
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
    logLevel: "warning",
    metafile: true,
    plugins: [
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
  return Object.values(r.metafile.outputs)[0].bytes;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outfile = resolve(process.argv[2] ?? resolve(root, "dist-worker/worker.mjs"));
  console.log(JSON.stringify({ outfile, bytes: await buildWorker(outfile) }));
}
