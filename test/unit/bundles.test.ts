/**
 * test/support/bundles.ts: the bundles tests spawn instead of tsx keep each module's own
 * location (`import.meta.url`, CommonJS `__dirname`), never run a bundled module's "am I the
 * main file?" block, are reused while their inputs are unchanged and rebuilt when one changes,
 * and come out whole when two builders race.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { buildOrReuse, bundledNodeArgs } from "../support/bundles.ts";

const dir = mkdtempSync(join(tmpdir(), "baton-bundles-"));
const cache = join(dir, "cache");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(rel: string, text: string): string {
  const file = join(dir, rel);
  mkdirSync(join(file, ".."), { recursive: true });
  writeFileSync(file, text);
  return file;
}

const entry = write(
  "src/entry.ts",
  [
    'import { where } from "./sub/where.ts";',
    'import pkgDir from "located";',
    'import { pathToFileURL } from "node:url";',
    "const own: string = import.meta.url;",
    "console.log(JSON.stringify({ own, where, pkgDir, argv: process.argv.slice(2) }));",
    'if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) console.log("MAIN");',
    'import { Worker } from "node:worker_threads";',
    "export function start(): Promise<void> {",
    '  console.log("STARTED");',
    "  // An evaluated worker is CommonJS, as the local runner's is.",
    '  const w = new Worker(\'require("node:worker_threads").parentPort.postMessage("worker ok")\', { eval: true });',
    "  return new Promise((ok, fail) => {",
    '    w.once("message", (m) => { console.log(m); ok(); });',
    '    w.once("error", fail);',
    "  });",
    "}",
  ].join("\n"),
);
const sub = write(
  "src/sub/where.ts",
  "export const where = { url: import.meta.url, dirname: import.meta.dirname };\n",
);
write("src/node_modules/located/package.json", '{ "name": "located", "main": "index.js" }');
write("src/node_modules/located/index.js", "module.exports = __dirname;\n");

function run(args: string[]): string {
  return execFileSync(process.execPath, args, { encoding: "utf8", cwd: dir });
}

describe("bundles for spawned processes", () => {
  it("keeps each module's own location and never runs a bundled module's main block", async () => {
    const bundle = await buildOrReuse(entry, cache);
    expect(bundle.startsWith(cache)).toBe(true);
    const out = run([bundle, "a", "b"]);
    const seen = JSON.parse(out.split("\n")[0] ?? "") as Record<string, unknown>;
    expect(seen).toEqual({
      own: pathToFileURL(entry).href,
      where: { url: pathToFileURL(sub).href, dirname: join(dir, "src/sub") },
      pkgDir: join(dir, "src/node_modules/located"),
      argv: ["a", "b"],
    });
    expect(out).not.toContain("MAIN");
  });

  it("bundledNodeArgs with `call` starts the entry through its export, whose evaluated CommonJS worker runs", async () => {
    const args = await bundledNodeArgs(entry, { call: "start", cacheDir: cache });
    const out = run(args);
    expect(out).toContain("STARTED");
    expect(out).toContain("worker ok");
  });

  it("reuses a bundle while its inputs are unchanged and builds another when one changes", async () => {
    const first = await buildOrReuse(entry, cache);
    expect(await buildOrReuse(entry, cache)).toBe(first);
    write(
      "src/sub/where.ts",
      `${"export const where = { url: import.meta.url, dirname: import.meta.dirname, v: 2 };"}\n`,
    );
    const second = await buildOrReuse(entry, cache);
    expect(second).not.toBe(first);
    expect(run([second])).toContain('"v":2');
  });

  it("two builders at once both get a whole bundle and leave no temporary file", async () => {
    const racing = join(dir, "race-cache");
    const [a, b] = await Promise.all([buildOrReuse(entry, racing), buildOrReuse(entry, racing)]);
    expect(a).toBe(b);
    expect(run([a])).toContain(pathToFileURL(entry).href);
    expect(readdirSync(racing).filter((f) => /\.(tmp|lock)$/.test(f))).toEqual([]);
  });

  it("takes over a build lock its builder left behind (killed mid-build)", async () => {
    const left = join(dir, "left-cache");
    await buildOrReuse(entry, left);
    const lock = readdirSync(left)
      .find((f) => f.endsWith(".inputs.json"))
      ?.replace(/\.inputs\.json$/, ".lock");
    rmSync(left, { recursive: true });
    mkdirSync(join(left, lock ?? "missing"), { recursive: true });
    const old = new Date(Date.now() - 10 * 60_000);
    utimesSync(join(left, lock ?? "missing"), old, old);
    const bundle = await buildOrReuse(entry, left);
    expect(run([bundle])).toContain(pathToFileURL(entry).href);
  });
});
