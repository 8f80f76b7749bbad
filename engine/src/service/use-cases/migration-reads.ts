/**
 * What a migration's contract depends on in the store (docs/recipes.md "Migrations"): the
 * release that activated the new form. Reads only.
 */
import type { Release } from "../../domain/types.ts";
import type { Store } from "../../ports/store.ts";

/** How many of the latest succeeded releases the lookup reads. */
export const ACTIVATION_SCAN = 200;

/**
 * The latest succeeded release of `model` whose migration `id` ran its expand and migrate
 * (it activated the new form), among the latest `ACTIVATION_SCAN` succeeded releases; null
 * when none did.
 */
export async function activatingRelease(
  store: Store,
  model: string,
  id: string,
): Promise<Release | null> {
  const succeeded = (await store.listReleases({ state: "succeeded", limit: ACTIVATION_SCAN }))
    .filter((s) => s.model === model)
    .sort((a, b) => Number(b.id.slice(1)) - Number(a.id.slice(1)));
  for (const s of succeeded) {
    const r = await store.getRelease(s.id);
    const m = r?.manifest.migration;
    if (r && m?.id === id && m.steps.includes("migrate")) return r;
  }
  return null;
}
