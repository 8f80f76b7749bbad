#!/usr/bin/env node
// Fails when the committed bundles (actions/release-step/dist, scripts/release/dist) differ from
// a fresh build: rebuilds into a temp dir and compares bytes and the executable bit of each file.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildAll } from "./build.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const tmp = mkdtempSync(join(tmpdir(), "baton-check-dist-"));
const list = (base, dir) => {
  try {
    return readdirSync(join(base, dir), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => `${dir}/${relative(join(base, dir), join(e.parentPath ?? e.path, e.name))}`);
  } catch {
    return [];
  }
};
try {
  await buildAll(tmp);
  const problems = [];
  for (const dir of ["actions/release-step/dist", "scripts/release/dist"]) {
    const fresh = new Set(list(tmp, dir));
    const committed = new Set(list(root, dir));
    for (const f of fresh) {
      if (!committed.has(f)) problems.push(`${f} is missing`);
      else if (!readFileSync(join(tmp, f)).equals(readFileSync(join(root, f))))
        problems.push(`${f} differs`);
      else if ((statSync(join(tmp, f)).mode & 0o111) !== (statSync(join(root, f)).mode & 0o111)) {
        problems.push(`${f} has the wrong executable bit`);
      }
    }
    for (const f of committed)
      if (!fresh.has(f)) problems.push(`${f} is not produced by the build`);
  }
  if (problems.length > 0) {
    for (const p of problems) console.error(`[check-dist] ${p}`);
    console.error(
      "[check-dist] the committed bundles are stale: run `npm run build` and commit the dist folders",
    );
    process.exitCode = 1;
  } else {
    console.log("[check-dist] committed bundles match a fresh build");
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
