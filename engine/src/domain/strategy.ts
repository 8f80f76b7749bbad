/**
 * Release strategies (docs/recipes.md "Strategies"): how a recipe's waves expose the candidate.
 * Every strategy compiles to the same step table (the catalogue's rows, the parallel-wave walk);
 * only the percent each wave sets differs, and which lanes the waves must cover.
 *
 * - `canary` (the default): each wave declares `traffic`, the absolute percent of the model's
 *   traffic on the lanes deployed so far.
 * - `rolling`: the waves are batches and declare no percent; traffic follows the lanes in
 *   service: after a batch every lane carries its baseline weight again, so the candidate's
 *   share is the deployed lanes' share of the baseline capacity, never more.
 * - `blue_green`: the waves deploy the green environment dark (0%); lanes in no wave are the
 *   blue environment, which keeps `previous_image` and stays in service (warm). The last wave's
 *   `set_traffic` moves every request to green in one write; compensation's backward write of it
 *   is one switch back. A wave before the last may declare a percent (1–99): a concurrent-traffic
 *   canary phase, green beside blue as its control, gated like any canary wave. After the
 *   release succeeded, blue stays warm until its rollback window closes (domain/blue-green.ts).
 */
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";
import type { Problem } from "./errors.ts";
import { asArray as arr, asObject as obj } from "./json.ts";

/** The strategies a recipe can name. */
export const STRATEGIES = ["canary", "rolling", "blue_green"] as const;
export type StrategyName = (typeof STRATEGIES)[number];

/** The recipe's `strategy` field. */
export const Strategy = lazySchema(() =>
  z
    .enum(STRATEGIES, { error: `strategy must be one of ${STRATEGIES.join(", ")}` })
    .describe(
      "How the waves expose the candidate: canary (default; each wave declares its traffic %), rolling (waves are batches; traffic follows the lanes in service), blue_green (waves deploy the green lanes dark, then traffic switches at once; lanes in no wave are blue and stay warm; a wave before the last may declare a canary-phase percent).",
    ),
);

/** The lanes of a blue-green manifest in no wave: its blue (old) environment, in manifest order. */
export function blueLanes(m: {
  lanes: readonly { id: string }[];
  waves: readonly { lanes: readonly string[] }[];
}): string[] {
  const inWave = new Set(m.waves.flatMap((w) => w.lanes));
  return m.lanes.filter((l) => !inWave.has(l.id)).map((l) => l.id);
}

/** The strategy a recipe (raw or parsed) names; `canary` when it names none or an unknown one. */
export function strategyOf(input: unknown): StrategyName {
  const s = obj(input)?.strategy;
  return STRATEGIES.includes(s as StrategyName) ? (s as StrategyName) : "canary";
}

/**
 * The absolute percent each wave sets, for a strategy that derives them (`rolling`,
 * `blue_green`); `declared` (the waves' own `traffic`) under `canary`.
 * - rolling: the deployed lanes' share of the summed baseline weights, rounded down (the
 *   candidate never gets more than its capacity), the last wave 100. All-zero baselines count
 *   every lane equally.
 * - blue_green: 100 for the last wave (the switch); before it the wave's own `traffic` (a
 *   canary phase); a wave without one keeps the percent in force (0 before any: green deployed
 *   dark).
 * `waves` are lane id lists; `baseline` maps a lane id to its baseline weight (%).
 */
export function wavePercents(
  strategy: StrategyName,
  waves: readonly { lanes: readonly string[]; traffic?: number | undefined }[],
  baseline: ReadonlyMap<string, number>,
): number[] {
  const last = waves.length - 1;
  if (strategy === "canary") return waves.map((w) => w.traffic ?? 0);
  if (strategy === "blue_green") {
    let inForce = 0;
    return waves.map((w, i) => {
      inForce = i === last ? 100 : Math.max(inForce, w.traffic ?? 0);
      return inForce;
    });
  }
  const total = [...baseline.values()].reduce((a, b) => a + b, 0);
  const weightOf = (id: string) => (total > 0 ? (baseline.get(id) ?? 0) : 1);
  const sum = total > 0 ? total : baseline.size;
  let deployed = 0;
  return waves.map((w, i) => {
    for (const id of w.lanes) deployed += weightOf(id);
    return i === last ? 100 : Math.min(100, Math.floor((deployed * 100) / sum));
  });
}

/**
 * The percent each wave of a raw recipe sets, as far as the recipe alone tells (the recipe's
 * weights, or an equal split, stand in for the observed baseline): the waves' own `traffic`
 * under canary (undefined where it is not a number), derived under rolling and blue_green (a
 * blue-green canary phase's own percent included).
 * For checks that run before the recipe is parsed; never throws.
 */
export function declaredPercents(input: unknown): (number | undefined)[] {
  const root = obj(input);
  const waves = arr(obj(root?.rollout)?.waves).map((w) => {
    const lanes = arr(obj(w)?.lanes).filter((id): id is string => typeof id === "string");
    const traffic = obj(w)?.traffic;
    return { lanes, traffic: typeof traffic === "number" ? traffic : undefined };
  });
  const strategy = strategyOf(input);
  if (strategy === "canary") return waves.map((w) => w.traffic);
  const lanes = arr(root?.lanes).map((l) => obj(l));
  const weighted = lanes.every((l) => typeof l?.weight === "number");
  const baseline = new Map(
    lanes.map((l, i) => [
      typeof l?.id === "string" ? l.id : `#${i}`,
      weighted ? (l?.weight as number) : 1,
    ]),
  );
  return wavePercents(strategy, waves, baseline);
}

/**
 * The contract check's rules for `strategy` (the schema checks the name): what a wave may
 * declare under each strategy, and what blue-green needs. Reads only the well-typed parts of
 * `input`; never throws.
 */
export function strategyProblems(input: unknown): Problem[] {
  const root = obj(input);
  if (!root) return [];
  // A strategy that is not one of the names is the schema's one problem: the waves are not
  // judged under a strategy the author did not write.
  if (root.strategy !== undefined && !STRATEGIES.includes(root.strategy as StrategyName)) return [];
  const strategy = strategyOf(input);
  const problems: Problem[] = [];
  const waves = arr(obj(root.rollout)?.waves).map((w) => obj(w));
  waves.forEach((wave, w) => {
    if (!wave) return;
    const path = `rollout.waves.${w}.traffic`;
    if (strategy === "canary" && wave.traffic === undefined) {
      problems.push({
        path,
        message: `wave ${w + 1} declares no traffic: under strategy canary (the default) each wave says the percent of the model's traffic on the lanes deployed so far`,
        fix: `Add \`traffic: <absolute percent 0-100>\` to wave ${w + 1} (the last wave 100), or set \`strategy: rolling\` (traffic follows the lanes in service) or \`strategy: blue_green\`.`,
      });
    }
    if (strategy === "rolling" && wave.traffic !== undefined) {
      problems.push({
        path,
        message: `strategy rolling takes no traffic percent: traffic follows the lanes in service (after each batch every lane carries its baseline weight), so wave ${w + 1}'s \`traffic: ${String(wave.traffic)}\` would split traffic beyond capacity`,
        fix: `Remove \`traffic\` from wave ${w + 1}, or set \`strategy: canary\` to declare percents.`,
      });
    }
    if (strategy === "blue_green" && wave.traffic !== undefined && w === waves.length - 1) {
      problems.push({
        path,
        message: `strategy blue_green's last wave is the switch: it moves every request to the green lanes at once, so its \`traffic: ${String(wave.traffic)}\` means nothing here`,
        fix: `Remove \`traffic\` from wave ${w + 1}; for a concurrent-traffic canary phase, give an earlier wave of green lanes a percent from 1 to 99.`,
      });
    }
  });
  if (strategy === "blue_green") problems.push(...canaryPhaseProblems(waves));
  if (strategy === "blue_green") {
    const inWave = new Set(waves.flatMap((w) => arr(w?.lanes)));
    const ids = arr(root.lanes)
      .map((l) => obj(l)?.id)
      .filter((x): x is string => typeof x === "string");
    if (ids.length > 0 && ids.every((id) => inWave.has(id))) {
      problems.push({
        path: "rollout.waves",
        message:
          "strategy blue_green needs a blue environment: every lane is in a wave, so no lane keeps serving previous_image to switch back to",
        fix: "Leave the lanes that serve now (blue) out of every wave and list only the green lanes in `rollout.waves`, or use `strategy: rolling`.",
      });
    }
    const phase = waves.some((w, i) => i < waves.length - 1 && w?.traffic !== undefined);
    if (root.analysis !== undefined && !phase) {
      problems.push({
        path: "analysis",
        message:
          "strategy blue_green without a canary phase never splits traffic between candidate and control (0% then 100%), so an analysis gate would never be held",
        fix: "Remove `analysis` (watch the switched release with `stop_condition`), or give a wave before the last a percent from 1 to 99 (a concurrent-traffic canary phase, gated with blue as its control).",
      });
    }
  }
  return problems;
}

/**
 * A blue-green canary phase's percents: whole, 0–99 (the last wave switches to 100), and never
 * decreasing (a wave without one is dark: 0).
 */
function canaryPhaseProblems(waves: (Record<string, unknown> | undefined)[]): Problem[] {
  const problems: Problem[] = [];
  let prev = 0;
  waves.forEach((wave, w) => {
    const t = wave?.traffic;
    if (w === waves.length - 1 || typeof t !== "number" || !Number.isInteger(t)) return;
    if (t > 99) {
      problems.push({
        path: `rollout.waves.${w}.traffic`,
        message: `a blue-green canary phase sends the green lanes part of the traffic; ${t}% leaves blue, the control, nothing`,
        fix: "Use a percent from 1 to 99 here; the last wave switches every request to green.",
      });
    } else if (t < prev) {
      problems.push({
        path: `rollout.waves.${w}.traffic`,
        message: `traffic goes down from ${prev}% to ${t}% (wave ${w + 1})`,
        fix: `Traffic is absolute and may only stay or rise: use ${prev} or more here, or leave \`traffic\` out (the wave keeps ${prev}%).`,
      });
    }
    prev = Math.max(prev, t);
  });
  return problems;
}
