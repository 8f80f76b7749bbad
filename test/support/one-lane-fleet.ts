/**
 * The one-lane fleet the multi-engine scenarios drive (test/chaos/many-engines.ts,
 * bench/engines.bench.ts): release `i` is a recipe of one lane `<lane>i-a` for its own model
 * `<name>-model-i` (one wave at 100%), and the control plane declares each of those lanes
 * beforehand with all its model's traffic (a start reads it as the observed baseline; the
 * control plane never creates a lane).
 */
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";

/** Names of one fleet: recipes `<name>-i`, models `<name>-model-i`, lanes `<lane>i-a`. */
export interface OneLaneFleet {
  /** Recipe and model prefix, also the image's repository name (e.g. "bench"). */
  name: string;
  /** Lane id prefix (e.g. "b"). */
  lane: string;
}

/** Lane id of release `i` of `fleet`. */
export function oneLaneId(fleet: OneLaneFleet, i: number): string {
  return `${fleet.lane}${i}-a`;
}

/** The recipe of release `i`: one lane (loopback host, unreachable health URL), one wave. */
export function oneLaneRecipe(fleet: OneLaneFleet, i: number): RecipeInput {
  const lane = oneLaneId(fleet, i);
  return {
    name: `${fleet.name}-${i}`,
    model: `${fleet.name}-model-${i}`,
    image: `ghcr.io/acme/${fleet.name}:v2@sha256:${"b".repeat(64)}`,
    previous_image: `ghcr.io/acme/${fleet.name}:v1@sha256:${"a".repeat(64)}`,
    lanes: [
      {
        id: lane,
        host: "127.0.0.1",
        user: "deploy",
        host_key: "SHA256:q4YbKWRnplKrKDOS5J7OTZmJqlBWdVB4z5qRddVIgJ4",
        queue: `q${i}`,
        capabilities: ["summarize"],
        health_url: "http://127.0.0.1:9/healthz",
      },
    ],
    rollout: { waves: [{ lanes: [lane], traffic: 100 }] },
  } as unknown as RecipeInput;
}

/**
 * The control plane's lanes for releases 0…count-1 of `fleet` (for `core.seed`): each lane
 * serving its model at weight 100 with capability `summarize`.
 */
export function oneLaneSeed(
  fleet: OneLaneFleet,
  count: number,
): { id: string; model: string; weight: number; capabilities: string[] }[] {
  return Array.from({ length: count }, (_, i) => ({
    id: oneLaneId(fleet, i),
    model: `${fleet.name}-model-${i}`,
    weight: 100,
    capabilities: ["summarize"],
  }));
}
