/**
 * A rollback's read-only probe steps (docs/lifecycle.md "Rollback prerequisites"; the step is
 * `PROBE_STEP` in domain/prerequisites.ts): one runner step per lane, first in the table, that
 * asks the lane's machine whether the rollback can run there. Their answers are the lane rows
 * of `release.prerequisites`; a probe that does not pass (a failed check, a lost dispatch, no
 * callback by the deadline) ends the rollback `aborted` before any of its effects was applied.
 */
import {
  checksNotAnswered,
  isProbeStep,
  type PrerequisiteCheck,
  prerequisitesSummary,
  probeLaneOf,
} from "../prerequisites.ts";
import type { Json, Release, StepRun } from "../types.ts";
import { type Draft, stepOf } from "./draft.ts";

/** Whether `sr` is a forward step run of a probe step (read-only: never counted as an effect). */
export function isProbeRun(r: Release, sr: Pick<StepRun, "step_index" | "direction">): boolean {
  return sr.direction === "fwd" && isProbeStep(r.manifest.steps[sr.step_index]);
}

/** The exit named when a probe failed: roll the succeeded release back again. */
function rollbackAgain(r: Release): string {
  const of = r.lineage?.of;
  return of
    ? `roll back again once it is fixed (baton rollback ${of})`
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
 * first and touch nothing), so nothing is compensated.
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
  // Lanes whose probe never began: not asked (their rows still say "asking: …").
  if (r.prerequisites) {
    r.prerequisites = {
      ...r.prerequisites,
      checks: r.prerequisites.checks.map((c) =>
        c.outcome === "skipped" && c.message.startsWith("asking:")
          ? { ...c, message: `not asked: the probe of lane ${lane} failed first` }
          : c,
      ),
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

/** After a probe passed: when it was the last one, say the rollback is admitted. */
export function probePassed(d: Draft, sr: StepRun): void {
  const r = d.release;
  const next = r.manifest.steps[sr.step_index + 1];
  if (isProbeStep(next) || !r.prerequisites) return;
  d.accept(
    `[engine] rollback prerequisites passed on every lane (${prerequisitesSummary(r.prerequisites)}); the rollback is admitted and its first step begins`,
    sr.id,
  );
}
