/**
 * A rollback's read-only probe steps (docs/lifecycle.md "Rollback prerequisites"; the step is
 * `PROBE_STEP` in domain/prerequisites.ts): one runner step per lane, first in the table, that
 * asks the lane's machine whether the rollback can run there. They run concurrently (up to
 * `PROBES_IN_FLIGHT_MAX` at once): the cursor stays on the first probe not yet passed, and
 * the rollback's first step begins only once every probe passed. Their answers are the lane
 * rows of `release.prerequisites`; a probe that does not pass (a failed check, a lost
 * dispatch, no callback by the deadline) ends the rollback `aborted` before any of its effects
 * was applied, and the other probes' answers are no longer taken.
 * The progress is derived from the durable step runs, so a restarted engine resumes it.
 */
import {
  checksNotAnswered,
  isProbeStep,
  PROBES_IN_FLIGHT_MAX,
  type PrerequisiteCheck,
  prerequisitesSummary,
  probeLaneOf,
} from "../prerequisites.ts";
import type { Json, Release, StepRun } from "../types.ts";
import { suggestedCommand } from "../verbs.ts";
import { type Draft, describe, stepOf, stepRunAt } from "./draft.ts";
import { guards } from "./guards.ts";

/** Whether `sr` is a forward step run of a probe step (read-only: never counted as an effect). */
export function isProbeRun(r: Release, sr: Pick<StepRun, "step_index" | "direction">): boolean {
  return sr.direction === "fwd" && isProbeStep(r.manifest.steps[sr.step_index]);
}

/** Indexes of the release's probe steps (the first rows of a rollback's table), in order. */
export function probeIndexes(r: Release): number[] {
  return r.manifest.steps.filter((s) => isProbeStep(s)).map((s) => s.index);
}

/** Whether the cursor is on a probe step: the rollback is still asking its lanes. */
export function atProbes(r: Release): boolean {
  return isProbeStep(r.manifest.steps[r.cursor]);
}

/**
 * Moves the cursor to the first probe step whose forward step run has not succeeded, or past
 * the last probe when every probe passed (then returns true). Probes pass in any order.
 */
function probeCursor(r: Release): boolean {
  const probes = probeIndexes(r);
  const pending = probes.filter((i) => stepRunAt(r, i, "fwd")?.state !== "succeeded");
  if (pending.length === 0) {
    r.cursor = probes.length > 0 ? Math.max(...probes) + 1 : r.cursor;
    return true;
  }
  r.cursor = Math.min(...pending);
  return false;
}

/**
 * Drives the probe steps (the cursor is on one): begins, in table order, every probe that has
 * no step run yet while fewer than `PROBES_IN_FLIGHT_MAX` are in flight. When every probe has
 * passed, moves the cursor past them and returns true (the caller begins the rollback's first
 * step). Begins nothing unless the release is `running`.
 */
export function advanceProbes(d: Draft, begin: (index: number) => void): boolean {
  const r = d.release;
  if (probeCursor(r)) return true;
  if (r.state !== "running") return false;
  const probes = probeIndexes(r);
  let flying = probes.filter((i) => {
    const sr = stepRunAt(r, i, "fwd");
    return sr !== undefined && guards.inFlight(sr);
  }).length;
  for (const i of probes) {
    if (flying >= PROBES_IN_FLIGHT_MAX) break;
    if (stepRunAt(r, i, "fwd")) continue;
    begin(i);
    flying += 1;
  }
  return false;
}

/** The exit named when a probe failed: roll the succeeded release back again. */
function rollbackAgain(r: Release): string {
  const of = r.lineage?.of;
  return of
    ? `roll back again once it is fixed (${suggestedCommand("rollback", { target: of })})`
    : "start the rollback again once it is fixed";
}

/**
 * Puts `checks` (the three rows of the probed lane) into `release.prerequisites` in place of
 * that lane's rows, recomputes `ok` and `at`, and writes a `prerequisites` history entry.
 */
export function recordProbeAnswer(d: Draft, sr: StepRun, checks: PrerequisiteCheck[]): void {
  const r = d.release;
  const lane = probeLaneOf(stepOf(r, sr));
  const p = r.prerequisites;
  if (!p || lane === null) return;
  const rows = [...p.checks.filter((c) => c.lane !== lane), ...checks];
  // Keep the order: the release's row first, then lanes in manifest order, checks in order.
  const order = new Map(r.manifest.lanes.map((l, i) => [l.id, i]));
  rows.sort((a, b) =>
    a.lane === null
      ? -1
      : b.lane === null
        ? 1
        : (order.get(a.lane) ?? 0) - (order.get(b.lane) ?? 0),
  );
  r.prerequisites = {
    ...p,
    checks: rows,
    ok: rows.every((c) => c.outcome !== "fail"),
    at: d.now,
  };
  const failed = checks.filter((c) => c.outcome === "fail");
  const passed = checks.filter((c) => c.outcome === "pass").length;
  d.history.push({
    release_id: r.id,
    at: d.now,
    kind: "prerequisites",
    step_run_id: sr.id,
    outcome: "accepted",
    message: `[engine] rollback prerequisites of lane ${lane} asked by runner step ${sr.id}: ${passed} passed, ${failed.length} failed${failed.length ? `: ${failed.map((c) => `${c.check}: ${c.message}; fix: ${c.fix}`).join("; ")}` : ""}`,
    data: { lane, checks } as unknown as Json,
  });
}

/**
 * A probe step run settled without passing: its lane's rows say why (a failed check, or "not
 * answered" when the runner never reported), and the rollback ends `aborted` with the lane,
 * the check and the fix in its reason. Nothing of the rollback itself ran (the probes come
 * first and touch nothing), so nothing is compensated. The other probes still in flight are
 * no longer awaited: one no runner started yet is cancelled (its preflight is refused: the
 * generation moves), a running one's callback is refused as late; their lanes' rows say so.
 */
export function endOnFailedProbe(d: Draft, sr: StepRun): void {
  const r = d.release;
  const lane = probeLaneOf(stepOf(r, sr)) ?? "?";
  const answered = r.prerequisites?.checks.some(
    (c) => c.lane === lane && c.outcome === "fail" && !c.message.startsWith("not answered:"),
  );
  if (!answered) {
    const why =
      sr.state === "unknown"
        ? `${sr.last_error ?? "the probe's outcome is unknown"} (probe step run ${sr.id})`
        : `probe step run ${sr.id} ended ${sr.state}${sr.last_error ? `: ${sr.last_error}` : ""}`;
    recordProbeAnswer(
      d,
      sr,
      checksNotAnswered(
        lane,
        why,
        `check that the release-step workflow runs (its runner, BATON_ENGINE_URL, the callback secret), then ${rollbackAgain(r)}`,
      ),
    );
  }
  // The other probes in flight: lane -> step run id; those no runner started are cancelled.
  const flying = new Map<string, string>();
  for (const o of r.step_runs) {
    if (o.id === sr.id || !isProbeRun(r, o) || !guards.inFlight(o)) continue;
    const other = probeLaneOf(stepOf(r, o));
    if (other !== null) flying.set(other, o.id);
    if (guards.awaitsFirstRun(o)) {
      o.state = "failed";
      o.finished_at = d.now;
      o.last_error = `cancelled: the probe of lane ${lane} failed first, before a runner started this one`;
      d.accept(`[engine] ${describe(r, o)} ${o.last_error}`, o.id);
    }
  }
  // Lanes whose probe was in flight: not awaited; never begun: not asked (rows still "asking: …").
  if (r.prerequisites) {
    r.prerequisites = {
      ...r.prerequisites,
      checks: r.prerequisites.checks.map((c) => {
        if (c.outcome !== "skipped" || !c.message.startsWith("asking:")) return c;
        const id = c.lane === null ? undefined : flying.get(c.lane);
        return {
          ...c,
          message: id
            ? `not awaited: the probe of lane ${lane} failed first; this lane's probe (${id}) was in flight and its answer is not taken`
            : `not asked: the probe of lane ${lane} failed first`,
        };
      }),
    };
  }
  const failed = (r.prerequisites?.checks ?? []).filter((c) => c.outcome === "fail");
  r.state = "aborted";
  r.generation += 1;
  r.rerun_deadline = null;
  r.hold = null;
  r.gate = null;
  r.reason = `rollback prerequisites failed, nothing was applied: ${failed.map((c) => `lane ${c.lane} ${c.check}: ${c.message}; fix: ${c.fix}`).join("; ")}`;
  d.accept(`[engine] release ${r.id} aborted: ${r.reason}`, sr.id, {
    prerequisite_failed: failed.map((c) => ({ lane: c.lane, check: c.check })) as unknown as Json,
  });
}

/**
 * After a probe passed: moves the cursor to the first probe still asking (past the probes
 * once every one passed) and, when it was the last, says the rollback is admitted. The caller
 * then begins what comes next (more probes, or the rollback's first step) unless held.
 */
export function probePassed(d: Draft, sr: StepRun): void {
  const r = d.release;
  if (!probeCursor(r) || !r.prerequisites) return;
  d.accept(
    `[engine] rollback prerequisites passed on every lane (${prerequisitesSummary(r.prerequisites)}); the rollback is admitted and its first step begins`,
    sr.id,
  );
}
