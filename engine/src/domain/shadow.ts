/**
 * Shadow traffic (docs/recipes.md "Shadow phase"): a wave with `traffic: 0` and a `shadow:`
 * section deploys the candidate on its lanes with no exposure, and the router mirrors a capped
 * share of the model's requests to them, discarding their answers. Here: the recipe's fields
 * (schemas), the contract check's rules, and the environment a shadow-safe lane's container is
 * given. Pure.
 */
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";
import type { Problem } from "./errors.ts";
import { asArray as arr, asObject as obj } from "./json.ts";

/** Largest `rate_per_s` a recipe may declare (mirrored requests per second). */
export const MAX_SHADOW_RATE_PER_S = 10_000;

/**
 * A lane's declaration that mirrored requests cannot cause side effects there: its cache and
 * state live in namespaces of their own, its tools are sandboxed and its egress is restricted.
 * Each is passed to the lane's container as declared environment ({@link shadowEnv}).
 */
export const ShadowSafe = lazySchema(() =>
  z
    .object({
      cache_namespace: z
        .string()
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/,
          "cache_namespace must be 1–64 letters, digits, '.', '_', ':' or '-' (e.g. shadow-summarizer)",
        )
        .describe("Cache namespace the lane uses instead of the shared one."),
      state_namespace: z
        .string()
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/,
          "state_namespace must be 1–64 letters, digits, '.', '_', ':' or '-' (e.g. shadow-summarizer)",
        )
        .describe("State (database, queue, session store) namespace the lane writes to."),
      tools: z
        .literal("sandboxed", { error: "tools must be `sandboxed` on a shadow-safe lane" })
        .describe("Tools the model calls run in a sandbox with no real effect."),
      egress: z
        .literal("restricted", { error: "egress must be `restricted` on a shadow-safe lane" })
        .describe(
          "The container reaches no network beyond what serving needs (no provider quota).",
        ),
    })
    .strict(),
);
export type ShadowSafe = z.infer<typeof ShadowSafe>;

/** A shadow phase's caps: the share of the model's requests mirrored and a rate limit. */
export const WaveShadow = lazySchema(() =>
  z
    .object({
      share: z
        .number()
        .int("shadow.share must be a whole percent")
        .min(1, "shadow.share must be 1..100 (a percent of the model's requests)")
        .max(100, "shadow.share must be 1..100 (a percent of the model's requests)")
        .describe("Percent of the model's requests mirrored to the wave's lanes (at most)."),
      rate_per_s: z
        .number()
        .int("shadow.rate_per_s must be a whole number of requests per second")
        .min(1, `shadow.rate_per_s must be 1..${MAX_SHADOW_RATE_PER_S}`)
        .max(MAX_SHADOW_RATE_PER_S, `shadow.rate_per_s must be 1..${MAX_SHADOW_RATE_PER_S}`)
        .describe("Mirrored requests per second, at most, whatever the share."),
    })
    .strict(),
);
export type WaveShadow = z.infer<typeof WaveShadow>;

/** The model's word on shadow traffic: `never` refuses any shadow phase. */
export const ShadowPolicy = lazySchema(() =>
  z.enum(["never", "allowed"], {
    error:
      "shadow must be `never` (this model's requests must not be mirrored) or `allowed` (the default)",
  }),
);

/**
 * The environment a shadow-safe lane's container is given (names fixed, values as declared):
 * what the lane's deploy passes to the container so that the server suppresses side effects.
 */
export function shadowEnv(s: ShadowSafe): Record<string, string> {
  return {
    BATON_SHADOW_SAFE: "1",
    BATON_CACHE_NAMESPACE: s.cache_namespace,
    BATON_STATE_NAMESPACE: s.state_namespace,
    BATON_TOOLS: s.tools,
    BATON_EGRESS: s.egress,
  };
}

/**
 * The contract check's rules for shadow phases (the schema checks each field's form): a wave
 * with `shadow` has `traffic: 0` and comes before any wave with real exposure; each of its lanes
 * declares `shadow_safe`; a recipe that says `shadow: never` has none. Reads only the well-typed
 * parts of `input`; never throws.
 */
export function shadowProblems(input: unknown): Problem[] {
  const root = obj(input);
  if (!root) return [];
  const problems: Problem[] = [];
  const lanes = arr(root.lanes).map((l) => obj(l));
  const laneIndex = new Map<string, number>();
  lanes.forEach((l, i) => {
    if (typeof l?.id === "string" && !laneIndex.has(l.id)) laneIndex.set(l.id, i);
  });
  let exposed: number | null = null;
  arr(obj(root.rollout)?.waves).forEach((raw, w) => {
    const wave = obj(raw);
    if (!wave) return;
    if (wave.shadow === undefined) {
      if (exposed === null && typeof wave.traffic === "number" && wave.traffic > 0) exposed = w;
      return;
    }
    const at = `rollout.waves.${w}.shadow`;
    if (root.shadow === "never") {
      problems.push({
        path: at,
        message: `wave ${w + 1} is a shadow phase, but this recipe says \`shadow: never\`: the model's requests must not be mirrored`,
        fix: `Remove \`shadow\` from wave ${w + 1} (and give the wave real traffic or drop it); only the model's owner may change \`shadow: never\`.`,
      });
    }
    if (typeof wave.traffic === "number" && wave.traffic !== 0) {
      problems.push({
        path: `rollout.waves.${w}.traffic`,
        message: `wave ${w + 1} is a shadow phase with traffic ${wave.traffic}%: a shadow phase exposes no user to the candidate`,
        fix: `Set \`traffic: 0\` on wave ${w + 1}, or remove its \`shadow\` section.`,
      });
    } else if (exposed !== null) {
      problems.push({
        path: at,
        message: `wave ${w + 1} is a shadow phase after wave ${exposed + 1} already exposed users to the candidate`,
        fix: "Put the shadow phase before the first wave with traffic above 0.",
      });
    }
    arr(wave.lanes).forEach((id, k) => {
      if (typeof id !== "string") return;
      const i = laneIndex.get(id);
      if (i === undefined || lanes[i]?.shadow_safe !== undefined) return;
      problems.push({
        path: `rollout.waves.${w}.lanes.${k}`,
        message: `lane \`${id}\` takes mirrored requests in wave ${w + 1} but does not declare \`shadow_safe\`, so a mirrored request could write its cache or state, run a tool or spend provider quota`,
        fix: `Declare \`shadow_safe: {cache_namespace: …, state_namespace: …, tools: sandboxed, egress: restricted}\` on lanes.${i} (and make its server honour them), or move \`${id}\` to a wave without \`shadow\`.`,
      });
    });
  });
  return problems;
}
