/**
 * Text output of the read commands: the releases table, one release's summary, and the lines
 * `watch` prints. Pure functions of the engine's JSON (`GET /v1/releases[/:id]`).
 */
import type { ReleaseState } from "../domain/states.ts";
import type { HistoryEntry, Manifest, StepRun } from "../domain/types.ts";
import { duration, time } from "../http/dashboard/format.ts";
import type { ReleaseSummary } from "../ports/store.ts";

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
}

export const TERMINAL: ReadonlySet<string> = new Set(["succeeded", "rolled_back", "aborted"]);
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
    ["ID", "STATE", "RECIPE", "MODEL", "STEP", "STARTED", "DURATION"],
    ...rows.map((r) => [
      r.id,
      r.state,
      r.recipe_name,
      r.model,
      `${Math.max(0, Math.min(r.cursor, r.step_count))}/${r.step_count}`,
      time(r.created_at),
      duration((TERMINAL.has(r.state) ? r.updated_at : now) - r.created_at),
    ]),
  ]);
}

function stepName(rec: RecordJson, sr: StepRun): string {
  const step = rec.manifest.steps[sr.step_index];
  const action = sr.direction === "fwd" ? step?.forward : step?.backward;
  return `${action?.name ?? step?.name ?? "?"}${step?.lane ? ` (${step.lane})` : ""}`;
}

/** One line for a step run: index, direction, name, state, latest attempt. */
export function stepRunLine(rec: RecordJson, sr: StepRun): string {
  const a = sr.attempts.at(-1);
  const att = a ? `, attempt ${a.n} (run ${a.run_id}/${a.run_attempt})` : "";
  const err = sr.last_error && !["succeeded"].includes(sr.state) ? ` — ${sr.last_error}` : "";
  const dir = sr.direction === "fwd" ? "→" : "←";
  return `${dir} step ${sr.step_index} ${stepName(rec, sr)}: ${sr.state}${att}${err}`;
}

/** A release's summary: header, reason, step runs in order, the last refused events. */
export function releaseSummary(rec: RecordJson, now: number): string[] {
  const live = !TERMINAL.has(rec.state);
  const lines = [
    `${rec.id}  ${rec.state}  ${rec.manifest.recipe_name} / ${rec.manifest.model}`,
    `  started ${time(rec.created_at)}, ${live ? "running for" : "took"} ${duration((live ? now : rec.updated_at) - rec.created_at)}`,
    `  manifest ${rec.manifest_digest}, image ${rec.manifest.image}`,
    `  high-water mark: ${rec.high_water_mark < 0 ? "none" : `step ${rec.high_water_mark}`}, cursor ${rec.cursor} of ${rec.manifest.steps.length} steps, generation ${rec.generation}`,
  ];
  if (rec.reason) lines.push(`  reason: ${rec.reason}`);
  if (WAITING.has(rec.state)) {
    lines.push(
      `  waiting for an operator: baton resume ${rec.id}, baton retry <step-run>, or baton abort ${rec.id}`,
    );
  }
  lines.push("step runs:");
  if (rec.step_runs.length === 0) lines.push("  (none yet)");
  for (const sr of rec.step_runs) lines.push(`  ${sr.id.padEnd(12)} ${stepRunLine(rec, sr)}`);
  const refused = rec.history.filter((h) => h.outcome === "refused");
  if (refused.length > 0) {
    lines.push(`refused events: ${refused.length} (last ${Math.min(3, refused.length)} shown)`);
    for (const h of refused.slice(-3)) lines.push(`  ${time(h.at)} ${h.kind}: ${h.message}`);
  }
  return lines;
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
  };
}
