#!/usr/bin/env node
// Fails when a mutant of bench/exposure-mutants.ts can reach what Baton ships: a mutant's name
// (or the benchmark's mutant switch, BATON_EXPOSURE_MUTANT) appearing in a shipped source or
// bundle means the break is reachable from shipped code instead of living only in the
// benchmark's patched copy. Shipped: engine/src, actions/, scripts/release, scripts/lib,
// scripts/target, recipes/, .github/, every committed dist/ and the built bundles
// (dist-worker, dist-lambda) when present. Exit 0 when clean, 1 naming each file and mutant.
//
//   node scripts/check-no-mutants.mjs
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

const repo = resolve(import.meta.dirname, "..");
const catalogue = readFileSync(join(repo, "bench/exposure-mutants.ts"), "utf8");
const names = [...catalogue.matchAll(/\bname: "(mutant-[a-z0-9-]+)"/g)].map((m) => m[1]);
if (names.length === 0) {
  console.error("[check-no-mutants] no mutant names found in bench/exposure-mutants.ts");
  process.exit(1);
}
const needles = [...names, "BATON_EXPOSURE_MUTANT"];

const SHIPPED = [
  "engine/src",
  "actions",
  "scripts/release",
  "scripts/lib",
  "scripts/target",
  "recipes",
  ".github",
];
const tracked = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], {
  cwd: repo,
  encoding: "utf8",
})
  .split("\n")
  .filter(Boolean);
const files = new Set(
  tracked.filter((f) => SHIPPED.some((d) => f.startsWith(`${d}/`)) || f.includes("/dist/")),
);
// Built bundles that are not committed, if a build made them.
for (const d of ["dist-worker", "dist-lambda", "dist"]) {
  const walk = (p) => {
    if (!existsSync(p)) return;
    if (statSync(p).isDirectory()) for (const e of readdirSync(p)) walk(join(p, e));
    else files.add(p.slice(repo.length + 1));
  };
  walk(join(repo, d));
}

const found = [];
for (const f of files) {
  const path = join(repo, f);
  if (!existsSync(path) || statSync(path).size > 20_000_000) continue;
  const text = readFileSync(path, "utf8");
  for (const n of needles) if (text.includes(n)) found.push(`${f}: ${n}`);
}
if (found.length > 0) {
  console.error(
    `[check-no-mutants] mutants must live only in the benchmark's patched copies; found in shipped files:\n  ${found.join("\n  ")}`,
  );
  process.exit(1);
}
console.log(
  `[check-no-mutants] ${names.length} mutants, ${files.size} shipped files: none of them named`,
);
