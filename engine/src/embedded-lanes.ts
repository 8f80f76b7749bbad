/** Lanes for the embedded control plane from recipe files (BATON_EMBEDDED_LANES). */
import { readFileSync } from "node:fs";
import type { ControlPlaneCore } from "./control-plane/core.ts";
import type { Manifest } from "./domain/types.ts";
import { compileRecipeText } from "./recipes/compile-text.ts";

/**
 * Declares on the embedded control plane the lanes of the recipe in `file` that it does not
 * know yet: the recipe's model, baseline weight, no marker, capabilities not advertised (the
 * state a first release expects). Lanes it knows are left as they are (a restart keeps what
 * releases did). For trying the engine without a control plane of your own
 * (BATON_EMBEDDED_LANES). Returns a one-line summary.
 * @throws Error `[engine] BATON_EMBEDDED_LANES: <file>: …` when the file is unreadable or not
 *   a valid recipe.
 */
export function declareRecipeLanes(core: ControlPlaneCore, file: string): string {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new Error(
      `[engine] BATON_EMBEDDED_LANES: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? String(e)}); name a recipe file`,
    );
  }
  let manifest: Manifest;
  try {
    manifest = compileRecipeText(text, file).manifest;
  } catch (e) {
    throw new Error(
      `[engine] BATON_EMBEDDED_LANES: ${file} is not a valid recipe: ${(e as Error).message}; run baton check ${file}`,
    );
  }
  const known = new Set(core.lanes().map((l) => l.id));
  const added = manifest.lanes.filter((l) => !known.has(l.id));
  core.seed(
    added.map((l) => ({
      id: l.id,
      model: manifest.model,
      weight: l.baseline_weight,
      excluded: false,
      capabilities: [...l.capabilities].sort(),
      advertised: false,
    })),
  );
  const kept = manifest.lanes.length - added.length;
  return `embedded control plane: ${added.length} lane(s) of model ${manifest.model} declared from ${file}${kept ? `, ${kept} already known and left as they are` : ""}`;
}
