/**
 * The manifest compiler: recipe -> manifest (the immutable plan of one release) -> canonical
 * JSON. Pure; the digest (sha256) is taken in `engine/src/recipes/digest.ts`.
 *
 * Table per wave (docs/recipes.md): drain_wave (the wave's lanes to weight 0, their share to
 * lanes of the same image), then for each lane of the wave the catalogue's lane rows in order
 * (exclude_lane, attach_queue_lane, assert_smoke_passed, advertise_capabilities,
 * include_lane); then the wave rows (set_traffic(p), assert_traffic_observed(p)). A recipe's
 * custom steps go right before or after the built-in step they are placed by; its conformance
 * checks (`assert_conformance_passed`) come before everything.
 *
 * Traffic follows the exposure rule (docs/state-machine.md "Exposure"): per-version groups,
 * the candidate group carries the percent in force, the baseline group the rest, lanes out of
 * service carry 0 (`groupWeights`). The candidate image's share at the router is therefore
 * never above the declared percent of the wave in force, forward or backward.
 */
import { canonicalJson } from "../protocol/canonical-json.ts";
import {
  ACTIONS,
  CATALOGUE,
  type LaneBaseline,
  type StepContext,
  type TrafficState,
} from "./catalogue.ts";
import { checkRecipe, checkStepTable } from "./contract-check.ts";
import { customStepRow, customStepsAt } from "./custom-steps.ts";
import { durationMs } from "./duration.ts";
import { BatonError, type Problem } from "./errors.ts";
import { analysisForWave } from "./gate/analysis.ts";
import { manifestMigration } from "./migration.ts";
import {
  type CustomStepAnchor,
  DEFAULT_CONTROL_PLANE_RETRIES,
  DEFAULT_RUNNER_RETRIES,
  type Recipe,
  resolveLaneCount,
} from "./recipe.ts";
import { shadowEnv } from "./shadow.ts";
import { strategyOf, wavePercents } from "./strategy.ts";
import type { Manifest, ManifestLane, ManifestStep } from "./types.ts";
import { equalBaseline, groupWeights, type LaneGroup } from "./weights.ts";

/**
 * The gate of one wave: `analysisForWave`, and on a shadow phase (traffic 0, where no real
 * traffic splits) the recipe's `analysis` unless the wave opts out, read on mirrored requests.
 */
function waveAnalysis(r: Recipe, w: Recipe["rollout"]["waves"][number], traffic: number) {
  if (w.shadow && w.analysis === undefined) return r.analysis ?? null;
  return analysisForWave(r.analysis, w.analysis, traffic);
}

/** A compiled recipe: the manifest and its canonical JSON (the bytes its digest is over). */
export interface Compiled {
  manifest: Manifest;
  canonical: string;
}

/** One lane of the observed baseline: the control plane's state of it at release start. */
export interface ObservedLane extends LaneBaseline {
  id: string;
  weight: number;
}

/**
 * Compiles a checked recipe into its manifest and canonical JSON. Pure and deterministic:
 * the same recipe (whatever its key order) and baseline give the same bytes.
 * `baseline` is the observed baseline (one entry per recipe lane, read from the control plane
 * at start): its weights replace the recipe's, and backward actions restore its markers and
 * capabilities. Without it (offline `baton check`), the recipe's weights (or an equal split)
 * stand in, lanes not excluded, capabilities not advertised.
 * Throws `BatonError` `contract_failed` (422) with every problem when the recipe or the
 * compiled step table fails the contract check.
 */
export function compileRecipe(recipe: Recipe, baseline?: readonly ObservedLane[]): Compiled {
  const checked = checkRecipe(recipe);
  if (!checked.ok) throw contractFailed(checked.problems);
  const r = checked.recipe;

  const observed = new Map((baseline ?? []).map((l) => [l.id, l]));
  const baselines = baseline
    ? r.lanes.map((l) => observed.get(l.id)?.weight ?? 0)
    : r.lanes.every((l) => l.weight !== undefined)
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
    ...(l.failure_domain === undefined ? {} : { failure_domain: l.failure_domain }),
    ...(l.shadow_safe ? { shadow_env: shadowEnv(l.shadow_safe) } : {}),
    ...(l.drill ? { drill: true as const } : {}),
  }));
  const byId = new Map(lanes.map((l) => [l.id, l]));
  const baselineOf = (id: string): LaneBaseline => {
    const o = observed.get(id);
    if (o)
      return {
        excluded: o.excluded,
        capabilities: [...o.capabilities],
        advertised: o.advertised,
        // Only a known image differing from previous_image changes the plan's bytes.
        ...(o.image && o.image !== r.previous_image ? { image: o.image } : {}),
      };
    return {
      excluded: false,
      capabilities: [...(byId.get(id)?.capabilities ?? [])],
      advertised: false,
    };
  };
  // The percent each wave sets: declared (canary) or derived from the strategy (strategy.ts).
  const strategy = strategyOf(r);
  const percents = wavePercents(
    strategy,
    r.rollout.waves,
    new Map(lanes.map((l) => [l.id, l.baseline_weight])),
  );
  // Lanes excluded when the release starts serve nothing until their wave includes them.
  const outAtStart = new Set(lanes.filter((l) => baselineOf(l.id).excluded).map((l) => l.id));

  const steps: ManifestStep[] = [];
  const planProblems: Problem[] = [];
  let previous: TrafficState = {
    percent: 0,
    weights: Object.fromEntries(lanes.map((l) => [l.id, l.baseline_weight])),
  };
  const deployed = new Set<string>();
  // Conformance checks first: before wave 1's first step, so they run before any lane changes
  // and before any traffic reaches the candidate. Wave-scoped rows (lane null, the lane in the
  // action: the first lane of wave 1, which the tool may use to reach the fleet).
  const firstLane = byId.get(r.rollout.waves[0]?.lanes[0] ?? "") ?? null;
  for (const row of CATALOGUE.filter((c) => c.scope === "conformance")) {
    for (const conformance of r.conformance ?? []) {
      const ctx = {
        image: r.image,
        previous_image: r.previous_image,
        lane: firstLane,
        baseline: null,
        traffic: previous,
        previous_traffic: previous,
        conformance,
      };
      steps.push({ ...makeStep(r, row, ctx, 0, steps.length), lane: null });
    }
  }
  r.rollout.waves.forEach((recipeWave, w) => {
    const wave = { ...recipeWave, traffic: percents[w] ?? 0 };
    const inWave = new Set(wave.lanes);
    // drain_wave: the wave's lanes out of service; the percent in force stays on the lanes
    // already on the new image, the rest on the lanes still serving the previous image. When
    // none of those is left and the wave declares 100%, the wave's traffic moves first.
    const groupBefore = (id: string): LaneGroup =>
      deployed.has(id) ? "candidate" : inWave.has(id) || outAtStart.has(id) ? "out" : "baseline";
    const anyBaseline = lanes.some((l) => groupBefore(l.id) === "baseline");
    const anyCandidate = lanes.some((l) => groupBefore(l.id) === "candidate");
    let drainPercent = previous.percent;
    // A 100% wave that takes out every lane serving the model (e.g. a one-lane model) has no
    // lane to drain to: it has no drain_wave, its lanes are excluded with no lane serving
    // (the router sends nothing anywhere, exposure 0) until they come back on the new image.
    let outage = false;
    if (!anyBaseline && drainPercent < 100) {
      if (wave.traffic === 100 && anyCandidate) drainPercent = 100;
      else if (wave.traffic === 100) outage = true;
      else {
        planProblems.push({
          path: `rollout.waves.${w}.traffic`,
          message: `while and after wave ${w + 1} redeploys, ${100 - drainPercent}% of traffic is meant for lanes on the previous image, but no such lane would be serving (the others are in this or earlier waves, or excluded on the control plane)`,
          fix: `Keep a serving lane on the previous image out of wave ${w + 1}, or declare \`traffic: 100\` on wave ${w + 1}.`,
        });
        return;
      }
    }
    const drain: TrafficState = outage
      ? previous
      : { percent: drainPercent, weights: groupWeights(lanes, groupBefore, drainPercent) };
    for (const id of wave.lanes) deployed.add(id);
    const groupAfter = (id: string): LaneGroup =>
      deployed.has(id) ? "candidate" : outAtStart.has(id) ? "out" : "baseline";
    if (wave.traffic < 100 && !lanes.some((l) => groupAfter(l.id) === "baseline")) {
      planProblems.push({
        path: `rollout.waves.${w}.traffic`,
        message: `after wave ${w + 1}, ${100 - wave.traffic}% of traffic is meant for lanes on the previous image, but none is serving (the others are excluded on the control plane)`,
        fix: `Set \`traffic: 100\` on wave ${w + 1}, or include a lane on the previous image on the control plane first.`,
      });
      return;
    }
    const traffic: TrafficState = {
      percent: wave.traffic,
      weights: groupWeights(lanes, groupAfter, wave.traffic),
    };
    const common = { image: r.image, previous_image: r.previous_image };
    // Custom steps placed right before or after a built-in step: in the lane's block when
    // placed by a lane step, else one wave row per lane of the wave (docs/recipes.md).
    const custom = (position: "before" | "after", anchor: CustomStepAnchor, only?: string) => {
      for (const id of only === undefined ? wave.lanes : [only]) {
        const lane = byId.get(id);
        if (!lane) continue;
        for (const c of customStepsAt(r, position, anchor, w, id)) {
          const restore = baselineOf(id).image ?? r.previous_image;
          steps.push(customStepRow(r, c, lane, restore, w, steps.length, only !== undefined));
        }
      }
    };
    custom("before", "drain_wave");
    for (const row of CATALOGUE.filter((c) => c.scope === "wave_start" && !outage)) {
      const ctx = {
        ...common,
        lane: null,
        baseline: null,
        traffic: drain,
        previous_traffic: previous,
      };
      steps.push(makeStep(r, row, ctx, w, steps.length));
    }
    custom("after", "drain_wave");
    for (const id of wave.lanes) {
      for (const row of CATALOGUE.filter((c) => c.scope === "lane")) {
        const ctx = {
          ...common,
          lane: byId.get(id) ?? null,
          baseline: baselineOf(id),
          traffic,
          previous_traffic: drain,
        };
        custom("before", row.name as CustomStepAnchor, id);
        steps.push(makeStep(r, row, ctx, w, steps.length));
        custom("after", row.name as CustomStepAnchor, id);
      }
    }
    for (const row of CATALOGUE.filter((c) => c.scope === "wave")) {
      const ctx = { ...common, lane: null, baseline: null, traffic, previous_traffic: drain };
      custom("before", row.name as CustomStepAnchor);
      steps.push(makeStep(r, row, ctx, w, steps.length));
      custom("after", row.name as CustomStepAnchor);
    }
    // A gated wave's checks run once its exposure is observed, before its gate is held: one
    // step per check and lane, wave-scoped in the table (the lane is in the action).
    const checks = waveAnalysis(r, wave, wave.traffic)?.checks ?? [];
    for (const row of CATALOGUE.filter((c) => c.scope === "check")) {
      for (const check of checks) {
        for (const id of wave.lanes) {
          const ctx = {
            ...common,
            lane: byId.get(id) ?? null,
            baseline: null,
            traffic,
            previous_traffic: traffic,
            check,
          };
          steps.push({ ...makeStep(r, row, ctx, w, steps.length), lane: null });
        }
      }
    }
    previous = traffic;
  });
  const minServing =
    r.min_serving === undefined ? undefined : resolveLaneCount(r.min_serving, lanes.length, "up");
  const parallel = r.rollout.waves.map((wave, w) => {
    const declared =
      wave.max_unavailable === undefined
        ? 1
        : Math.max(1, resolveLaneCount(wave.max_unavailable, wave.lanes.length, "down"));
    if (minServing === undefined) return Math.min(declared, wave.lanes.length);
    // Lanes that may leave service at once: all, less the floor, less those already out.
    const room = lanes.length - outAtStart.size - minServing;
    if (room < 1) {
      planProblems.push({
        path: "min_serving",
        message: `min_serving ${r.min_serving} keeps ${minServing} of the model's ${lanes.length} lanes in service${outAtStart.size > 0 ? ` and ${outAtStart.size} ${outAtStart.size === 1 ? "is" : "are"} already excluded on the control plane` : ""}, so no lane of wave ${w + 1} can be taken out of service to redeploy`,
        fix: `Lower min_serving to at most ${Math.max(0, lanes.length - outAtStart.size - 1)} lanes (${Math.floor(((lanes.length - outAtStart.size - 1) * 100) / lanes.length)}%), or include excluded lanes on the control plane first.`,
      });
      return 1;
    }
    return Math.min(declared, room, wave.lanes.length);
  });
  planProblems.push(...domainsBlocked(r, lanes, outAtStart, parallel));
  if (planProblems.length > 0) throw contractFailed(planProblems);

  const declared = unsafeAfterIndex(r, steps);
  if (typeof declared !== "number" && declared !== null) throw contractFailed([declared]);
  // An irreversible custom step is a recovery boundary of its own: the earliest boundary wins.
  const boundary = steps.find((s) => s.custom?.irreversible)?.index ?? null;
  const unsafeAfter =
    declared === null ? boundary : boundary === null ? declared : Math.min(declared, boundary);
  const recoveryClass = r.recovery_class ?? (boundary !== null ? "roll_forward_only" : undefined);

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
    // Only a strategy other than canary is written: canary manifests (and digests) are unchanged.
    ...(strategy === "canary" ? {} : { strategy }),
    waves: r.rollout.waves.map((w, i) => {
      const traffic = percents[i] ?? 0;
      const gate = waveAnalysis(r, w, traffic);
      const k = parallel[i] ?? 1;
      return {
        lanes: [...w.lanes],
        traffic,
        ...(gate ? { analysis: gate } : {}),
        // Only parallel waves say so: serial manifests (and their digests) are unchanged.
        ...(k > 1 ? { max_unavailable: k } : {}),
        // Only a manual promotion is written (never on the last wave): other manifests (and
        // their digests) are unchanged.
        ...((w.promotion ?? r.promotion) === "manual" && i < r.rollout.waves.length - 1
          ? { promotion: "manual" as const }
          : {}),
        ...(w.shadow ? { shadow: { ...w.shadow } } : {}),
      };
    }),
    ...(minServing === undefined ? {} : { min_serving: minServing }),
    steps,
    // Only when the recipe declares one: other manifests (and their digests) are unchanged.
    ...(r.stop_condition ? { stop_condition: structuredClone(r.stop_condition) } : {}),
    // Only when the recipe says so: manifests (and digests) of other recipes are unchanged.
    ...(r.notify ? { notify: { ...r.notify } } : {}),
    // Only when the recipe declares a migration: other manifests (and digests) are unchanged.
    ...(r.migration ? { migration: manifestMigration(r) } : {}),
    ...(r.policy.rollback_window
      ? { rollback_window_ms: durationMs(r.policy.rollback_window) }
      : {}),
    ...(r.environment ? { environment: r.environment } : {}),
    ...(r.policy.drill_max_age_days !== undefined
      ? {
          drill_policy: {
            max_age_days: r.policy.drill_max_age_days,
            on_stale: r.policy.drill_stale ?? "warn",
          },
        }
      : {}),
    ...(r.policy.drill_every_days !== undefined
      ? { drill_every_days: r.policy.drill_every_days }
      : {}),
    ...(r.mutable_dependencies?.length
      ? { mutable_dependencies: r.mutable_dependencies.map((d) => structuredClone(d)) }
      : {}),
    // Only references (never values); only when listed, so other digests are unchanged.
    ...(r.credentials?.length
      ? { credentials: r.credentials.map((c) => ({ ref: c.ref, revoke_tool: c.revoke_tool })) }
      : {}),
    // Only when the recipe declares its recovery class: absent means reversible, and the
    // manifests (and digests) of recipes that declare none are unchanged.
    ...(recoveryClass
      ? {
          recovery: {
            class: recoveryClass,
            ...(unsafeAfter !== null ? { unsafe_after: unsafeAfter } : {}),
            ...(r.restore !== undefined ? { restore: r.restore } : {}),
            ...(r.restore_state !== undefined
              ? { restore_state: structuredClone(r.restore_state) }
              : {}),
          },
        }
      : {}),
  };
  return { manifest, canonical: canonicalJson(manifest) };
}

/**
 * A lane of a parallel wave that could never leave service: every other lane of its failure
 * domain is excluded on the control plane and only comes back in a later wave, so taking it
 * out would take the whole domain out (the engine would wait for ever).
 */
function domainsBlocked(
  r: Recipe,
  lanes: readonly ManifestLane[],
  outAtStart: ReadonlySet<string>,
  parallel: readonly number[],
): Problem[] {
  const problems: Problem[] = [];
  const waveOf = new Map(r.rollout.waves.flatMap((w, i) => w.lanes.map((id) => [id, i] as const)));
  r.rollout.waves.forEach((wave, w) => {
    if ((parallel[w] ?? 1) <= 1) return;
    for (const id of wave.lanes) {
      const i = lanes.findIndex((l) => l.id === id);
      const domain = lanes[i]?.failure_domain;
      if (domain === undefined) continue;
      const others = lanes.filter((l) => l.failure_domain === domain && l.id !== id);
      if (others.length === 0) continue;
      if (!others.every((l) => outAtStart.has(l.id) && (waveOf.get(l.id) ?? w + 1) > w)) continue;
      const names = others.map((l) => l.id).join(", ");
      problems.push({
        path: `lanes.${i}.failure_domain`,
        message: `lane ${id} of wave ${w + 1} can never leave service: every other lane of failure domain ${domain} (${names}) is excluded on the control plane and comes back only in a later wave, so redeploying ${id} would take the whole domain out`,
        fix: `Include ${names} on the control plane first, move ${others.length > 1 ? "one of them" : names} into wave ${w + 1} or earlier, or give ${id} another failure_domain.`,
      });
    }
  });
  return problems;
}

/**
 * The table index of the recipe's `unsafe_after` step (roll_forward_only), null when it has
 * none, or the problem when the table has no such step (a 100% wave that takes out every lane
 * has no drain_wave).
 */
function unsafeAfterIndex(r: Recipe, steps: readonly ManifestStep[]): number | null | Problem {
  const a = r.recovery_class === "roll_forward_only" ? r.unsafe_after : undefined;
  if (!a) return null;
  const hit = steps.find(
    (s) =>
      s.name === a.step &&
      (a.lane !== undefined ? s.lane === a.lane : s.lane === null && s.wave === (a.wave ?? 0) - 1),
  );
  if (hit) return hit.index;
  // What the table does have for a step of this kind: wave steps by wave, lane steps by lane.
  const where = new Map<string, string[]>();
  for (const s of steps) {
    if (a.lane !== undefined ? s.lane === null : s.lane !== null) continue;
    const at = s.lane ?? String(s.wave + 1);
    const list = where.get(s.name) ?? [];
    if (!list.includes(at)) list.push(at);
    where.set(s.name, list);
  }
  const field = a.lane !== undefined ? "lane" : "wave";
  return {
    path: `unsafe_after.${field}`,
    message: `the compiled step table has no step ${a.step}${a.lane !== undefined ? ` on lane ${a.lane}` : ` in wave ${a.wave}`}`,
    fix: `Name a step the table has in \`unsafe_after.step\` and \`unsafe_after.${field}\`: ${[
      ...where,
    ]
      .map(([name, at]) => `${name} (${field} ${at.join(", ")})`)
      .join("; ")} (\`baton check\` prints the table).`,
  };
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
    ...(row.kind === "runner"
      ? {
          rerun_window_ms:
            (override.rerun_window_minutes ?? r.policy.rerun_window_minutes) * 60_000,
        }
      : {}),
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
export function checkAndCompile(
  input: unknown,
  baseline?: readonly ObservedLane[],
): ContractResult {
  const checked = checkRecipe(input);
  if (!checked.ok) return checked;
  try {
    return { ok: true, recipe: checked.recipe, ...compileRecipe(checked.recipe, baseline) };
  } catch (e) {
    if (e instanceof BatonError && e.problems.length > 0)
      return { ok: false, problems: e.problems };
    throw e;
  }
}
