/**
 * Points a recipe at the embedded fleet: every lane's host, port, user, host-key pin and
 * health URL are rewritten to the embedded SSH target, and `tool_revision` is set to the commit
 * the local runner reports as GITHUB_SHA (so the preflight's revision check runs for real).
 * Everything else (images, waves, policy) is the recipe as written.
 */
import { BatonError } from "../domain/errors.ts";
import type { RecipeInput } from "../domain/recipe.ts";
import type { EmbeddedTarget } from "../embedded-target/index.ts";
import { compileRecipeText } from "../recipes/compile-text.ts";
import { parseRecipeText } from "../recipes/parse.ts";
import { readRecipeFileText } from "../recipes/read-file.ts";
import type { FleetLane } from "./fleet.ts";

/**
 * Reads a recipe file (YAML or JSON) and checks it as `baton check` does.
 * @throws Error naming the file when it cannot be read; BatonError whose message and problems
 *   name `<file>:<line>:<col>` and the fix when it cannot be parsed or fails the contract check.
 */
export function readRecipeFile(file: string): RecipeInput {
  let text: string;
  try {
    text = readRecipeFileText(file);
  } catch (e) {
    if (e instanceof BatonError) throw e;
    throw new Error(`[demo] cannot read recipe ${file}: ${(e as Error).message}`);
  }
  // The same parse and contract check as `baton check`, so problems keep file:line:col.
  compileRecipeText(text, file);
  return parseRecipeText(text, file).value as RecipeInput;
}

/** Lane ids of a recipe, in order (empty when it has none). */
export function laneIdsOf(recipe: RecipeInput): string[] {
  return (recipe.lanes ?? []).map((l) => String((l as { id?: unknown }).id ?? ""));
}

/**
 * A copy of `recipe` aimed at the embedded target.
 * @param toolRevision commit sha the local runner reports (GITHUB_SHA), or null to drop the pin.
 * @param deadlines optional `deadlines` override (ms), e.g. short start deadlines in tests.
 */
export function pointRecipeAtFleet(
  recipe: RecipeInput,
  target: Pick<EmbeddedTarget, "host" | "port" | "user" | "hostKeyPin">,
  lanes: ReadonlyMap<string, FleetLane>,
  toolRevision: string | null,
  deadlines?: { start_ms?: number; callback_ms?: number },
): RecipeInput {
  const out = structuredClone(recipe) as RecipeInput & Record<string, unknown>;
  out.lanes = (recipe.lanes ?? []).map((l) => {
    const lane = lanes.get(String(l.id));
    if (!lane) throw new Error(`[demo] lane ${String(l.id)} has no place on the embedded target`);
    return {
      ...l,
      host: target.host,
      port: target.port,
      user: target.user,
      host_key: target.hostKeyPin,
      health_url: lane.healthUrl,
    };
  });
  if (toolRevision) out.tool_revision = toolRevision;
  else delete out.tool_revision;
  if (deadlines) out.deadlines = { ...(recipe.deadlines ?? {}), ...deadlines };
  return out;
}
