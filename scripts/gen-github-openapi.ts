// Writes test/support/github-openapi.json: the operations of GitHub's REST API that Baton calls,
// cut from GitHub's own OpenAPI description (the `@octokit/openapi` package's
// generated/api.github.com.json) with every component they reference, and the package version
// it came from (`x-baton-source`). The test helper test/support/github-openapi.ts checks the
// GitHub stand-in's requests and answers against it. The whole package is 385 MB; the cut is
// about 100 KB.
//
//   npm run gen:github-openapi [-- path/to/api.github.com.json]
//
// Without a path it fetches @octokit/openapi@VERSION with `npm pack` into a temporary folder
// (nothing is installed). With a path, say which version the file is with OCTOKIT_OPENAPI_VERSION
// if it is not VERSION. To move to a newer description, change VERSION and run the script.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const VERSION = "23.0.2";
const FILE = "generated/api.github.com.json";

/**
 * [method, path template, who calls it]. Everything Baton sends to GitHub: the engine's
 * dispatcher (and its App token exchange through @octokit/auth-app), deployments port, GitHub
 * notifier, and `baton start-pending`'s attestation lookup.
 */
export const OPERATIONS: readonly (readonly [method: string, template: string, caller: string])[] =
  [
    ["post", "/repos/{owner}/{repo}/dispatches", "adapters/github/dispatcher.ts"],
    ["post", "/app/installations/{installation_id}/access_tokens", "@octokit/auth-app (App auth)"],
    ["post", "/repos/{owner}/{repo}/deployments", "adapters/github/deployments.ts"],
    ["get", "/repos/{owner}/{repo}/deployments", "adapters/github/deployments.ts"],
    [
      "post",
      "/repos/{owner}/{repo}/deployments/{deployment_id}/statuses",
      "adapters/github/deployments.ts",
    ],
    [
      "get",
      "/repos/{owner}/{repo}/deployments/{deployment_id}/statuses",
      "adapters/github/deployments.ts",
    ],
    ["post", "/repos/{owner}/{repo}/commits/{commit_sha}/comments", "adapters/notifier/github.ts"],
    ["get", "/repos/{owner}/{repo}/attestations/{subject_digest}", "cli/github-attestations.ts"],
  ];

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "test/support/github-openapi.json");

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
interface Spec {
  openapi: string;
  info: Json;
  paths: Record<string, Record<string, Json>>;
  components: Record<string, Record<string, Json>>;
}

/** Reads the description from `path`, or from a packed @octokit/openapi@VERSION. */
function readDescription(path: string | undefined): { spec: Spec; version: string } {
  if (path)
    return {
      spec: JSON.parse(readFileSync(path, "utf8")),
      version: process.env.OCTOKIT_OPENAPI_VERSION ?? VERSION,
    };
  const dir = mkdtempSync(join(tmpdir(), "baton-octokit-openapi-"));
  try {
    const packed = execFileSync(
      "npm",
      ["pack", `@octokit/openapi@${VERSION}`, "--pack-destination", dir, "--silent"],
      { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] },
    )
      .trim()
      .split("\n")
      .pop() as string;
    execFileSync("tar", ["-xzf", join(dir, packed), "-C", dir, `package/${FILE}`]);
    return { spec: JSON.parse(readFileSync(join(dir, "package", FILE), "utf8")), version: VERSION };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Copies `value` without the `examples` of media types and parameters (GitHub's sample
 * payloads, most of the description's size, never used for checking). Keys inside
 * `properties` are field names, kept whatever they are called.
 */
function withoutExamples(value: Json, underProperties = false): Json {
  if (Array.isArray(value)) return value.map((v) => withoutExamples(v));
  if (value === null || typeof value !== "object") return value;
  const copy: { [key: string]: Json } = {};
  for (const [k, v] of Object.entries(value)) {
    if (!underProperties && k === "examples" && v && typeof v === "object" && !Array.isArray(v))
      continue;
    copy[k] = withoutExamples(v, !underProperties && k === "properties");
  }
  return copy;
}

/** Every `#/components/<kind>/<name>` that `value` refers to. */
function refsOf(value: Json, found = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) refsOf(v, found);
  else if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (k === "$ref" && typeof v === "string") found.add(v);
      else refsOf(v, found);
    }
  }
  return found;
}

function cut(spec: Spec, version: string) {
  const paths: Record<string, Record<string, Json>> = {};
  for (const [method, template] of OPERATIONS) {
    const op = spec.paths[template]?.[method];
    if (!op)
      throw new Error(`@octokit/openapi@${version} has no ${method.toUpperCase()} ${template}`);
    const parameters = spec.paths[template]?.parameters;
    const entry =
      paths[template] ?? (parameters ? { parameters: withoutExamples(parameters) } : {});
    paths[template] = { ...entry, [method]: withoutExamples(op) };
  }
  const components: Record<string, Record<string, Json>> = {};
  const pending = [...refsOf(paths)];
  const seen = new Set();
  while (pending.length > 0) {
    const ref = pending.pop() as string;
    if (seen.has(ref)) continue;
    seen.add(ref);
    const m = /^#\/components\/([^/]+)\/([^/]+)$/.exec(ref);
    if (!m) throw new Error(`unexpected $ref ${ref}`);
    const [, kind = "", name = ""] = m;
    const target = spec.components[kind]?.[name];
    if (target === undefined) throw new Error(`dangling $ref ${ref}`);
    const kept = withoutExamples(target);
    components[kind] = { ...components[kind], [name]: kept };
    pending.push(...refsOf(kept));
  }
  for (const [kind, entries] of Object.entries(components)) {
    components[kind] = Object.fromEntries(
      Object.entries(entries).sort(([a], [b]) => (a < b ? -1 : 1)),
    );
  }
  return {
    openapi: spec.openapi,
    info: spec.info,
    "x-baton-source": {
      package: "@octokit/openapi",
      version,
      file: FILE,
      generator: "scripts/gen-github-openapi.ts",
      operations: OPERATIONS.map(([method, template]) => `${method.toUpperCase()} ${template}`),
    },
    paths,
    components,
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const { spec, version } = readDescription(process.argv[2]);
  const doc = cut(spec, version);
  writeFileSync(out, `${JSON.stringify(doc, null, 2)}\n`);
  const kinds = Object.entries(doc.components).map(([k, v]) => `${Object.keys(v).length} ${k}`);
  console.log(
    `wrote ${out}: ${OPERATIONS.length} operations, ${kinds.join(", ")} from @octokit/openapi@${version}`,
  );
}
