/**
 * The restore step of a `recoverable` recipe that declares `restore_state` (docs/recovery-actions.md
 * "Restore state"). It is not a row of the step table (the class never changes the table): it
 * is one more runner step the release runs after its traffic rollback, at index
 * `manifest.steps.length`, backward (it recovers), dispatched, preflighted and called back like
 * any runner step. Its action is built here from the recipe's tool and inputs and the restore
 * point its latest run asks for; the tool's `restore` and `verify` checks are its report.
 */
import type { Json, ManifestStep, Release, RestoreReport, RestoreRun } from "./types.ts";

/** The step name of the restore step (history, step-run pages, the record). */
export const RESTORE_STEP = "restore_state";

/** The point the automatic restore asks for when the recipe names none. */
export const DEFAULT_RESTORE_POINT = "latest";

/** The restore step's index: one past the step table. */
export function restoreIndex(r: Pick<Release, "manifest">): number {
  return r.manifest.steps.length;
}

/** Whether the release's recipe declares a restore tool (`restore_state`). */
export function hasRestoreTool(r: Pick<Release, "manifest">): boolean {
  return r.manifest.recovery?.class === "recoverable" && !!r.manifest.recovery.restore_state;
}

/** Whether `sr` is a run of the restore step. */
export function isRestoreRun(
  r: Pick<Release, "manifest">,
  sr: { step_index: number; direction: string },
): boolean {
  return hasRestoreTool(r) && sr.step_index === restoreIndex(r) && sr.direction === "bwd";
}

/** The latest restore tool run of `r`, if any. */
export function latestRestoreRun(r: Pick<Release, "restore">): RestoreRun | undefined {
  const runs = r.restore?.runs ?? [];
  return runs[runs.length - 1];
}

/** What an operator reads as the restore action when the recipe declares a restore tool. */
export function restoreToolWords(r: Pick<Release, "manifest">): string {
  const spec = r.manifest.recovery?.restore_state;
  if (!spec) return "";
  return `the engine runs restore tool \`${spec.tool}\` to point ${spec.point ?? DEFAULT_RESTORE_POINT}`;
}

/**
 * The restore step as a table row (never stored in the manifest): the recipe's tool with its
 * inputs, the point of the latest run (else the recipe's), the release and its model; the
 * deadlines of the table's runner steps. Undefined when the recipe declares no restore tool.
 */
export function restoreStepOf(r: Pick<Release, "manifest" | "restore">): ManifestStep | undefined {
  const spec = r.manifest.recovery?.restore_state;
  if (r.manifest.recovery?.class !== "recoverable" || !spec) return undefined;
  const runs = r.restore?.runs ?? [];
  const point = latestRestoreRun(r)?.point ?? spec.point ?? DEFAULT_RESTORE_POINT;
  const runner = r.manifest.steps.find((s) => s.kind === "runner");
  const action = {
    kind: "runner" as const,
    name: RESTORE_STEP,
    target: `restore=${point}:run=${Math.max(runs.length, 1)}`,
    tool: spec.tool,
    args: {
      model: r.manifest.model,
      point,
      inputs: { ...(spec.inputs ?? {}) },
    } as Record<string, Json>,
  };
  return {
    index: restoreIndex(r),
    name: RESTORE_STEP,
    kind: "runner",
    lane: null,
    wave: 0,
    forward: action,
    backward: action,
    retries: 0,
    on_failure: "compensate",
    start_deadline_ms: runner?.start_deadline_ms ?? 600_000,
    callback_deadline_ms: runner?.callback_deadline_ms ?? 1_800_000,
  };
}

/** Thrown by `restoreReportOf` for a `restore` check that is not a report: path and fix. */
export class RestoreReportError extends Error {
  constructor(
    readonly path: string,
    message: string,
    readonly fix: string,
  ) {
    super(message);
  }
}

const num = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0;

/**
 * The report in a restore tool's checks.json: its `restore` check (`point`, `point_at` epoch ms,
 * `rows_lost`, `rpo_ms`, `rows_restored`) and its `verify` check (`status: ok` = the tool read
 * the restored state back and it equals the point's). Null when there is no `restore` check;
 * a `restore` check that is not `ok` is no report either (the run failed). Throws
 * `RestoreReportError` for an `ok` check with a missing or negative field.
 */
export function restoreReportOf(checks: unknown): RestoreReport | null {
  if (!Array.isArray(checks)) return null;
  const row = checks.find(
    (c): c is Record<string, unknown> =>
      !!c && typeof c === "object" && (c as { name?: unknown }).name === "restore",
  );
  if (row?.status !== "ok") return null;
  for (const f of ["point_at", "rows_lost", "rpo_ms", "rows_restored"] as const) {
    if (!num(row[f]))
      throw new RestoreReportError(
        `checks.restore.${f}`,
        `the restore check has no ${f} (a number >= 0)`,
        `the restore tool must write ${f} in its restore check (docs/recovery-actions.md "The restore tool's report")`,
      );
  }
  if (typeof row.point !== "string" || row.point === "")
    throw new RestoreReportError(
      "checks.restore.point",
      "the restore check names no point",
      'the restore tool must write the point it restored to as `point` in its restore check (docs/recovery-actions.md "The restore tool\'s report")',
    );
  const verify = checks.find(
    (c) => !!c && typeof c === "object" && (c as { name?: unknown }).name === "verify",
  ) as { status?: unknown } | undefined;
  return {
    point: row.point,
    point_at: row.point_at as number,
    rows_lost: row.rows_lost as number,
    rpo_ms: row.rpo_ms as number,
    rows_restored: row.rows_restored as number,
    verified: verify?.status === "ok",
  };
}

/** `point snap-1 (taken …), 3 rows lost, RPO 1200 ms, 40 rows restored, read back equal`. */
export function restoreReportWords(rep: RestoreReport): string {
  return `point ${rep.point} (taken ${new Date(rep.point_at).toISOString()}), ${rep.rows_lost} rows lost, RPO ${rep.rpo_ms} ms, ${rep.rows_restored} rows restored, ${rep.verified ? "read back equal to the point" : "NOT read back equal to the point"}`;
}
