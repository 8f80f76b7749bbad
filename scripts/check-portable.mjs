#!/usr/bin/env node
// Proves the portable core (engine/src/core.ts) imports no Node-only module: bundles it with
// esbuild for a neutral platform (browser/worker conditions) and fails, naming the import chain,
// on any `node:` import, any Node built-in imported by bare name, or any native (.node) module.
// Usage: node scripts/check-portable.mjs [entry...]   (default engine/src/core.ts)
import { builtinModules } from "node:module";
import { dirname, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const entries = process.argv.slice(2).length ? process.argv.slice(2) : ["engine/src/core.ts"];
const builtins = new Set(builtinModules);
const bad = [];

const guard = {
  name: "portable-guard",
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      const p = args.path;
      const bare = p.split("/")[0];
      if (p.startsWith("node:") || (builtins.has(bare) && !p.startsWith("."))) {
        bad.push(`${p} (imported by ${relative(root, args.importer)})`);
        return { path: p, external: true };
      }
      return undefined;
    });
    b.onLoad({ filter: /\.node$/ }, (args) => {
      bad.push(`native module ${relative(root, args.path)}`);
      return { contents: "", loader: "js" };
    });
  },
};

let failed = false;
for (const entry of entries) {
  bad.length = 0;
  const result = await build({
    entryPoints: [resolve(root, entry)],
    bundle: true,
    write: false,
    platform: "neutral",
    format: "esm",
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "browser"],
    jsx: "automatic",
    jsxImportSource: "hono/jsx",
    logLevel: "silent",
    metafile: true,
    plugins: [guard],
  }).catch((e) => {
    for (const m of e.errors ?? [])
      bad.push(`${m.text}${m.location ? ` (${m.location.file})` : ""}`);
    return null;
  });
  if (bad.length > 0) {
    failed = true;
    console.error(`[check-portable] ${entry} is not portable:`);
    for (const b of [...new Set(bad)]) console.error(`  - ${b}`);
  } else {
    const bytes = result.outputFiles[0].contents.length;
    console.log(`[check-portable] ${entry}: no node: import, no native module (${bytes} bytes)`);
  }
}
process.exit(failed ? 1 : 0);
