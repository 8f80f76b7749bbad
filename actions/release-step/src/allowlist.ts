/**
 * Tool resolution (phase 2) and verification (phase 3). The allowlist is a fixed JSON map
 * (engine/src/protocol/tool-allowlist.ts): `name -> file path relative to the workspace`, or
 * `name -> {repository, ref, path}` for a tool from another repository pinned to one commit and
 * checked out by the workflow into `.baton-tools/<owner>/<name>`. The tool name must equal a key
 * exactly (F05) and the file must stay inside the workspace (or its checkout).
 */
import { execFileSync } from "node:child_process";
import { accessSync, constants, existsSync, readFileSync, statSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";
import {
  type AllowlistEntry,
  allowlistProblemLines,
  checkToolAllowlist,
  type ToolPin,
  toolCheckoutDir,
} from "../../../engine/src/protocol/tool-allowlist.ts";

/** The allowlist fails its contract check; `problems` name the field and the fix. */
export class AllowlistError extends Error {
  constructor(
    message: string,
    readonly problems: string[],
  ) {
    super(message);
  }
}

/** A resolved tool: its absolute file, and for a tool of another repository its pin. */
export interface ResolvedTool {
  path: string;
  pin?: ToolPin & { checkout: string };
}

function inside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel === "" || !(rel.startsWith("..") || isAbsolute(rel));
}

/**
 * Resolves `tool` through the allowlist file. Throws `Error("[action] …")` when the file cannot
 * be read or the tool is not allowlisted, and {@link AllowlistError} when the allowlist fails
 * its check (e.g. an unpinned `ref`).
 */
export function resolveTool(workspace: string, allowlistPath: string, tool: string): ResolvedTool {
  const file = resolve(workspace, allowlistPath);
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new Error(
      `[action] cannot read the tool allowlist ${file}: ${(e as Error).message.split("\n")[0]}`,
    );
  }
  const problems = checkToolAllowlist(value);
  if (problems.length > 0) {
    throw new AllowlistError(
      `[action] the tool allowlist ${file} fails its check (${problems.length} problem${problems.length === 1 ? "" : "s"}); nothing was provisioned or run`,
      allowlistProblemLines(problems),
    );
  }
  const map = value as Record<string, AllowlistEntry>;
  // Own keys only: names such as "__proto__" or "constructor" must not resolve.
  if (!Object.hasOwn(map, tool)) {
    throw new Error(
      `[action] tool '${tool}' is not in the allowlist (${Object.keys(map).join(", ")}); nothing was provisioned or run`,
    );
  }
  const entry = map[tool] as AllowlistEntry;
  const root = resolve(workspace);
  if (typeof entry === "string") {
    const target = resolve(root, entry);
    if (!inside(root, target))
      throw new Error(
        `[action] allowlist entry for '${tool}' points outside the workspace: ${entry}`,
      );
    return { path: target };
  }
  const checkout = resolve(root, toolCheckoutDir(entry.repository));
  const target = resolve(checkout, entry.path);
  if (!inside(checkout, target))
    throw new Error(
      `[action] allowlist entry for '${tool}' points outside its checkout: ${entry.path}`,
    );
  return { path: target, pin: { ...entry, checkout } };
}

/** Runs git in `dir`; returns trimmed stdout, or null when git fails (or is missing). */
function git(dir: string, args: string[]): string | null {
  try {
    return execFileSync("git", ["-c", `safe.directory=${dir}`, "-C", dir, ...args], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 30_000,
      env: { ...process.env, GIT_TERMINAL_PROMPT: "0", GIT_OPTIONAL_LOCKS: "0" },
    }).trim();
  } catch {
    return null;
  }
}

/**
 * Phase 3 for a tool of another repository: null when its checkout is at the pinned commit
 * (`git rev-parse HEAD` equals `ref`), the commit holds `path`, and the work-tree file is the
 * committed one; else the reason (class tool_not_found), naming the checkout step that fixes it.
 */
export function pinProblem(tool: string, pin: NonNullable<ResolvedTool["pin"]>): string | null {
  const where = `${pin.repository} at ${pin.ref}`;
  const step = `actions/checkout with repository: ${pin.repository}, ref: ${pin.ref}, path: ${toolCheckoutDir(pin.repository)}, persist-credentials: false`;
  if (!existsSync(pin.checkout))
    return `[action] tool '${tool}' comes from ${where}, but ${pin.checkout} does not exist; check the repository out before this step (${step})`;
  const head = git(pin.checkout, ["rev-parse", "--verify", "HEAD^{commit}"]);
  if (head === null)
    return `[action] tool '${tool}' comes from ${where}, but ${pin.checkout} is not a git checkout (git rev-parse HEAD failed; is git installed on the runner?); check it out with ${step}`;
  if (head.toLowerCase() !== pin.ref)
    return `[action] tool '${tool}' is pinned to ${where}, but the checkout in ${pin.checkout} is at ${head}; check out the pinned commit (${step}), or pin the new commit in the allowlist after review`;
  if (git(pin.checkout, ["cat-file", "-e", `${pin.ref}:${pin.path}`]) === null)
    return `[action] tool '${tool}': ${pin.path} is not in ${where}; correct \`path\` in the allowlist (a file of that commit) or pin a commit that has it`;
  if (git(pin.checkout, ["diff", "--quiet", pin.ref, "--", pin.path]) === null)
    return `[action] tool '${tool}': ${pin.path} in ${pin.checkout} differs from ${where} (changed after the checkout); nothing may change a pinned tool before it runs`;
  return null;
}

/** Phase 3: null when the file is present and executable, else the reason (class tool_not_found). */
export function toolProblem(path: string): string | null {
  try {
    if (!statSync(path).isFile()) return `[action] tool file ${path} is not a regular file`;
    accessSync(path, constants.X_OK);
    return null;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT")
      return `[action] tool file ${path} is missing; check out the repository (actions/checkout) before this step and run npm run build`;
    if (code === "EACCES")
      return `[action] tool file ${path} is not executable; commit it with mode 755 (git update-index --chmod=+x)`;
    return `[action] tool file ${path} cannot be used: ${(e as Error).message}`;
  }
}
