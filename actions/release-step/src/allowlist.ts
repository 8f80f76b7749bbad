/**
 * Tool resolution (phase 2) and verification (phase 3). The allowlist is a fixed JSON map
 * `name -> file path relative to the workspace`; the tool name must equal a key exactly (F05)
 * and the file must stay inside the workspace.
 */
import { accessSync, constants, readFileSync, statSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";
import { z } from "zod";

const Allowlist = z.record(z.string().regex(/^[a-z][a-z0-9-]{0,63}$/), z.string().min(1));

/** Resolves `tool` to an absolute file path. Throws `Error("[action] …")` when not allowlisted. */
export function resolveTool(workspace: string, allowlistPath: string, tool: string): string {
  const file = resolve(workspace, allowlistPath);
  let map: Record<string, string>;
  try {
    map = Allowlist.parse(JSON.parse(readFileSync(file, "utf8")));
  } catch (e) {
    throw new Error(
      `[action] cannot read the tool allowlist ${file}: ${(e as Error).message.split("\n")[0]}`,
    );
  }
  // Own keys only: names such as "__proto__" or "constructor" must not resolve.
  if (!Object.hasOwn(map, tool)) {
    throw new Error(
      `[action] tool '${tool}' is not in the allowlist (${Object.keys(map).join(", ")}); nothing was provisioned or run`,
    );
  }
  const target = resolve(workspace, map[tool] as string);
  const rel = relative(resolve(workspace), target);
  if (rel.startsWith("..") || isAbsolute(rel)) {
    throw new Error(
      `[action] allowlist entry for '${tool}' points outside the workspace: ${map[tool]}`,
    );
  }
  return target;
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
