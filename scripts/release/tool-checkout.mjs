#!/usr/bin/env node
// Release-step workflow helper: reads the committed tool allowlist and writes, as step outputs
// (GITHUB_OUTPUT), the one tools repository its entries pin ({repository, ref, path} entries):
// `repository`, `ref` (the full commit sha) and `path` (.baton-tools/<owner>/<name>, where the
// action looks for it). No output values when every tool is in this repository. Refuses (exit 1,
// an ::error:: line) an unpinned ref, or more than one tools repository (one checkout step).
// The action re-checks all of it; this only drives the actions/checkout step.
//   node scripts/release/tool-checkout.mjs [allowlist.json]
import { appendFileSync, readFileSync } from "node:fs";

const file = process.argv[2] ?? "scripts/release/allowlist.json";
const fail = (msg) => {
  console.log(`::error title=tool allowlist::${msg}`);
  process.exit(1);
};
let map;
try {
  map = JSON.parse(readFileSync(file, "utf8"));
} catch (e) {
  fail(`cannot read ${file}: ${String(e.message).split("\n")[0]}`);
}
const repos = new Map();
for (const [tool, entry] of Object.entries(map ?? {})) {
  if (entry === null || typeof entry !== "object") continue;
  if (typeof entry.ref !== "string" || !/^[0-9a-f]{40}$/.test(entry.ref))
    fail(
      `${file}: ${tool}.ref ${JSON.stringify(entry.ref)} is not a full 40-hex commit sha; pin the tool to one commit (git ls-remote https://github.com/${entry.repository} <branch>)`,
    );
  if (typeof entry.repository !== "string" || !/^[\w.-]+\/[\w.-]+$/.test(entry.repository))
    fail(`${file}: ${tool}.repository must be owner/name`);
  const seen = repos.get(entry.repository);
  if (seen && seen !== entry.ref)
    fail(`${file}: ${entry.repository} is pinned to two commits; pin every tool of it to one`);
  repos.set(entry.repository, entry.ref);
}
if (repos.size > 1)
  fail(
    `${file} names ${repos.size} tools repositories (${[...repos.keys()].join(", ")}); this workflow checks out one: add a checkout step per repository (docs/deploying.md)`,
  );
const [repository = "", ref = ""] = [...repos.entries()][0] ?? [];
const out = { repository, ref, path: repository ? `.baton-tools/${repository}` : "" };
if (process.env.GITHUB_OUTPUT)
  appendFileSync(
    process.env.GITHUB_OUTPUT,
    Object.entries(out)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(""),
  );
console.log(
  repository
    ? `tools repository ${repository} at ${ref} -> ${out.path}`
    : "every allowlisted tool is in this repository; no tools repository to check out",
);
