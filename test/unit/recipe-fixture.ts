/** A valid recipe as a plain object (fresh on each call) for the recipe/compile tests. */
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";

export const NEW_DIGEST = "6bac9da8b31be6cec71c8d98bf8554ef49329e8edbfdd52589ddfb638e62687a";
export const OLD_DIGEST = "dd1bac8aae5fc9e5f74158f084b2d1a95d58e6bbfd82858cf7dd4cac5bb2a4bd";
export const IMAGE = `ghcr.io/acme/summarizer@sha256:${NEW_DIGEST}`;
export const PREVIOUS_IMAGE = `ghcr.io/acme/summarizer@sha256:${OLD_DIGEST}`;
export const HOST_KEY = "SHA256:q4YbKWRnplKrKDOS5J7OTZmJqlBWdVB4z5qRddVIgJ4";

/** Lane `lane-<letter>` (or `lane-<n>` past 26). */
export function laneId(i: number): string {
  return i < 26 ? `lane-${String.fromCharCode(97 + i)}` : `lane-${i}`;
}

export function lane(i: number): NonNullable<RecipeInput["lanes"]>[number] {
  return {
    id: laneId(i),
    host: `gpu-${i}.serving.acme.internal`,
    user: "deploy",
    host_key: HOST_KEY,
    queue: "summarize",
    capabilities: ["summarize"],
    health_url: `http://gpu-${i}.serving.acme.internal:8080/healthz`,
  };
}

/** Three lanes, waves [a]:10, [b]:50, [c]:100. */
export function goodRecipe(): RecipeInput {
  return {
    name: "summarizer-v7-rollout",
    model: "summarizer-v7",
    image: IMAGE,
    previous_image: PREVIOUS_IMAGE,
    lanes: [lane(0), lane(1), lane(2)],
    rollout: {
      waves: [
        { lanes: ["lane-a"], traffic: 10 },
        { lanes: ["lane-b"], traffic: 50 },
        { lanes: ["lane-c"], traffic: 100 },
      ],
    },
  };
}

/** `n` lanes: a canary wave of one lane at 10%, then the rest at 100%. */
export function wideRecipe(n: number): RecipeInput {
  const lanes = Array.from({ length: n }, (_, i) => lane(i));
  return {
    ...goodRecipe(),
    lanes,
    rollout: {
      waves: [
        { lanes: [laneId(0)], traffic: 10 },
        { lanes: lanes.slice(1).map((l) => l.id), traffic: 100 },
      ],
    },
  };
}
