/**
 * The runner's tool allowlist (scripts/release/allowlist.json) and its contract check. A JSON
 * object maps each tool name to either
 *   - a file path relative to the workspace (a tool of this repository), or
 *   - `{ "repository": "owner/name", "ref": "<40-hex commit sha>", "path": "bin/tool" }`: a tool
 *     from another repository, pinned to one commit. The release-step workflow checks that
 *     repository out at `ref` into {@link toolCheckoutDir} before the action runs, and the
 *     action verifies the checkout is at `ref` and holds `path` at that commit.
 * A branch, a tag or a short sha is refused: each can come to name another commit.
 * Imported by the action (phase 2) and by `baton check --allowlist`.
 */

/** A tool from another repository, pinned to one commit. */
export interface ToolPin {
  /** `owner/name` on the same GitHub (or GitHub Enterprise Server) as this repository. */
  repository: string;
  /** Full commit sha, 40 lowercase hex characters. */
  ref: string;
  /** The tool file, relative to that repository's root. */
  path: string;
}

/** One allowlist entry: a workspace-relative file, or a pinned file of another repository. */
export type AllowlistEntry = string | ToolPin;

/** A problem found by {@link checkToolAllowlist}: where (`<tool>.<field>`), what, and the fix. */
export interface AllowlistProblem {
  path: string;
  message: string;
  fix: string;
}

/** Tool names: what the engine's catalogue and the dispatch payload use. */
export const TOOL_NAME = /^[a-z][a-z0-9-]{0,63}$/;
const REPOSITORY = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\/[A-Za-z0-9._-]{1,100}$/;
const FULL_SHA = /^[0-9a-f]{40}$/;
const PIN_KEYS = ["repository", "ref", "path"] as const;

/**
 * Where the release-step workflow checks out a tools repository, relative to the workspace:
 * `.baton-tools/<owner>/<name>` (the `path:` of its actions/checkout step).
 */
export function toolCheckoutDir(repository: string): string {
  return `.baton-tools/${repository}`;
}

/** A relative path that stays inside its root: no leading `/`, no `..` segment, not empty. */
function pathProblem(p: string): string | null {
  if (p.length === 0) return "is empty";
  if (p.startsWith("/") || /^[A-Za-z]:[\\/]/.test(p)) return "is absolute";
  if (p.split(/[\\/]/).includes("..")) return "leaves its root with `..`";
  if (p.includes("\0")) return "holds a NUL character";
  return null;
}

/** What an unpinned `ref` looks like, for the message. */
function refKind(ref: string): string {
  if (/^[0-9a-fA-F]{40}$/.test(ref)) return "a commit sha with upper-case letters";
  if (/^[0-9a-fA-F]{4,39}$/.test(ref)) return "a short commit sha, which can become ambiguous";
  if (/^[0-9a-fA-F]{41,}$/.test(ref)) return "not a 40-character commit sha";
  if (ref.startsWith("refs/tags/") || /^v?\d+(\.\d+)*([-+].*)?$/.test(ref))
    return "a tag, which can be moved to another commit";
  return "a branch or tag name, which can move to another commit";
}

/**
 * Checks a parsed allowlist (any JSON value). Returns every problem at once, each naming the
 * field (`<tool>` or `<tool>.repository|ref|path`) and the fix; an empty list means valid.
 * Also refuses one repository pinned to two commits (both would share one checkout).
 */
export function checkToolAllowlist(value: unknown): AllowlistProblem[] {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return [
      {
        path: "(allowlist)",
        message: "the allowlist is not a JSON object",
        fix: 'Write a JSON object mapping each tool name to a file, e.g. {"run-smoke": "scripts/release/dist/run-smoke.mjs"}.',
      },
    ];
  }
  const problems: AllowlistProblem[] = [];
  const pinned = new Map<string, { tool: string; ref: string }>();
  for (const [tool, entry] of Object.entries(value as Record<string, unknown>)) {
    if (!TOOL_NAME.test(tool)) {
      problems.push({
        path: JSON.stringify(tool),
        message: `tool name ${JSON.stringify(tool.slice(0, 80))} is not a tool name`,
        fix: "Use lower-case letters, digits and hyphens, starting with a letter (at most 64), as the engine's catalogue names tools.",
      });
      continue;
    }
    if (typeof entry === "string") {
      const p = pathProblem(entry);
      if (p)
        problems.push({
          path: tool,
          message: `the file of \`${tool}\` ${p}`,
          fix: "Give the tool's file relative to the workspace, e.g. scripts/release/dist/run-smoke.mjs.",
        });
      continue;
    }
    if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
      problems.push({
        path: tool,
        message: `the entry of \`${tool}\` is neither a file path nor a {repository, ref, path} object`,
        fix: `Map \`${tool}\` to a workspace-relative file, or to {"repository": "owner/name", "ref": "<40-hex commit sha>", "path": "bin/${tool}"}.`,
      });
      continue;
    }
    const e = entry as Record<string, unknown>;
    for (const k of Object.keys(e)) {
      if (!(PIN_KEYS as readonly string[]).includes(k))
        problems.push({
          path: `${tool}.${k}`,
          message: `unknown field \`${k}\` in the entry of \`${tool}\``,
          fix: "A tool from another repository has exactly `repository`, `ref` and `path`; remove the field.",
        });
    }
    const repo = e.repository;
    if (typeof repo !== "string" || !REPOSITORY.test(repo)) {
      problems.push({
        path: `${tool}.repository`,
        message:
          repo === undefined
            ? `\`${tool}\` has no repository`
            : `${JSON.stringify(String(repo).slice(0, 120))} is not an owner/name repository`,
        fix: 'Set `repository` to the tools repository as owner/name, e.g. "acme/fleet-tools" (no URL, no .git).',
      });
    }
    const ref = e.ref;
    if (typeof ref !== "string" || !FULL_SHA.test(ref)) {
      const shown = typeof ref === "string" ? ref.slice(0, 80) : String(ref);
      problems.push({
        path: `${tool}.ref`,
        message:
          typeof ref === "string"
            ? `ref \`${shown}\` of \`${tool}\` is ${refKind(ref)}; a tool from another repository must be pinned to one commit`
            : `\`${tool}\` has no ref; a tool from another repository must be pinned to one commit`,
        fix: `Set \`ref\` to the full 40-character commit sha (lower case): \`git ls-remote https://github.com/${typeof repo === "string" ? repo : "owner/name"} ${typeof ref === "string" && ref ? shown : "main"}\` or \`git rev-parse <ref>\` in a clone prints it.`,
      });
    } else if (typeof repo === "string") {
      const other = pinned.get(repo);
      if (other && other.ref !== ref)
        problems.push({
          path: `${tool}.ref`,
          message: `\`${tool}\` pins ${repo} at ${ref} but \`${other.tool}\` pins it at ${other.ref}; one repository has one checkout`,
          fix: `Pin every tool of ${repo} to the same commit.`,
        });
      else pinned.set(repo, { tool, ref });
    }
    const path = e.path;
    const p = typeof path === "string" ? pathProblem(path) : "is missing";
    if (p)
      problems.push({
        path: `${tool}.path`,
        message: `the path of \`${tool}\` in its repository ${p}`,
        fix: `Set \`path\` to the tool file relative to the root of ${typeof repo === "string" ? repo : "the repository"}, e.g. "bin/${tool}".`,
      });
  }
  return problems;
}

/** One line per problem: `<path>: <message>. Fix: <fix>`. */
export function allowlistProblemLines(problems: readonly AllowlistProblem[]): string[] {
  return problems.map((p) => `${p.path}: ${p.message}. Fix: ${p.fix}`);
}
