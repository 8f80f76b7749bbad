/**
 * After a blue-green release (docs/recipes.md "Strategies"): its old (blue) environment, the
 * lanes in no wave, keeps running `previous_image` in service at weight 0 (warm: routed
 * nothing, never excluded, never stopped) until the release's rollback window closes
 * (domain/rollback-window.ts). Inside the window `baton rollback` is a switch back: a release
 * whose plan is one traffic write to the blue lanes and its read-back (`switchBackPlan`), no
 * runner step. Once the window closes the old environment is retired: marked so in the status,
 * no longer a way back (Baton runs no stop step on it; the next release that lists its lanes
 * redeploys them). Pure.
 */
export { blueLanes };

import { runnerArgs, shortDigest } from "./catalogue.ts";
import { rollbackWindowClosesAt } from "./rollback-window.ts";
import { blueLanes } from "./strategy.ts";
import type { Manifest, ManifestStep, ObservedBaseline, Release } from "./types.ts";
import { suggestedCommand } from "./verbs.ts";

/**
 * The old environment of a succeeded blue-green release at `now` (epoch ms): its lanes, the
 * image they run, `warm` while the rollback window is open (`until`: when it closes) and
 * `retired` from then on (`until`: when it was retired). Null for any other release.
 */
export interface OldEnvironment {
  lanes: string[];
  image: string;
  state: "warm" | "retired";
  /** Epoch ms the rollback window closes (warm) or closed (retired). */
  until: number;
}

/** The old environment of `release` at `now`, or null (not a succeeded blue-green release). */
export function oldEnvironment(release: Release, now: number): OldEnvironment | null {
  if (release.manifest.strategy !== "blue_green") return null;
  const closes = rollbackWindowClosesAt(release);
  if (closes === null) return null;
  return {
    lanes: blueLanes(release.manifest),
    image: release.manifest.previous_image,
    state: now < closes ? "warm" : "retired",
    until: closes,
  };
}

/** One sentence for `baton status` and the dashboard about `env` of `releaseId`. */
export function oldEnvironmentWords(releaseId: string, env: OldEnvironment): string {
  const lanes = env.lanes.join(", ");
  const at = new Date(env.until).toISOString();
  return env.state === "warm"
    ? `old environment (${lanes}) warm on ${env.image} until ${at} (weight 0, not stopped): \`baton rollback ${releaseId}\` switches traffic back to it in one write`
    : `old environment (${lanes}) retired at ${at}, when the rollback window closed: it is no longer a way back`;
}

/** The switch of a blue-green manifest: its last `set_traffic` step (the write to 100%). */
function switchStep(m: Manifest): ManifestStep | null {
  return m.steps.findLast((s) => s.name === "set_traffic") ?? null;
}

/**
 * Every request on the blue lanes of `m`: their weights observed when `m`'s release started
 * (`baseline_weight`), scaled to sum to 100 (rounded down, the rest to the first lane; an
 * equal split when they carried nothing), every other lane 0.
 */
export function blueWeights(m: Pick<Manifest, "lanes" | "waves">): Record<string, number> {
  const blue = new Set(blueLanes(m));
  const lanes = m.lanes.filter((l) => blue.has(l.id));
  const total = lanes.reduce((a, l) => a + l.baseline_weight, 0);
  const share = (w: number) =>
    total > 0 ? Math.floor((w * 100) / total) : Math.floor(100 / lanes.length);
  const out: Record<string, number> = Object.fromEntries(m.lanes.map((l) => [l.id, 0]));
  for (const l of lanes) out[l.id] = share(l.baseline_weight);
  const first = lanes[0];
  if (first)
    out[first.id] = (out[first.id] ?? 0) + 100 - lanes.reduce((a, l) => a + (out[l.id] ?? 0), 0);
  return out;
}

/**
 * The plan of a switch back from the succeeded blue-green release of `m` (docs/recipes.md
 * "Strategies"): two control-plane steps, no runner step. Step 0 `set_traffic` moves every
 * request to the blue lanes (`blueWeights`, green 0) in one write; its backward action restores the weights observed at the switch
 * back's start (`observed`; without a read, the switch's forward weights). Step 1
 * `assert_traffic_observed` reads them back. The plan's image is the blue image and its
 * previous image the green one; its one wave lists the blue lanes at 100%, so its own blue
 * environment (the lanes in no wave) is the green lanes, still warm on the candidate.
 * Recovery class, migration, gate and stop condition are not carried over: the plan changes
 * traffic only. Its `recipe_name` is `recipeName`, the recipe the switch back is admitted with
 * (a kept recipe of the image it puts back, so status and history name what serves after it);
 * `m`'s own when not given. Null when `m` has no switch (not a blue-green manifest).
 */
export function switchBackPlan(
  m: Manifest,
  observed: ObservedBaseline | null,
  recipeName: string = m.recipe_name,
): Manifest | null {
  const sw = switchStep(m);
  if (m.strategy !== "blue_green" || sw?.forward.kind !== "control_plane") return null;
  const fwd = sw.forward.request;
  if (fwd.op !== "set_traffic" || blueLanes(m).length === 0) return null;
  const back = { weights: blueWeights(m) };
  const seen = new Map((observed?.lanes ?? []).map((l) => [l.id, l.weight]));
  const now = Object.fromEntries(
    m.lanes.map((l) => [l.id, observed ? (seen.get(l.id) ?? 0) : (fwd.weights[l.id] ?? 0)]),
  );
  const blue = blueLanes(m);
  // The old environment's health, asked through the runner's own smoke step on each blue lane
  // (its recipe row's retries and deadlines), before anything moves.
  const smoke = m.steps.find((s) => s.name === "assert_smoke_passed");
  const checks: ManifestStep[] = m.lanes
    .filter((l) => blue.includes(l.id))
    .map((l, i) => ({
      index: i,
      name: "assert_smoke_passed",
      kind: "runner" as const,
      lane: l.id,
      wave: 0,
      forward: {
        kind: "runner" as const,
        name: "assert_smoke_passed",
        target: `${SWITCH_BACK_TARGET}lane=${l.id}:smoke=${shortDigest(m.previous_image)}`,
        tool: "run-smoke",
        args: runnerArgs(l, m.previous_image, m.image),
      },
      backward: null,
      retries: smoke?.retries ?? 0,
      on_failure: "compensate" as const,
      start_deadline_ms: smoke?.start_deadline_ms ?? sw.start_deadline_ms,
      callback_deadline_ms: smoke?.callback_deadline_ms ?? sw.callback_deadline_ms,
    }));
  const step = (index: number, s: Pick<ManifestStep, "name" | "forward" | "backward">) => ({
    index: checks.length + index,
    kind: "control_plane" as const,
    lane: null,
    wave: 0,
    retries: sw.retries,
    on_failure: "compensate" as const,
    start_deadline_ms: sw.start_deadline_ms,
    callback_deadline_ms: sw.callback_deadline_ms,
    ...s,
  });
  return {
    v: 1,
    recipe_name: recipeName,
    model: m.model,
    image: m.previous_image,
    previous_image: m.image,
    tool_revision: m.tool_revision,
    strategy: "blue_green",
    lanes: m.lanes.map((l) => ({ ...l, baseline_weight: now[l.id] ?? 0 })),
    waves: [{ lanes: blue, traffic: 100 }],
    steps: [
      ...checks,
      step(0, {
        name: "set_traffic",
        forward: {
          kind: "control_plane",
          name: "set_traffic",
          target: "switch_back:traffic=100",
          request: { op: "set_traffic", weights: { ...back.weights }, percent: 100 },
        },
        backward: {
          kind: "control_plane",
          name: "set_traffic",
          target: "switch_back:traffic=0",
          request: { op: "set_traffic", weights: now, percent: 0 },
        },
      }),
      step(1, {
        name: "assert_traffic_observed",
        forward: {
          kind: "control_plane",
          name: "assert_traffic_observed",
          target: "switch_back:traffic=100",
          request: { op: "assert_traffic", weights: { ...back.weights }, percent: 100 },
        },
        backward: null,
      }),
    ],
    ...(m.environment !== undefined ? { environment: m.environment } : {}),
    // Every policy of the recipe holds for the switch back as for the release it undoes.
    ...(m.rollback_window_ms !== undefined ? { rollback_window_ms: m.rollback_window_ms } : {}),
    ...(m.drill_policy !== undefined ? { drill_policy: { ...m.drill_policy } } : {}),
    ...(m.drill_every_days !== undefined ? { drill_every_days: m.drill_every_days } : {}),
    ...(m.notify !== undefined ? { notify: m.notify } : {}),
  };
}

/** The target prefix of a switch back's health checks of the old environment. */
const SWITCH_BACK_TARGET = "switch_back:";

/** `step` is a switch back's health check of an old-environment lane: read-only at the lane. */
export function isSwitchBackCheck(step: Pick<ManifestStep, "name" | "forward">): boolean {
  return (
    step.name === "assert_smoke_passed" &&
    step.forward.kind === "runner" &&
    step.forward.target.startsWith(SWITCH_BACK_TARGET)
  );
}

/**
 * When `step` is a switch back's health check of an old-environment lane (`switchBackPlan`)
 * and it failed (`why`, the step run's ending): one sentence naming the lane, saying no traffic
 * moved and what to do; `of` is the release the switch back undoes (its lineage). Null for any
 * other step.
 */
export function switchBackCheckWords(
  step: Pick<ManifestStep, "name" | "lane" | "forward">,
  of: string,
  why: string,
): string | null {
  const f = step.forward;
  if (!isSwitchBackCheck(step) || f.kind !== "runner" || step.lane === null) return null;
  const image = typeof f.args.image === "string" ? f.args.image : "the previous image";
  return `lane ${step.lane} of the old environment failed its health check before the switch back, so no traffic moved: ${why}. The old environment is not warm there: redeploy ${image} on ${step.lane} and roll back again (${suggestedCommand("rollback", { target: of })}), or roll forward with a fixed recipe (${suggestedCommand("roll_forward", { target: of })})`;
}

/**
 * Why a switch back from `m` cannot start given the lanes as read now (`observed`), or null:
 * a blue lane excluded, missing at the control plane, or (when the control plane reports
 * images) no longer running the blue image would take the traffic on something other than
 * the warm old environment.
 */
export function switchBackRefusal(m: Manifest, observed: ObservedBaseline | null): string | null {
  if (!observed) return null;
  const byId = new Map(observed.lanes.map((l) => [l.id, l]));
  for (const id of blueLanes(m)) {
    const l = byId.get(id);
    if (!l) return `lane ${id} of the old environment is not at the control plane`;
    if (l.excluded) return `lane ${id} of the old environment is excluded at the control plane`;
    if (l.image && l.image !== m.previous_image)
      return `lane ${id} of the old environment runs ${l.image}, not ${m.previous_image}`;
  }
  return null;
}
