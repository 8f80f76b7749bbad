/**
 * `restore_state` end to end on the embedded stack, both stores (docs/recovery-actions.md
 * "Restore state"): a two-lane `recoverable` release whose recipe declares a restore tool
 * (`restore-sqlite`) fails its second lane's health check. Compensation rolls traffic back and
 * its verification passes; then the engine runs the restore tool as a runner step (the local
 * runner, the bundled action, preflight and callback), which restores a SQLite table to its
 * latest restore point; the lanes are verified again and the release ends `rolled_back` with
 * no operator. The witness for the restore is the table itself: rows written before the point
 * are there, the rows written after it are gone and counted in `rows_lost`, with `rpo_ms` the
 * time from the point to the last of them. A second release whose restore point does not
 * exist waits `needs_operator`; `restore-state --point` to a point that exists ends it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { openStateTable } from "../../engine/src/demo/state-table.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import {
  describeInProcess,
  postJson as post,
  summarize,
  TERMINAL,
  twoLaneRecipe,
} from "../support/e2e-harness.ts";
import { recordSchemaErrors } from "../support/record-schema.ts";

const T = 300_000;

interface RestoreRecord {
  state: string;
  recovery: {
    class: string;
    restore: {
      confirmed: { by: string; what: string } | null;
      runs: {
        by: string;
        point: string;
        state: string;
        step_run_id: string;
        report: {
          point: string;
          rows_lost: number;
          rpo_ms: number;
          rows_restored: number;
          verified: boolean;
        } | null;
      }[];
    };
  };
}

function recipe(inputs: Record<string, string>, point?: string): RecipeInput {
  return {
    ...twoLaneRecipe({ rerun_window_minutes: 0 }),
    recovery_class: "recoverable",
    restore_state: { tool: "restore-sqlite", inputs, ...(point ? { point } : {}) },
  };
}

describeInProcess(
  (kind) => `restore_state on ${kind}`,
  (start) => {
    it(
      "after the traffic rollback the engine runs the restore tool: rows before the point stay, rows after it are lost and counted, and the release ends rolled_back",
      async () => {
        const dir = mkdtempSync(join(tmpdir(), "baton-restore-"));
        const table = openStateTable(dir);
        try {
          const t0 = Date.now();
          const before = [table.write(t0), table.write(t0 + 1), table.write(t0 + 2)];
          table.snapshot("snap-1", t0 + 10);
          table.write(t0 + 20);
          table.write(t0 + 1_020);
          const inputs = {
            database: table.database,
            table: table.table,
            snapshots: table.snapshots,
          };
          const e = await start({ recipe: recipe(inputs) });
          const m = e.manifest;
          const lanes = m.lanes.map((l) => l.id);
          const failing = m.steps.find(
            (s) => s.name === "attach_queue_lane" && s.lane === lanes[1],
          );
          e.stack.failHealthAt(failing?.index ?? -1);
          const id = await e.startRelease();
          const done = await e.waitFor(
            id,
            (r) => TERMINAL.has(r.state) || r.state === "needs_operator",
            `${id} to end`,
            T,
          );
          expect(done.state, summarize(done)).toBe("rolled_back");

          // The table: what the point had, nothing written after it.
          expect(table.ids()).toEqual(before);
          // The runner ran the restore tool once, for the restore step run.
          const runs = e.stack.runner
            .list()
            .filter((r) => r.payload.release?.id === id && r.payload.tool === "restore-sqlite");
          expect(runs).toHaveLength(1);

          const rec = (await (await e.api(`/v1/releases/${id}/record`)).json()) as RestoreRecord;
          expect(recordSchemaErrors(rec)).toBeNull();
          const run = rec.recovery.restore.runs[0];
          expect(run).toMatchObject({ by: "engine", point: "latest", state: "succeeded" });
          expect(run?.report).toMatchObject({
            point: "snap-1",
            rows_lost: 2,
            rows_restored: 3,
            verified: true,
          });
          expect(run?.report?.rpo_ms).toBe(1_010);
          expect(rec.recovery.restore.confirmed?.by).toBe("engine");
          expect(rec.recovery.restore.confirmed?.what).toContain("2 rows lost");
          // Recovery verification ran again after the restore, and passed.
          const v = (await (await e.api(`/v1/releases/${id}`)).json()) as {
            verification: { seq: number; state: string };
          };
          expect(v.verification).toMatchObject({ seq: 2, state: "passed" });
        } finally {
          table.close();
          rmSync(dir, { recursive: true, force: true });
        }
      },
      3 * T,
    );

    it(
      "a restore that fails waits for an operator; restore-state to a named point runs the tool again and ends the release",
      async () => {
        const dir = mkdtempSync(join(tmpdir(), "baton-restore-"));
        const table = openStateTable(dir);
        try {
          const t0 = Date.now();
          const kept = [table.write(t0), table.write(t0 + 1)];
          table.snapshot("nightly", t0 + 5);
          table.write(t0 + 505);
          const inputs = {
            database: table.database,
            table: table.table,
            snapshots: table.snapshots,
          };
          const e = await start({ recipe: recipe(inputs, "no-such-point") });
          const m = e.manifest;
          const failing = m.steps.find(
            (s) => s.name === "attach_queue_lane" && s.lane === m.lanes[1]?.id,
          );
          e.stack.failHealthAt(failing?.index ?? -1);
          const id = await e.startRelease();
          const waiting = await e.waitFor(
            id,
            (r) => TERMINAL.has(r.state) || r.state === "needs_operator",
            `${id} to wait`,
            T,
          );
          expect(waiting.state, summarize(waiting)).toBe("needs_operator");
          const full = (await (await e.api(`/v1/releases/${id}`)).json()) as {
            reason: string;
            available_actions: { action: string }[];
          };
          expect(full.reason).toContain("no restore point no-such-point");
          expect(full.reason).toContain(`baton restore-state ${id}`);
          expect(full.available_actions.map((a) => a.action).sort()).toEqual([
            "abandon",
            "confirm_restore",
            "restore_state",
          ]);
          expect(table.ids()).toHaveLength(3);

          const bare = await post(e, `/v1/releases/${id}/restore-state`, {
            actor: "alice",
            point: "nightly",
          });
          expect(bare.status).toBe(422);
          const bad = await post(e, `/v1/releases/${id}/restore-state`, {
            actor: "alice",
            reason: "x",
            point: "../etc",
          });
          expect(bad.status).toBe(400);
          expect(await bad.text()).toContain("point");
          const ok = await post(e, `/v1/releases/${id}/restore-state`, {
            actor: "alice",
            reason: "the nightly snapshot is the last good one",
            point: "nightly",
          });
          expect(ok.status, await ok.clone().text()).toBe(202);
          const done = await e.waitFor(id, (r) => TERMINAL.has(r.state), `${id} to end`, T);
          expect(done.state, summarize(done)).toBe("rolled_back");
          expect(table.ids()).toEqual(kept);
          const rec = (await (await e.api(`/v1/releases/${id}/record`)).json()) as RestoreRecord;
          expect(recordSchemaErrors(rec)).toBeNull();
          expect(rec.recovery.restore.runs.map((r) => [r.by, r.point, r.state])).toEqual([
            ["engine", "no-such-point", "failed"],
            ["operator:alice", "nightly", "succeeded"],
          ]);
          expect(rec.recovery.restore.runs[1]?.report).toMatchObject({ rows_lost: 1, rpo_ms: 500 });
        } finally {
          table.close();
          rmSync(dir, { recursive: true, force: true });
        }
      },
      3 * T,
    );
  },
);
