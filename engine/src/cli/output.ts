/**
 * Text output of the read commands: the releases table, one release's summary, and the lines
 * `watch` prints. Pure functions of the engine's JSON (`GET /v1/releases[/:id]`).
 */

import { type OldEnvironment, oldEnvironmentWords } from "../domain/blue-green.ts";
import { currentDependencyDrift, dependencyDriftMessage } from "../domain/dependency-drift.ts";
import { currentDrillDue, drillDueMessage } from "../domain/drills.ts";
import { armsLine, type GateSummary, metricLine, srmLine } from "../domain/gate/summary.ts";
import { waveLabel } from "../domain/gate/waves.ts";
import { type LifecycleAction, lifecycleActions } from "../domain/lifecycle.ts";
import { type ReleaseState, TERMINAL_RELEASE_STATES } from "../domain/states.ts";
import { switchBackWords } from "../domain/switch-back-words.ts";
import { type AvailableAction, availableActions } from "../domain/transition/exits.ts";
import type {
  HistoryEntry,
  Lineage,
  Manifest,
  Release,
  StepRun,
  StopWatch,
} from "../domain/types.ts";
import { visible } from "../domain/visible-text.ts";
import type { AttemptResult, ReleaseSummary } from "../ports/store.ts";
import { currentDrift, driftMessage } from "../service/drift.ts";
import { duration, imageLabel, imageRole, shortImage, time, trafficOn } from "../views/format.ts";
import { housekeepingLine, isHousekeeping, readOnce } from "../views/history-label.ts";
import { stepProgress } from "../views/list-row.ts";
import { offers } from "../views/offers.ts";
import {
  type ReleaseSummaryFacts,
  stepAction,
  summarize,
  weightsText,
  whyToShow,
} from "../views/summary.ts";

/** `GET /v1/releases/:id` as the engine answers it. */
export interface RecordJson {
  id: string;
  state: ReleaseState;
  generation: number;
  resource_version: number;
  manifest_digest: string;
  high_water_mark: number;
  cursor: number;
  reason: string | null;
  created_at: number;
  updated_at: number;
  step_runs: StepRun[];
  history: HistoryEntry[];
  attempt_results: unknown[];
  manifest: Manifest;
  /** Per gated wave, the latest evaluation's decision and figures (engines with gates). */
  gates?: GateSummary[];
  /** The stop condition's watch (engines with a stop condition; null when not watched). */
  stop?: StopWatch | null;
  /** Set when a lifecycle verb started the release (docs/lifecycle.md). */
  lineage?: Lineage | null;
  /** The lifecycle verbs the engine accepts now (it checks what a rollback would run). */
  lifecycle_actions?: LifecycleAction[];
  /** The ways out the engine accepts now (the dashboard's buttons; docs/state-machine.md). */
  available_actions?: AvailableAction[];
  /** Why a lifecycle verb its state would offer cannot be taken (`lifecycleNote`); null when none. */
  lifecycle_note?: string | null;
  /** A succeeded blue-green release's old environment (warm or retired); null otherwise. */
  old_environment?: OldEnvironment | null;
  /** The later release that has since set this release's lanes; null when none. */
  superseded_by?: string | null;
}

/** Ended states (no way out but a new release): the domain's set, `abandoned` included. */
export const TERMINAL: ReadonlySet<string> = TERMINAL_RELEASE_STATES;
/** States where a release waits for a person. */
export const WAITING: ReadonlySet<string> = new Set(["paused", "needs_operator"]);

function pad(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) =>
    r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  "),
  );
}

/** The releases table (newest first, as the engine lists them). `now` in epoch ms. */
export function releasesTable(rows: ReleaseSummary[], now: number): string[] {
  if (rows.length === 0) return ["no releases"];
  return pad([
    ["ID", "STATE", "RECIPE", "MODEL", "PROGRESS", "STARTED", "DURATION"],
    ...rows.map((r) => [
      r.id,
      r.state,
      r.recipe_name,
      r.model,
      stepProgress(r),
      time(r.created_at),
      duration((TERMINAL.has(r.state) ? r.updated_at : now) - r.created_at),
    ]),
  ]);
}

/** The record as the domain's `Release` (the JSON is the release plus history and results). */
function asRelease(rec: RecordJson): Release {
  return rec as unknown as Release;
}

/**
 * One line for a step run, in the dashboard's words: `→ step 7 (wave 2) set traffic 10%
 * (lane-a 90%, lane-b 10%): succeeded, attempt 1 (run 9002/1)`. Steps and waves count from 1.
 */
export function stepRunLine(rec: RecordJson, sr: StepRun): string {
  const step = rec.manifest.steps[sr.step_index];
  const a = sr.attempts.at(-1);
  const att = a ? `, attempt ${a.n} (run ${a.run_id}/${a.run_attempt})` : "";
  const err = sr.last_error && !["succeeded"].includes(sr.state) ? ` — ${sr.last_error}` : "";
  const dir = sr.direction === "fwd" ? "→" : "← undo";
  const what = step
    ? `step ${step.index + 1} (wave ${step.wave + 1}) ${stepAction(step, sr.direction)}`
    : `step ${sr.step_index + 1}`;
  return `${dir} ${what}: ${sr.state}${att}${err}`;
}

/**
 * The observed baseline in one line: each lane's weight, marker, advertised capabilities and
 * the image it ran at start (`image unknown` when the control plane did not report one).
 */
export function baselineText(lanes: NonNullable<Release["baseline"]>["lanes"]): string {
  return lanes
    .map(
      (l) =>
        `${l.id} ${l.weight}%${l.excluded ? " excluded" : ""}${l.advertised ? ` advertising ${l.capabilities.join(",") || "nothing"}` : ""} ${l.image ? `on ${l.image}` : "image unknown"}`,
    )
    .join("; ");
}

/**
 * What runs where, as Baton last set it: the traffic on the candidate and, per lane, its image
 * (`ranker:v3.1@sha256:2a1b3c4d5e6f… (candidate)`) and weight.
 */
export function liveNowLines(rec: RecordJson, f: ReleaseSummaryFacts): string[] {
  const later = rec.superseded_by;
  const lines = [
    later
      ? `  traffic: as ${rec.id} left it, below; ${later} has set these lanes since (\`baton status ${later}\` shows the traffic now)`
      : f.traffic
        ? `  traffic now: ${f.traffic.percent}% on ${trafficOn(asRelease(rec))} ${shortImage(rec.manifest.image)} (${weightsText(f.traffic.weights)}), set by ${f.traffic.by}`
        : "  traffic now: the baseline (no traffic step has run)",
  ];
  const rows = f.lanes.map((l) => [
    `    ${l.id}`,
    l.wave > 0 ? `wave ${l.wave}` : "no wave",
    imageLabel(l.ref, imageRole(asRelease(rec), l.image)),
    l.weight === null ? "baseline weight" : `${l.weight}%`,
  ]);
  return rows.length > 0 ? [...lines, ...pad(rows)] : lines;
}

/** The CLI commands of the actions the engine accepts now (none for an ended release). */
export function acceptedCommands(rec: RecordJson): string[] {
  return offers(asRelease(rec)).map((o) => `${o.command}  # ${o.effect}`);
}

/**
 * A release's summary: the dashboard's first screen as text (state and why, the failed step
 * and its failing check, undo, what Baton last set), the accepted actions, step runs, and the
 * last refused events.
 */
export function releaseSummary(rec: RecordJson, now: number): string[] {
  const live = !TERMINAL.has(rec.state);
  const f = summarize(asRelease(rec), rec.history, rec.attempt_results as AttemptResult[]);
  const total = rec.manifest.steps.length;
  const lines = [
    `${rec.id}  ${rec.state}  ${rec.manifest.recipe_name} / ${rec.manifest.model}`,
    `  ${f.headline}${f.cause === "operator_abort" ? " [operator abort]" : f.cause === "failure" ? " [failure]" : ""}`,
  ];
  const why = whyToShow(f);
  if (why) lines.push(`  why: ${why}`);
  if (f.failed) {
    lines.push(
      `  failed: ${f.failed.title}: ${f.failed.run.state}${f.failed.error ? ` — ${f.failed.error}` : ""}`,
    );
    const ev = f.failed.evidence;
    if (ev) {
      lines.push(
        `  failing check: ${ev.check.name} ${ev.check.status}, exit code ${ev.check.exit_code}${ev.http_status ? `, HTTP ${ev.http_status}` : ""}${ev.check.message ? `: ${ev.check.message}` : ""}`,
      );
      if (ev.excerpt) lines.push(`  response: ${ev.excerpt.replace(/\s+/g, " ").slice(0, 200)}`);
    }
  }
  if (f.operator) {
    lines.push(
      `  fix lane ${f.operator.lane ?? "(none)"} by hand so that its ${stepAction(f.operator.step, "bwd")} holds, then retry the undo of step ${f.operator.step.index + 1}`,
    );
  }
  if (f.toUndo.length > 0) {
    lines.push(`  still to undo: ${f.toUndo.map((s) => `step ${s.index + 1}`).join(", ")}`);
  }
  if (f.undone.length > 0) {
    lines.push(
      `  undone: ${f.undone.map((u) => `step ${u.step.index + 1} ${stepAction(u.step, "bwd")}`).join("; ")}`,
    );
  }
  lines.push(...liveNowLines(rec, f));
  lines.push(
    `  started ${time(rec.created_at)}, ${live ? "running for" : "took"} ${duration((live ? now : rec.updated_at) - rec.created_at)}`,
    `  manifest ${rec.manifest_digest}, image ${rec.manifest.image}`,
    `  high-water mark: ${rec.high_water_mark < 0 ? "none (nothing has taken effect)" : `step ${rec.high_water_mark + 1} (steps 1 to ${rec.high_water_mark + 1} may have taken effect)`}; ${total} steps, generation ${rec.generation}`,
  );
  const baseline = asRelease(rec).baseline;
  if (baseline) lines.push(`  observed baseline: ${baselineText(baseline.lanes)}`);
  lines.push(...gateLines(rec));
  lines.push(...stopLine(rec));
  if (rec.lineage) {
    lines.push(
      rec.lineage.verb === "rollback" && rec.lineage.switch_back
        ? `  rollback of ${rec.lineage.of}: ${switchBackWords(rec.lineage.of)}`
        : rec.lineage.verb === "rollback"
          ? `  rollback of ${rec.lineage.of}: runs ${rec.lineage.manifest_of}'s admitted manifest again`
          : `  roll forward past ${rec.lineage.of}`,
    );
  }
  const drift = currentDrift(rec.history);
  if (drift)
    lines.push(
      `  DRIFT since ${time(drift.observed_at)}: ${driftMessage(drift).replace(/^\[drift\] /, "")}`,
    );
  const deps = currentDependencyDrift(rec.history);
  if (deps)
    lines.push(
      `  DEPENDENCY DRIFT since ${time(deps.observed_at)}: ${dependencyDriftMessage(deps).replace(/^\[drift\] /, "")}`,
    );
  const due = currentDrillDue(rec.history);
  if (due)
    lines.push(
      `  DRILL DUE since ${time(due.due_since ?? due.observed_at)}: ${drillDueMessage(due).replace(/^\[drill\] /, "")}`,
    );
  const cmds = acceptedCommands(rec);
  if (cmds.length > 0) {
    lines.push("what you can do:");
    for (const c of cmds) lines.push(`  ${c}`);
  }
  const verbs = rec.lifecycle_actions ?? lifecycleActions(asRelease(rec));
  if (verbs.length > 0) {
    lines.push("after the end (a new release, docs/lifecycle.md):");
    for (const a of verbs) lines.push(`  ${a.command}  # ${a.effect}`);
  }
  if (rec.old_environment) lines.push(oldEnvironmentWords(rec.id, rec.old_environment));
  // Why a verb its state would offer is not (the engine's words, `lifecycle_note`).
  if (rec.lifecycle_note) lines.push(`not offered: ${rec.lifecycle_note}`);
  lines.push("step runs:");
  if (rec.step_runs.length === 0) lines.push("  (none yet)");
  for (const sr of rec.step_runs) lines.push(`  ${sr.id.padEnd(12)} ${stepRunLine(rec, sr)}`);
  // An operator's refused action is listed; what the engine refused for itself (a late,
  // duplicate or fenced callback, a stale deadline) is grouped and said in plain words.
  const refused = rec.history.filter((h) => h.outcome === "refused" && !isHousekeeping(h));
  if (refused.length > 0) {
    lines.push(
      `refused operator actions: ${refused.length} (last ${Math.min(3, refused.length)} shown)`,
    );
    for (const h of refused.slice(-3))
      lines.push(`  ${time(h.at)} ${h.kind} refused: ${readOnce(h.message)}`);
  }
  const chores = rec.history.filter(isHousekeeping);
  if (chores.length > 0) {
    lines.push(
      `engine housekeeping: ${chores.length} ${chores.length === 1 ? "message" : "messages"} refused or ignored (late, duplicate or stale; they changed nothing), last ${Math.min(3, chores.length)}:`,
    );
    for (const h of chores.slice(-3)) lines.push(`  ${time(h.at)} ${housekeepingLine(h)}`);
  }
  // Runners' text (check names, messages, excerpts, errors) with its control and
  // bidirectional characters escaped: printed as is, it would repaint the terminal.
  return lines.map(visible);
}

/** `release r17 rolled_back: Rolled back after a failure at step 9 (wave 2)`. */
export function releaseLine(rec: RecordJson): string {
  const f = summarize(asRelease(rec), rec.history, rec.attempt_results as AttemptResult[]);
  const why = whyToShow(f);
  return visible(`release ${rec.id} ${rec.state}: ${f.headline}${why ? ` — ${why}` : ""}`);
}

/** The compact `status <id> --json` shape. */
export function statusJson(rec: RecordJson) {
  return {
    id: rec.id,
    state: rec.state,
    reason: rec.reason,
    recipe_name: rec.manifest.recipe_name,
    model: rec.manifest.model,
    manifest_digest: rec.manifest_digest,
    high_water_mark: rec.high_water_mark,
    cursor: rec.cursor,
    step_count: rec.manifest.steps.length,
    created_at: rec.created_at,
    updated_at: rec.updated_at,
    step_runs: rec.step_runs.map((s) => ({
      id: s.id,
      step_index: s.step_index,
      direction: s.direction,
      state: s.state,
      attempts: s.attempts.length,
      last_error: s.last_error,
    })),
    refused_events: rec.history.filter((h) => h.outcome === "refused").length,
    // The same exits `baton status` prints, for scripts: the API's lists, or derived like it.
    available_actions: rec.available_actions ?? availableActions(asRelease(rec)),
    lifecycle_actions: rec.lifecycle_actions ?? lifecycleActions(asRelease(rec)),
    lifecycle_note: rec.lifecycle_note ?? null,
    old_environment: rec.old_environment ?? null,
    lineage: rec.lineage ?? null,
    drift: currentDrift(rec.history),
    dependency_drift: currentDependencyDrift(rec.history),
    drill_due: currentDrillDue(rec.history),
    gates: (rec.gates ?? []).map((g) => ({
      wave: g.wave + 1,
      phase: g.phase,
      generation: g.generation,
      decision: g.decision,
      reason: g.reason,
      evaluations: g.evaluations,
      elapsed_ms: g.elapsed_ms,
      arms: g.arms,
      srm: g.srm,
      metrics: g.metrics,
    })),
  };
}

/**
 * The lines of `baton status <id>` about gates: per gated wave, the latest decision with its
 * reason, the counts per arm, the SRM check and one line per metric (bounds vs margin).
 */
export function gateLines(rec: RecordJson): string[] {
  const gates = rec.gates ?? [];
  if (gates.length === 0) return [];
  const lines = ["gates (latest evaluation per gated wave):"];
  for (const g of gates) {
    lines.push(
      `  ${waveLabel(rec.manifest, g.wave)} ${g.phase === "watch" ? "guardrail watch" : "gate"}: ${g.decision.toUpperCase()} after ${g.evaluations} ${g.evaluations === 1 ? "evaluation" : "evaluations"} (${Math.round(g.elapsed_ms / 1000)} s)${g.generation !== rec.generation ? `, generation ${g.generation}` : ""}: ${g.reason}`,
      `    ${armsLine(g)}`,
      `    ${srmLine(g)}`,
    );
    for (const m of g.metrics) lines.push(`    ${metricLine(m)}`);
  }
  return lines;
}

/**
 * The line of `baton status <id>` about the stop condition: `stop condition (watched from wave
 * 1 (20%) on): OK after 12 evaluations: no breach: …`; none when the release is not watched.
 */
export function stopLine(rec: RecordJson): string[] {
  const w = rec.stop;
  if (!w) return [];
  const word = { pending: "PENDING", ok: "OK", no_data: "NO DATA", breached: "BREACHED" }[w.status];
  const bake = w.final_bake && !w.final_bake.done ? "; baking after the last wave" : "";
  return [
    `stop condition (counting from ${waveLabel(rec.manifest, w.wave)}'s exposure${bake}): ${word} after ${w.seq} ${w.seq === 1 ? "evaluation" : "evaluations"}${w.reason ? `: ${w.reason}` : ""}`,
  ];
}
