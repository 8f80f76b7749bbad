#!/usr/bin/env node
// Bundles the release-step action (dist/index.js, dist/post.js) and the release tools
// (scripts/release/dist/<tool>.mjs) with esbuild: ESM, Node 20, everything inlined so a runner
// needs no `npm install`. Output is deterministic (no timestamps, no absolute paths), which is
// what lets scripts/check-dist.mjs compare a fresh build with the committed one.
//   node scripts/build.mjs [--out <dir>]   (default: write in place)
import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Entry points: [source, output path relative to the repo root, executable]. */
export function entries() {
  const tools = readdirSync(join(root, "scripts/release"))
    .filter((f) => f.endsWith(".ts"))
    .sort()
    .map((f) => [
      `scripts/release/${f}`,
      `scripts/release/dist/${f.replace(/\.ts$/, ".mjs")}`,
      true,
    ]);
  return [
    ["actions/release-step/src/index.ts", "actions/release-step/dist/index.js", false],
    ["actions/release-step/src/post.ts", "actions/release-step/dist/post.js", false],
    ...tools,
  ];
}

/** The action's two entries, built together: see buildAll. */
function isActionEntry(out) {
  return out.startsWith("actions/release-step/dist/");
}

// ESM output needs `require`, `__filename` and `__dirname` for bundled CommonJS dependencies
// (ssh2, @actions/* internals).
const banner = [
  'import { createRequire as __batonCreateRequire } from "node:module";',
  'import { fileURLToPath as __batonFileURLToPath } from "node:url";',
  'import { dirname as __batonDirname } from "node:path";',
  "const require = __batonCreateRequire(import.meta.url);",
  "const __filename = __batonFileURLToPath(import.meta.url);",
  "const __dirname = __batonDirname(__filename);",
].join("\n");

/**
 * `@actions/core` imports its OIDC client, and with it `@actions/http-client` and undici (about
 * 400 KB of the action's 570 KB), at start-up, although only `getIDToken` (a step with
 * `oidc-audience`) uses them: starting undici cost every main and post step about 0.1 s of CPU.
 * This plugin makes oidc-utils import the HTTP client when a token is asked for; esbuild keeps
 * the module in the bundle, initialised on first use. Same behaviour otherwise. Fails the build
 * when the source no longer reads as expected (an upgrade of @actions/core): look again.
 */
const lazyOidcHttpClient = {
  name: "lazy-oidc-http-client",
  setup(b) {
    b.onLoad({ filter: /@actions[\\/]core[\\/]lib[\\/]oidc-utils\.js$/ }, (args) => {
      const edits = [
        [
          "import { HttpClient } from '@actions/http-client';\nimport { BearerCredentialHandler } from '@actions/http-client/lib/auth';\n",
          "",
        ],
        [
          "static createHttpClient(allowRetry = true, maxRetry = 10) {",
          "static async createHttpClient(allowRetry = true, maxRetry = 10) {\n        const { HttpClient } = await import('@actions/http-client');\n        const { BearerCredentialHandler } = await import('@actions/http-client/lib/auth');",
        ],
        [
          "const httpclient = OidcClient.createHttpClient();",
          "const httpclient = yield OidcClient.createHttpClient();",
        ],
      ];
      let contents = readFileSync(args.path, "utf8");
      for (const [from, to] of edits) {
        if (contents.split(from).length !== 2)
          throw new Error(
            `[build] ${args.path} changed: cannot make its HTTP client lazy (${from})`,
          );
        contents = contents.replace(from, to);
      }
      return { contents, loader: "js" };
    });
  },
};

/** Builds every bundle under `outRoot` (a repo-shaped tree). Returns the written paths (relative). */
export async function buildAll(outRoot = root) {
  const written = [];
  for (const dir of ["actions/release-step/dist", "scripts/release/dist"]) {
    rmSync(join(outRoot, dir), { recursive: true, force: true });
    mkdirSync(join(outRoot, dir), { recursive: true });
  }
  const common = {
    absWorkingDir: root,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    minify: true,
    legalComments: "none",
    charset: "utf8",
    // ssh2's optional native helpers: loaded in try/catch, pure-JS fallbacks otherwise.
    external: ["*.node", "cpu-features"],
    plugins: [lazyOidcHttpClient],
    logLevel: "warning",
  };
  // The action's main and post steps in one build with code splitting: what both import is one
  // shared chunk, and what a step imports only when it needs it (the OIDC HTTP client with
  // undici; the post step's report path) is a chunk of its own, loaded by `import()`. Each
  // step starts a fresh Node, which compiles every byte it loads: the post step of a main step
  // that reported loads the entry and @actions/core, not the callback's schemas and client.
  const action = entries().filter(([, out]) => isActionEntry(out));
  await build({
    ...common,
    entryPoints: Object.fromEntries(action.map(([src, out]) => [basename(out, ".js"), src])),
    outdir: join(outRoot, "actions/release-step/dist"),
    splitting: true,
    chunkNames: "chunks/[name]-[hash]",
    banner: { js: banner },
  });
  for (const f of readdirSync(join(outRoot, "actions/release-step/dist"), { recursive: true }))
    if (String(f).endsWith(".js")) written.push(`actions/release-step/dist/${f}`);
  for (const [src, out, executable] of entries()) {
    if (isActionEntry(out)) continue;
    const target = join(outRoot, out);
    await build({
      ...common,
      entryPoints: [src],
      outfile: target,
      banner: { js: executable ? `#!/usr/bin/env node\n${banner}` : banner },
    });
    if (executable) chmodSync(target, 0o755);
    written.push(out);
  }
  // The action's .js bundles are ES modules wherever the action is checked out.
  writeFileSync(join(outRoot, "actions/release-step/dist/package.json"), '{ "type": "module" }\n');
  written.push("actions/release-step/dist/package.json");
  return written;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--out");
  const outRoot = at > 0 ? resolve(process.argv[at + 1]) : root;
  const files = await buildAll(outRoot);
  console.log(`[build] wrote ${files.length} files under ${outRoot}`);
}
