/**
 * What the first screen of a release page (and `baton status`) says, as data: the state and
 * why, the step that failed with its failing check and evidence, what was undone and what is
 * still to undo, what Baton last set the lanes to, and who decided (an operator's abort or a
 * step's failure). Pure; built from the release record (release, history, attempt results).
 * Numbers are for people: steps and waves count from 1.
 */
import { laneImages } from "../domain/fleet.ts";
import { causeOf } from "../domain/notifications.ts";
import { stepWords } from "../domain/step-words.ts";
import { rollbackDone } from "../domain/transition/recovery.ts";
import type { HistoryEntry, Json, ManifestStep, Release, StepRun } from "../domain/types.ts";
import type { AttemptResult } from "../ports/store.ts";
import { type CheckRow, checkRows } from "./format.ts";
import { OPERATOR_EVENTS, readOnce } from "./history-label.ts";
import { holdHeadline, pausedWhere } from "./where.ts";

/** The step run states that end a step run badly. */
const BAD = new Set(["failed", "unknown", "dispatch_failed"]);

/**
 * `set traffic 10%`, `exclude lane lane-b`: a step's action in words, with its percent, and its
 * lane (a custom step's wave row: the lane it runs for).
 */
export function stepAction(step: ManifestStep, direction: "fwd" | "bwd" = "fwd"): string {
  const a = direction === "fwd" ? step.forward : (step.backward ?? step.forward);
  const name = a.name.replaceAll("_", " ");
  if (a.kind === "control_plane") {
    const r = a.request;
    if (r.op === "set_traffic" || r.op === "assert_traffic") {
      return `${name} ${r.percent}% (${weightsText(r.weights)})`;
    }
  }
  // A custom step placed by a wave step is a wave row per lane: its lane is in its args.
  const argLane =
    step.custom && a.kind === "runner" ? (a.args.lane as { id?: unknown } | undefined)?.id : null;
  const lane = step.lane ?? (typeof argLane === "string" ? argLane : null);
  return `${name}${lane ? ` · ${lane}` : ""}`;
}

/** `lane-a 90%, lane-b 10%`. */
export function weightsText(w: Record<string, number>): string {
  return Object.entries(w)
    .map(([k, v]) => `${k} ${v}%`)
    .join(", ");
}

/** Evidence of one failing check, as the runner's checks.json recorded it. */
export interface CheckEvidence {
  check: CheckRow;
  /** A response body excerpt (`body`/`response`/`response_body`/`excerpt`), if the tool kept one. */
  excerpt: string | null;
  /** HTTP status of the probe, if recorded. */
  http_status: string | null;
}

/** The step that failed, where, and what proves it. */
export interface FailedStep {
  run: StepRun;
  step: ManifestStep;
  /** `step 9 (wave 2) attach queue lane · lane-b` */
  title: string;
  error: string | null;
  attempt: AttemptResult | null;
  evidence: CheckEvidence | null;
}

/** An operator decision taken from history (abort, resume, retry …). */
export interface Decision {
  kind: string;
  actor: string;
  reason: string | null;
  at: number;
}

export interface ReleaseSummaryFacts {
  /** One line: `Rolled back after a failure at step 9 (wave 2)`. */
  headline: string;
  /** Why, in the engine's words, read once (kept after the release ended). */
  why: string | null;
  cause: "operator_abort" | "failure" | null;
  /** The operator's abort, when one was accepted. */
  abort: Decision | null;
  /** The forward step that failed (or the undo step an operator must fix). */
  failed: FailedStep | null;
  /** needs_operator: the lane to fix by hand and the undo step waiting on it. */
  operator: { lane: string | null; run: StepRun; step: ManifestStep } | null;
  /** Undo steps that succeeded, newest first. */
  undone: { step: ManifestStep; run: StepRun }[];
  /** Steps still to undo (compensating / needs_operator), in the order they will run. */
  toUndo: ManifestStep[];
  /**
   * Per lane, the image and traffic Baton last set (not a read of the fleet): `image` whether
   * it is the candidate (`new`) or the baseline (`previous`), `ref` that image
   * (`name@sha256:…`).
   */
  lanes: {
    id: string;
    image: "new" | "previous";
    ref: string;
    weight: number | null;
    wave: number;
  }[];
  /** Traffic as last written and read back, or null when no traffic step ran. */
  traffic: { weights: Record<string, number>; percent: number; by: string } | null;
}

function str(v: Json | undefined): string | null {
  return typeof v === "string" && v.trim() ? v : typeof v === "number" ? String(v) : null;
}

/** The first failing check of an attempt's checks.json, with any body excerpt it carries. */
export function failingEvidence(result: AttemptResult | null): CheckEvidence | null {
  if (!result) return null;
  const rows = checkRows(result.checks);
  const raw = Array.isArray(result.checks) ? result.checks : [];
  const check =
    rows?.find((r) => r.failing && r.status !== "not_run") ?? rows?.find((r) => r.failing);
  if (!check) return null;
  const rec = raw.find(
    (c) => c && typeof c === "object" && !Array.isArray(c) && (c.name ?? c.phase) === check.name,
  ) as Record<string, Json> | undefined;
  const excerpt =
    str(rec?.body) ?? str(rec?.response) ?? str(rec?.response_body) ?? str(rec?.excerpt) ?? null;
  const http = str(rec?.http_status) ?? str(rec?.status_code) ?? null;
  return { check, excerpt: excerpt ? excerpt.slice(0, 600) : null, http_status: http };
}

function latestResult(results: AttemptResult[], run: StepRun): AttemptResult | null {
  let best: AttemptResult | null = null;
  for (const a of results) {
    if (a.step_run_id === run.id && (!best || a.attempt > best.attempt)) best = a;
  }
  return best;
}

function lastBad(r: Release, dir: "fwd" | "bwd"): StepRun | null {
  let best: StepRun | null = null;
  for (const sr of r.step_runs) {
    if (sr.direction !== dir || !BAD.has(sr.state)) continue;
    if (sr.last_error?.startsWith("cancelled by abort")) continue;
    if (!best || (sr.finished_at ?? 0) >= (best.finished_at ?? 0)) best = sr;
  }
  return best;
}

function failedStep(r: Release, run: StepRun, results: AttemptResult[]): FailedStep | null {
  const step = r.manifest.steps[run.step_index];
  if (!step) return null;
  const attempt = latestResult(results, run);
  return {
    run,
    step,
    title: `${stepWords(step)} ${run.direction === "bwd" ? "undo " : ""}${stepAction(step, run.direction)}`,
    error: run.last_error,
    attempt,
    evidence: failingEvidence(attempt),
  };
}

/** Operator decisions in history (accepted abort / resume / retry …), oldest first. */
export function decisions(history: HistoryEntry[]): Decision[] {
  const out: Decision[] = [];
  for (const e of history) {
    if (e.outcome !== "accepted" || !OPERATOR_EVENTS.has(e.kind)) continue;
    const d = e.data && typeof e.data === "object" && !Array.isArray(e.data) ? e.data : {};
    out.push({
      kind: e.kind,
      actor: str(d.actor) ?? "operator",
      reason: str(d.reason),
      at: e.at,
    });
  }
  return out;
}

/** History kinds that are an operator's decision (defined with the history labels). */
export { OPERATOR_EVENTS };

/** The first-screen facts of a release. */
export function summarize(
  r: Release,
  history: HistoryEntry[],
  results: AttemptResult[],
): ReleaseSummaryFacts {
  const steps = r.manifest.steps;
  const abort = decisions(history).find((d) => d.kind === "abort") ?? null;
  const fwdBad = lastBad(r, "fwd");
  const bwdBad = lastBad(r, "bwd");
  // An accepted abort is the operator's decision, whatever failed before it.
  const ended = ["compensating", "rolled_back", "aborted"].includes(r.state);
  // A gate that failed compensates with no failed step run: it is a failure, not an abort.
  const gateFailed = !abort && history.some(isGateFail);
  const cause = abort && ended ? "operator_abort" : gateFailed ? "failure" : causeOf(r);
  const failed =
    r.state === "needs_operator" && bwdBad
      ? failedStep(r, bwdBad, results)
      : fwdBad && r.state !== "succeeded"
        ? failedStep(r, fwdBad, results)
        : null;

  const undone = r.step_runs
    .filter((s) => s.direction === "bwd" && s.state === "succeeded")
    .sort((a, b) => (b.finished_at ?? 0) - (a.finished_at ?? 0))
    .flatMap((run) => {
      const step = steps[run.step_index];
      return step ? [{ step, run }] : [];
    });

  const toUndo: ManifestStep[] = [];
  if (r.state === "compensating" || r.state === "needs_operator") {
    for (let i = Math.min(r.cursor, steps.length - 1); i >= 0; i--) {
      const step = steps[i]!;
      const fwd = r.step_runs.find((s) => s.step_index === i && s.direction === "fwd");
      const bwd = r.step_runs.find((s) => s.step_index === i && s.direction === "bwd");
      if (!step.backward || !fwd || fwd.state === "planned" || bwd?.state === "succeeded") continue;
      if (fwd.state === "failed" && fwd.attempts.length === 0 && fwd.kind === "runner") continue;
      toUndo.push(step);
    }
  }

  let operator: ReleaseSummaryFacts["operator"] = null;
  if (r.state === "needs_operator" && bwdBad) {
    const step = steps[bwdBad.step_index];
    if (step) operator = { lane: step.lane, run: bwdBad, step };
  }

  // What Baton last set: the latest succeeded traffic write, and per lane its image.
  let traffic: ReleaseSummaryFacts["traffic"] = null;
  let latest = -1;
  for (const sr of r.step_runs) {
    if (sr.state !== "succeeded" || sr.kind !== "control_plane") continue;
    const step = steps[sr.step_index];
    const a = sr.direction === "fwd" ? step?.forward : step?.backward;
    if (!a || a.kind !== "control_plane" || a.request.op !== "set_traffic") continue;
    if ((sr.finished_at ?? 0) >= latest) {
      latest = sr.finished_at ?? 0;
      traffic = {
        weights: a.request.weights,
        percent: a.request.percent,
        by: `${stepWords(step!)}${sr.direction === "bwd" ? " undo" : ""}`,
      };
    }
  }
  const lanes = laneImages(r).map((l) => ({
    id: l.id,
    image: l.image,
    ref: l.ref,
    weight: traffic ? (traffic.weights[l.id] ?? 0) : null,
    wave: l.wave,
  }));

  const why = r.reason ? readOnce(r.reason) : null;
  return {
    headline: headline(r, cause, failed, operator, abort, gateFailed),
    why,
    cause,
    abort,
    failed,
    operator,
    undone,
    toUndo,
    lanes,
    traffic,
  };
}

/**
 * The why to print under the headline, or null when the headline already says it (the
 * whole why, or the failed step's error that the why only wraps with the step run's id).
 */
export function whyToShow(f: ReleaseSummaryFacts): string | null {
  if (!f.why || f.headline.includes(f.why)) return null;
  const err = f.failed?.error ?? null;
  if (err && f.why.endsWith(err) && f.headline.includes(err)) return null;
  return f.why;
}

/** An accepted gate evaluation that failed (it began compensation). */
function isGateFail(e: HistoryEntry): boolean {
  if (e.kind !== "gate" || e.outcome !== "accepted") return false;
  const d = e.data as { gate?: { decision?: unknown } } | null;
  return d?.gate?.decision === "fail";
}

function headline(
  r: Release,
  cause: ReleaseSummaryFacts["cause"],
  failed: FailedStep | null,
  operator: ReleaseSummaryFacts["operator"],
  abort: Decision | null,
  gateFailed = false,
): string {
  // A failed gate: the release's reason says which gate and why (`gate of wave 1 (20%)
  // failed: …`), kept after the release ended.
  const gate =
    gateFailed && !failed
      ? ` the ${r.reason?.startsWith("gate of ") ? readOnce(r.reason) : "gate failed"}`
      : null;
  const at = failed ? ` at ${stepWords(failed.step)}` : "";
  // The failing check's cause in the headline itself (`… at step 4 (wave 1): health check on
  // lane-a answered 503: model not loaded: CUDA OOM (exit code 1)`), kept after the release ends.
  const because =
    failed?.error && failed.run.direction === "fwd" ? `: ${readOnce(failed.error)}` : "";
  const by = abort ? ` by ${abort.actor}${abort.reason ? `: ${readOnce(abort.reason)}` : ""}` : "";
  const total = r.manifest.steps.length;
  switch (r.state) {
    case "succeeded":
      return `Succeeded: all ${total} steps done`;
    case "rolled_back":
      return cause === "operator_abort"
        ? `Rolled back after an operator abort${by}`
        : gate
          ? `Rolled back after${gate}`
          : `Rolled back after a failure${at}${because}`;
    case "compensating":
      return cause === "operator_abort"
        ? `Undoing after an operator abort${by}`
        : gate
          ? `Undoing after${gate}`
          : `Undoing after a failure${at}${because}`;
    case "aborted":
      return `Aborted${by} before anything took effect`;
    case "needs_operator":
      return operator
        ? `Needs an operator: undoing ${stepWords(operator.step)} failed${operator.lane ? ` on lane ${operator.lane}` : ""}`
        : r.restore && !r.restore.confirmed
          ? rollbackDone(r)
            ? `Needs an operator: the rollback of ${r.lineage?.of} is done; run its restore action and confirm it`
            : "Needs an operator: traffic was rolled back; run the restore action and confirm it"
          : "Needs an operator";
    case "paused":
      return holdHeadline(r) ?? (failed ? `Paused${at}${because}` : `Paused ${pausedWhere(r)}`);
    case "pending":
      return "Pending: held until resumed";
    case "running": {
      const held = holdHeadline(r);
      if (held) return held;
      const cur = r.manifest.steps[r.cursor];
      return cur ? `Running ${stepWords(cur)} of ${total}: ${stepAction(cur)}` : "Running";
    }
    default:
      return `${String(r.state).replaceAll("_", " ")}${at}`;
  }
}
