/**
 * The manifest compiler: recipe -> manifest (the immutable plan of one release) -> canonical
 * JSON. Pure; the digest (sha256) is taken in `engine/src/recipes/digest.ts`.
 *
 * Table per wave (docs/recipes.md): for each lane of the wave, the catalogue's lane rows in
 * order (exclude_lane, attach_queue_lane, assert_smoke_passed, advertise_capabilities,
 * include_lane); then the wave rows (set_traffic(p), assert_traffic_observed(p)).
 */
import { canonicalJson } from "../protocol/canonical-json.ts";
import { ACTIONS, CATALOGUE, type StepContext, type TrafficState } from "./catalogue.ts";
import { checkRecipe, checkStepTable } from "./contract-check.ts";
import { BatonError, type Problem } from "./errors.ts";
import { analysisForWave } from "./gate/analysis.ts";
import { DEFAULT_CONTROL_PLANE_RETRIES, DEFAULT_RUNNER_RETRIES, type Recipe } from "./recipe.ts";
import type { Manifest, ManifestLane, ManifestStep } from "./types.ts";
import { equalBaseline, trafficWeights } from "./weights.ts";

/** A compiled recipe: the manifest and its canonical JSON (the bytes its digest is over). */
export interface Compiled {
  manifest: Manifest;
  canonical: string;
}

/**
 * Compiles a checked recipe into its manifest and canonical JSON. Pure and deterministic:
 * the same recipe (whatever its key order) gives the same bytes.
 * Throws `BatonError` `contract_failed` (422) with every problem when the recipe or the
 * compiled step table fails the contract check.
 */
export function compileRecipe(recipe: Recipe): Compiled {
  const checked = checkRecipe(recipe);
  if (!checked.ok) throw contractFailed(checked.problems);
  const r = checked.recipe;

  const baselines = r.lanes.every((l) => l.weight !== undefined)
    ? r.lanes.map((l) => l.weight ?? 0)
    : equalBaseline(r.lanes.length);
  const lanes: ManifestLane[] = r.lanes.map((l, i) => ({
    id: l.id,
    host: l.host,
    port: l.port,
    user: l.user,
    host_key: l.host_key,
    ...(l.jump ? { jump: { ...l.jump } } : {}),
    queue: l.queue,
    capabilities: [...l.capabilities],
    health_url: l.health_url,
    baseline_weight: baselines[i] ?? 0,
  }));
  const byId = new Map(lanes.map((l) => [l.id, l]));

  const steps: ManifestStep[] = [];
  let previous: TrafficState = {
    percent: 0,
    weights: Object.fromEntries(lanes.map((l) => [l.id, l.baseline_weight])),
  };
  const deployed = new Set<string>();
  r.rollout.waves.forEach((wave, w) => {
    for (const id of wave.lanes) deployed.add(id);
    const traffic: TrafficState = {
      percent: wave.traffic,
      weights: trafficWeights(lanes, deployed, wave.traffic),
    };
    const base = {
      image: r.image,
      previous_image: r.previous_image,
      traffic,
      previous_traffic: previous,
    };
    for (const id of wave.lanes) {
      for (const row of CATALOGUE.filter((c) => c.scope === "lane")) {
        steps.push(makeStep(r, row, { ...base, lane: byId.get(id) ?? null }, w, steps.length));
      }
    }
    for (const row of CATALOGUE.filter((c) => c.scope === "wave")) {
      steps.push(makeStep(r, row, { ...base, lane: null }, w, steps.length));
    }
    previous = traffic;
  });

  const tableProblems = checkStepTable(steps);
  if (tableProblems.length > 0) throw contractFailed(tableProblems);

  const manifest: Manifest = {
    v: 1,
    recipe_name: r.name,
    model: r.model,
    image: r.image,
    previous_image: r.previous_image,
    tool_revision: r.tool_revision ?? null,
    lanes,
    waves: r.rollout.waves.map((w) => {
      const gate = analysisForWave(r.analysis, w.analysis, w.traffic);
      return { lanes: [...w.lanes], traffic: w.traffic, ...(gate ? { analysis: gate } : {}) };
    }),
    steps,
    // Only when the recipe says so: manifests (and digests) of other recipes are unchanged.
    ...(r.notify ? { notify: { ...r.notify } } : {}),
  };
  return { manifest, canonical: canonicalJson(manifest) };
}

function makeStep(
  r: Recipe,
  row: (typeof CATALOGUE)[number],
  ctx: StepContext,
  wave: number,
  index: number,
): ManifestStep {
  const override = r.policy.steps[row.name] ?? {};
  const kindDefault =
    row.kind === "runner" ? DEFAULT_RUNNER_RETRIES : DEFAULT_CONTROL_PLANE_RETRIES;
  return {
    index,
    name: row.name,
    kind: row.kind,
    lane: ctx.lane?.id ?? null,
    wave,
    forward: ACTIONS[row.forward](ctx, "forward"),
    backward: row.backward ? ACTIONS[row.backward](ctx, "backward") : null,
    retries: override.retries ?? r.policy.retries ?? kindDefault,
    on_failure: override.on_failure ?? r.policy.on_failure,
    start_deadline_ms: r.deadlines.start_ms,
    callback_deadline_ms: r.deadlines.callback_ms,
  };
}

function contractFailed(problems: Problem[]): BatonError {
  const first = problems[0];
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : "";
  return new BatonError(
    "contract_failed",
    `[recipe] contract check failed: ${first ? `${first.path || "recipe"}: ${first.message}` : "unknown problem"}${more}`,
    problems,
  );
}

/** Result of `checkAndCompile`: compiled, or every problem of the recipe and its step table. */
export type ContractResult =
  | ({ ok: true; recipe: Recipe } & Compiled)
  | { ok: false; problems: Problem[] };

/**
 * The whole contract check over an untrusted value: recipe rules, then the compiled step
 * table. Never throws for bad input; problems carry path, message and fix.
 */
export function checkAndCompile(input: unknown): ContractResult {
  const checked = checkRecipe(input);
  if (!checked.ok) return checked;
  try {
    return { ok: true, recipe: checked.recipe, ...compileRecipe(checked.recipe) };
  } catch (e) {
    if (e instanceof BatonError && e.problems.length > 0)
      return { ok: false, problems: e.problems };
    throw e;
  }
}
