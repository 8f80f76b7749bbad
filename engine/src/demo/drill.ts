/**
 * `npm run drill`: a recovery drill on a drill copy of the demo fleet (docs/recovery-actions.md
 * "Drills"). The demo stack (engine on SQLite, reference control plane, SSH target, local
 * runner) serves a one-lane `recoverable` recipe whose `restore_state` names the reference
 * restore tool over a small SQLite table (`features`) that a writer here fills with one row
 * every 20 ms. A restore point is taken when the drill begins (the last known good state); the
 * writer goes on. The drill then rehearses the recovery path as a real failure would take it:
 * a release of the recipe whose redeploy fails its health check is rolled back to the last
 * known good (compensation, then recovery verification), the engine runs the restore tool
 * (rows written after the point are dropped and counted), the lanes are verified again; then
 * the same recipe rolls forward again, and succeeds.
 *
 * Measured: RTO = from the decision to roll back (the release began compensating: the
 * record's `recovery.started_at`) to the verified recovery (the verification after the
 * restore passed); RPO = the restore tool's `rpo_ms` (the restore point to the last lost
 * write). Checked against the table itself, not the engine's account: every row written
 * before the point is there, none written after it is, and `rows_lost` is their number; and
 * `rpo_ms > 0` whenever `rows_lost > 0`. The drill record goes to the engine
 * (`POST /v1/models/:model/drills`, read back), and as JSON to BATON_DRILL_RECORD when set.
 * Ends with one line `RESULT {…}`; exits 1 when a check fails.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { lostRowsWithoutRpo } from "../domain/drills.ts";
import type { RecipeInput } from "../domain/recipe.ts";
import { unwritableFileProblem } from "../node/data-dir.ts";
import { loadRecipe, type Stack, startStack } from "./stack.ts";
import { openStateTable } from "./state-table.ts";

const WRITE_EVERY_MS = 20;
const WAIT_MS = 60_000;

interface ReleaseView {
  state: string;
  reason: string | null;
  verification: { state: string; at: number | null; seq: number } | null;
}
interface RecordView {
  recovery: {
    started_at: number | null;
    restore: {
      runs?: {
        state: string;
        report: { point: string; rows_lost: number; rpo_ms: number; verified: boolean } | null;
      }[];
    } | null;
  };
}

/** The example recipe cut to one lane at 100%, recoverable, restoring `inputs`' table. */
function drillRecipe(inputs: Record<string, string>): RecipeInput {
  const r = loadRecipe();
  const lane = (r.lanes ?? [])[0];
  if (!lane) throw new Error("[drill] the example recipe has no lane");
  const { policy: _drop, ...rest } = r;
  return {
    ...rest,
    lanes: [lane],
    rollout: { waves: [{ lanes: [lane.id], traffic: 100 }] },
    policy: { rerun_window_minutes: 0 },
    recovery_class: "recoverable",
    restore_state: { tool: "restore-sqlite", inputs },
  };
}

async function json<T>(s: Stack, path: string): Promise<T> {
  const res = await s.api(path);
  if (!res.ok) throw new Error(`[drill] GET ${path}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** Polls `read` every 50 ms until `done`, at most `WAIT_MS`. */
async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, what: string) {
  const end = Date.now() + WAIT_MS;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > end) throw new Error(`[drill] timed out waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, 50));
  }
}

async function startRelease(s: Stack): Promise<string> {
  const res = await s.api("/v1/releases", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: await s.startBody(),
  });
  const body = (await res.json()) as { id?: string };
  if (res.status !== 201 || !body.id)
    throw new Error(`[drill] start: HTTP ${res.status} ${JSON.stringify(body)}`);
  return body.id;
}

/**
 * Why the drill cannot start as asked (one line with the fix), or null: it takes no options, and
 * BATON_DRILL_RECORD, when set, must be a file it can write (checked before the drill runs, so
 * its measures are never lost to a bad path at the end).
 */
export function drillStartProblem(
  args: readonly string[],
  recordTo: string | undefined,
): string | null {
  if (args.length > 0)
    return `[drill] npm run drill takes no options (got ${args.join(" ")}); fix: run it as it is, with BATON_DRILL_RECORD=<file> to keep the drill record as JSON`;
  return recordTo
    ? unwritableFileProblem(
        "[drill]",
        resolve(recordTo),
        `BATON_DRILL_RECORD=${recordTo}`,
        "BATON_DRILL_RECORD=./drill.json",
      )
    : null;
}

async function main(): Promise<number> {
  const bad = drillStartProblem(process.argv.slice(2), process.env.BATON_DRILL_RECORD);
  if (bad) {
    console.error(bad);
    return 2;
  }
  const dir = mkdtempSync(join(tmpdir(), "baton-drill-"));
  const table = openStateTable(join(dir));
  const drill = `d${Date.now()}`;
  let stack: Stack | null = null;
  let writer: NodeJS.Timeout | null = null;
  try {
    const inputs = { database: table.database, table: table.table, snapshots: table.snapshots };
    stack = await startStack({
      dir: join(dir, "stack"),
      recipe: drillRecipe(inputs),
      tickMs: 100,
      log: { info: () => {}, warn: () => {}, error: (m) => console.error(m) },
    });
    const s = stack;
    // Rows before the restore point, the point (the last known good), then rows after it.
    const before: number[] = [];
    const after: number[] = [];
    let pointTaken = false;
    let last = 0;
    const write = () => {
      const at = Math.max(Date.now(), last + 1);
      last = at;
      (pointTaken ? after : before).push(table.write(at));
    };
    for (let i = 0; i < 5; i++) write();
    const pointAt = last + 1;
    table.snapshot("last-known-good", pointAt);
    last = pointAt;
    pointTaken = true;
    writer = setInterval(write, WRITE_EVERY_MS);

    // The failure the drill rehearses: the redeploy of the lane fails its health check.
    const attach = s.manifest.steps.find((x) => x.name === "attach_queue_lane");
    s.failHealthAt(attach?.index ?? -1);
    const id = await startRelease(s);
    // The decision: the release compensates. The writer stops there (nothing writes to a
    // store being restored); everything written after the point is what the restore loses.
    await until(
      () => json<ReleaseView>(s, `/v1/releases/${id}`),
      (r) => r.state !== "pending" && r.state !== "running",
      `${id} to roll back`,
    );
    clearInterval(writer);
    writer = null;
    const ended = await until(
      () => json<ReleaseView>(s, `/v1/releases/${id}`),
      (r) =>
        ["rolled_back", "needs_operator", "aborted", "succeeded", "abandoned"].includes(r.state),
      `${id} to end`,
    );
    const rec = await json<RecordView>(s, `/v1/releases/${id}/record`);
    const run = rec.recovery.restore?.runs?.at(-1);
    const report = run?.report ?? null;
    const ids = new Set(table.ids());
    // Roll forward again: the same recipe, no fault this time.
    const next = await startRelease(s);
    const forward = await until(
      () => json<ReleaseView>(s, `/v1/releases/${next}`),
      (r) => ["succeeded", "rolled_back", "needs_operator", "aborted"].includes(r.state),
      `${next} to roll forward`,
    );

    const started = rec.recovery.started_at;
    const verifiedAt = ended.verification?.state === "passed" ? ended.verification.at : null;
    const result = {
      drill,
      model: s.manifest.model,
      release: id,
      roll_forward: next,
      rto_ms: started !== null && verifiedAt !== null ? verifiedAt - started : null,
      rpo_ms: report?.rpo_ms ?? null,
      rows_lost: report?.rows_lost ?? null,
      restore_point: report?.point ?? null,
      restored: run?.state === "succeeded" && report?.verified === true,
      verified: ended.state === "rolled_back" && verifiedAt !== null,
      rolled_forward: forward.state === "succeeded",
    };
    const problems: string[] = [];
    if (ended.state !== "rolled_back") problems.push(`${id} ended ${ended.state}: ${ended.reason}`);
    const missing = before.filter((x) => !ids.has(x));
    if (missing.length) problems.push(`rows before the point missing: ${missing.join(", ")}`);
    const kept = after.filter((x) => ids.has(x));
    if (kept.length) problems.push(`rows after the point still there: ${kept.join(", ")}`);
    if (result.rows_lost !== after.length)
      problems.push(
        `rows_lost ${result.rows_lost}, but ${after.length} rows were written after the point`,
      );
    if (lostRowsWithoutRpo(result.rows_lost, result.rpo_ms))
      problems.push(`rows_lost ${result.rows_lost} but rpo_ms ${result.rpo_ms}`);
    if (!result.restored) problems.push("the restore did not run and read back");
    if (!result.verified) problems.push("the recovery was not verified");
    if (!result.rolled_forward) problems.push(`the roll forward ${next} ended ${forward.state}`);
    if (result.rto_ms === null || result.rto_ms <= 0) problems.push(`rto_ms ${result.rto_ms}`);
    // The drill record, kept by the engine with the model's drills (POST …/drills).
    const posted = await s.api(`/v1/models/${s.manifest.model}/drills`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        drill,
        passed: problems.length === 0,
        rto_ms: result.rto_ms,
        rpo_ms: result.rpo_ms,
        rows_lost: result.rows_lost,
        restored: result.restored,
        verified: result.verified,
        release: id,
        problems: problems.map((p) => p.slice(0, 500)),
        actor: "drill",
      }),
    });
    if (posted.status !== 201)
      problems.push(
        `the engine did not record the drill: HTTP ${posted.status} ${await posted.text()}`,
      );
    const listed = await json<{ drills: { drill: string }[] }>(
      s,
      `/v1/models/${s.manifest.model}/drills`,
    );
    if (listed.drills[0]?.drill !== drill) problems.push("the engine does not list the drill");
    const record = { ...result, at: Date.now(), passed: problems.length === 0, problems };
    if (process.env.BATON_DRILL_RECORD)
      writeFileSync(process.env.BATON_DRILL_RECORD, `${JSON.stringify(record, null, 2)}\n`);
    for (const p of problems) console.error(`[drill] FAILED: ${p}`);
    console.log(
      `[drill] ${before.length} rows before the point, ${after.length} after it; ${id} rolled back, restored to ${result.restore_point}, verified; ${next} rolled forward`,
    );
    console.log(`RESULT ${JSON.stringify(result)}`);
    return problems.length === 0 ? 0 : 1;
  } finally {
    if (writer) clearInterval(writer);
    stack?.traffic.stop();
    await stack?.close();
    table.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(resolve(process.argv[1] ?? "")).href)
  process.exitCode = await main().catch((e: unknown) => {
    console.error(`[drill] ${(e as Error).message ?? e}`);
    return 1;
  });
