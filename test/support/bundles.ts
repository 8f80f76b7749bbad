/**
 * Entry points that tests, benchmarks and the chaos harness start as Node processes, bundled
 * whole (our TypeScript and the packages it imports) into one ES module file, so that a spawn
 * loads one file instead of compiling through tsx and resolving hundreds of files in
 * node_modules: `baton --help` took about 1.0 s of CPU through tsx (or a bundle of our sources
 * alone) and about 0.35 s as a whole bundle.
 *
 * A bundle is built once and shared by every process of a run (vitest workers, the chaos
 * harness): it is kept under node_modules/.cache/baton-bundles, named by a hash of every file
 * it was built from, and reused while none of them changed. Concurrent builders write to a
 * temporary file and rename it, so a reader never sees half a bundle.
 *
 * What bundling would change, and how it is kept as it was:
 * - `import.meta.url` (`.dirname`, `.filename`) in a bundled module is replaced by that
 *   module's own source location, and CommonJS `__dirname` / `__filename` likewise, so code that
 *   finds files next to itself (REPO_ROOT in engine/src/demo/fleet.ts, a package's data files)
 *   finds the same files. A module's "am I the main file?" check is therefore never true in a
 *   bundle: an entry that starts on such a check is started by calling its export
 *   (`bundledNodeArgs(entry, { call })`).
 * - `baton demo` imports engine/src/demo/main.ts by a computed URL (engine/src/cli/serve.ts),
 *   which a bundler cannot follow: the bundle imports it by name instead (checked below).
 * - Native and platform packages stay outside (EXTERNAL) and load from node_modules.
 */
import { createHash, randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { build, version as esbuildVersion, type Plugin } from "esbuild";
import { REPO_ROOT } from "../../engine/src/demo/fleet.ts";

/** Packages loaded from node_modules at run time: native code, or a platform's own binary. */
const EXTERNAL = [
  "better-sqlite3",
  "pg-native",
  "playwright-core",
  "esbuild",
  "fsevents",
  "ssh2",
  "cpu-features",
  "*.node",
];

/** Changing how bundles are built changes this, and with it every bundle's name. */
const RECIPE = JSON.stringify({ v: 1, esbuildVersion, EXTERNAL, node: "node20" });

const CACHE = join(REPO_ROOT, "node_modules/.cache/baton-bundles");

/** `require` for bundled CommonJS packages and the externals, from the bundle's place. */
const BANNER =
  'import { createRequire as __batonCreateRequire } from "node:module";\nconst require = __batonCreateRequire(import.meta.url);';

/**
 * Keeps a module's own location: `import.meta.url` / `.dirname` / `.filename` become literals of
 * the source file's, and a CommonJS module that uses `__dirname` / `__filename` gets its own.
 */
const ownLocation: Plugin = {
  name: "own-location",
  setup(b) {
    b.onLoad({ filter: /\.(?:[cm]?[jt]s|tsx)$/ }, (args) => {
      const text = readFileSync(args.path, "utf8");
      const meta = text.includes("import.meta");
      const cjsDir = /\b__(?:dirname|filename)\b/.test(text);
      if (!meta && !cjsDir) return undefined;
      const file = args.path;
      let out = meta
        ? text
            .replace(/\bimport\.meta\.url\b/g, JSON.stringify(pathToFileURL(file).href))
            .replace(/\bimport\.meta\.dirname\b/g, JSON.stringify(dirname(file)))
            .replace(/\bimport\.meta\.filename\b/g, JSON.stringify(file))
        : text;
      // Only CommonJS modules are wrapped in a function of their own by esbuild (ESM top-level
      // names are renamed apart), so the declaration stays this module's either way.
      if (cjsDir && !/\bimport\.meta\b|^\s*(?:import|export)\s/m.test(out)) {
        out = `var __filename = ${JSON.stringify(file)}, __dirname = ${JSON.stringify(dirname(file))};\n${out}`;
      }
      const ext = file.slice(file.lastIndexOf(".") + 1);
      return {
        contents: out,
        loader: ext === "tsx" ? "tsx" : ext.endsWith("ts") ? "ts" : "js",
        resolveDir: dirname(file),
      };
    });
  },
};

/** engine/src/cli/serve.ts loads the demo by a computed URL; the bundle imports it by name. */
const demoByName: Plugin = {
  name: "demo-by-name",
  setup(b) {
    b.onLoad({ filter: /[\\/]engine[\\/]src[\\/]cli[\\/]serve\.ts$/ }, (args) => {
      const text = readFileSync(args.path, "utf8");
      const from = "await import(DEMO.href)";
      if (!text.includes(from))
        throw new Error(
          `[bundles] ${args.path} no longer imports the demo as \`${from}\`: update demoByName in test/support/bundles.ts`,
        );
      const contents = text
        .replace(from, 'await import("../demo/main.ts")')
        .replace(/\bimport\.meta\.url\b/g, JSON.stringify(pathToFileURL(args.path).href));
      return { contents, loader: "ts", resolveDir: dirname(args.path) };
    });
  },
};

const inProcess = new Map<string, Promise<string>>();

/**
 * The bundle of `entry` (a path relative to the repository, e.g. "engine/src/cli/main.ts"):
 * built on first use in this checkout, reused while its inputs are unchanged. Resolves with the
 * bundle's absolute path.
 * @throws Error with esbuild's message when the entry does not build.
 */
export function bundled(entry: string): Promise<string> {
  const abs = isAbsolute(entry) ? entry : join(REPO_ROOT, entry);
  let p = inProcess.get(abs);
  if (!p) {
    p = buildOrReuse(abs);
    inProcess.set(abs, p);
  }
  return p;
}

/**
 * Arguments for `spawn(process.execPath, …)` that run the bundle of `entry`: the bundle's path
 * (then `args`: `process.argv.slice(2)` is `args`, as for the source), or with `call`, a small
 * module next to the bundle that imports it, calls its export `call()` and exits 1 with the
 * error's message when that rejects (for an entry that starts on an "am I the main file?"
 * check). A file, not `node --input-type=module -e`: that flag would reach the process's
 * worker threads and make the local runner's evaluated CommonJS worker an ES module.
 * `cacheDir` keeps the bundle elsewhere than the shared cache (`buildOrReuse`).
 */
export async function bundledNodeArgs(
  entry: string,
  o: { call?: string; args?: string[]; cacheDir?: string } = {},
): Promise<string[]> {
  const file = o.cacheDir
    ? await buildOrReuse(isAbsolute(entry) ? entry : join(REPO_ROOT, entry), o.cacheDir)
    : await bundled(entry);
  if (!o.call) return [file, ...(o.args ?? [])];
  if (!/^[A-Za-z_$][\w$]*$/.test(o.call))
    throw new Error(`[bundles] call must name an export, got ${JSON.stringify(o.call)}`);
  const starter = `${file.replace(/\.mjs$/, "")}.${o.call}.mjs`;
  if (!existsSync(starter)) {
    const base = JSON.stringify(`./${file.slice(dirname(file).length + 1)}`);
    writeAtomically(
      starter,
      `import { ${o.call} as start } from ${base};\ntry {\n  await start();\n} catch (e) {\n  console.error(e instanceof Error ? e.message : e);\n  process.exit(1);\n}\n`,
    );
  }
  return [starter, ...(o.args ?? [])];
}

/** A name unique to this entry's path (two checkouts share node_modules through a link). */
function stem(abs: string): string {
  const base = relative(REPO_ROOT, abs).replace(/[^A-Za-z0-9]+/g, "-");
  return `${base}-${hash([abs]).slice(0, 8)}`;
}

function hash(parts: string[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p).update("\0");
  return h.digest("hex");
}

/** Hash of the recipe and every input's path and content; null when an input is gone. */
function inputsKey(inputs: string[]): string | null {
  const h = createHash("sha256").update(RECIPE);
  for (const f of inputs) {
    let content: Buffer;
    try {
      content = readFileSync(f);
    } catch {
      return null;
    }
    h.update(f).update("\0").update(content).update("\0");
  }
  return h.digest("hex").slice(0, 16);
}

/** Writes `data` to `file` through a temporary file in the same folder and a rename. */
function writeAtomically(file: string, data: string | Uint8Array): void {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  writeFileSync(tmp, data);
  renameSync(tmp, file);
}

/**
 * `bundled` without this process's memo: reuses the bundle of `abs` (an absolute path) in
 * `cacheDir` when every input of its last build is unchanged, else builds it. Resolves with the
 * bundle's path.
 */
export async function buildOrReuse(abs: string, cacheDir = CACHE): Promise<string> {
  mkdirSync(cacheDir, { recursive: true });
  const name = stem(abs);
  const inputsFile = join(cacheDir, `${name}.inputs.json`);
  const reusable = (): string | null => {
    // The inputs of the last build of this entry: unchanged, its bundle is reused.
    try {
      const inputs = JSON.parse(readFileSync(inputsFile, "utf8")) as string[];
      const key = inputsKey(inputs);
      const out = key && join(cacheDir, `${name}-${key}.mjs`);
      return out && existsSync(out) ? out : null;
    } catch {
      return null; // none yet, or unreadable: built below
    }
  };
  const found = reusable();
  if (found) return found;
  // One builder at a time per entry: the others wait for its bundle instead of building the
  // same one (vitest's workers start together). A lock left by a killed builder is taken over
  // after LOCK_STALE_MS.
  const lock = join(cacheDir, `${name}.lock`);
  const until = Date.now() + LOCK_STALE_MS;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      const at = (() => {
        try {
          return statSync(lock).mtimeMs;
        } catch {
          return 0;
        }
      })();
      if (Date.now() > until || (at > 0 && Date.now() - at > LOCK_STALE_MS)) {
        rmSync(lock, { recursive: true, force: true });
        continue;
      }
      await new Promise((r) => setTimeout(r, 100));
      const built = reusable();
      if (built) return built;
    }
  }
  try {
    return reusable() ?? (await buildInto(abs, cacheDir, name, inputsFile));
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** How long a build lock may be held before another builder takes it over (ms). */
const LOCK_STALE_MS = 120_000;

async function buildInto(
  abs: string,
  cacheDir: string,
  name: string,
  inputsFile: string,
): Promise<string> {
  const r = await build({
    entryPoints: [abs],
    absWorkingDir: REPO_ROOT,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: EXTERNAL,
    banner: { js: BANNER },
    plugins: [demoByName, ownLocation],
    write: false,
    metafile: true,
    outfile: join(cacheDir, `${name}.mjs`),
    logLevel: "error",
  });
  const inputs = Object.keys(r.metafile.inputs)
    .filter((i) => !i.includes(":"))
    .map((i) => resolve(REPO_ROOT, i))
    .sort();
  const key = inputsKey(inputs);
  const bundle = r.outputFiles.find((f) => f.path.endsWith(".mjs"));
  if (!key || !bundle) throw new Error(`[bundles] ${abs}: an input vanished during the build`);
  const out = join(cacheDir, `${name}-${key}.mjs`);
  writeAtomically(out, bundle.contents);
  writeAtomically(inputsFile, JSON.stringify(inputs));
  prune(cacheDir, name, out);
  return out;
}

/** Removes this entry's bundles of other inputs that are over a day old. */
function prune(cacheDir: string, name: string, keep: string): void {
  const dayAgo = Date.now() - 86_400_000;
  for (const f of readdirSync(cacheDir)) {
    const p = join(cacheDir, f);
    if (p === keep || !f.startsWith(`${name}-`) || !f.endsWith(".mjs")) continue;
    try {
      if (statSync(p).mtimeMs < dayAgo) unlinkSync(p);
    } catch {
      // Removed by another process meanwhile.
    }
  }
}
