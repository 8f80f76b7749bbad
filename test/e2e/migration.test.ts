/**
 * A migration end to end on the embedded stack, both stores (docs/recipes.md "Migrations"):
 * the real `migrate-table` tool, run by the local runner through the bundled action, backfills
 * a 50-row SQLite table on the lane's machine in batches of 10. The first attempt dies in its
 * third batch (a trigger aborts it: that batch's transaction is rolled back, as a killed
 * process's would be) after two batches committed and were checkpointed; the release waits for
 * a re-run. The re-run ("Re-run failed jobs": the same dispatch payload) gets the checkpoint
 * back from the preflight and continues from it: every row is written exactly once (the
 * table's own write counter says so), the verifications pass, and the release activates and
 * succeeds. The record shows the phases, the checkpoints and the evidence.
 */
import { expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { stepRunId } from "../../engine/src/protocol/ids.ts";
import {
  describeInProcess,
  onTarget,
  rerunWhenCompleted,
  summarize,
  TERMINAL,
  twoLaneRecipe,
} from "../support/e2e-harness.ts";

const T = 300_000;
const DB = "migration-e2e.db";

function recipe(): RecipeInput {
  return {
    ...twoLaneRecipe(),
    migration: {
      id: "email-norm",
      inputs: { database: DB, table: "customers", from: "email", to: "email_norm", batch: 10 },
      expand: { forward: "migrate-table", backward: "migrate-table" },
      migrate: { forward: "migrate-table", backward: "migrate-table", on_failure: "pause" },
    },
  };
}

const sqlite = (sql: string) => `sqlite3 -batch -bail ${DB} '${sql.replace(/'/g, "'\\''")}'`;

describeInProcess(
  (kind) => `migration on ${kind}`,
  (start) => {
    it(
      "an attempt that dies mid-backfill is re-run from its checkpoint without redoing rows, verified, then activated",
      async () => {
        const e = await start({ recipe: recipe() });
        const rows = Array.from(
          { length: 50 },
          (_, i) => `(${i + 1}, '  User${i + 1}@Example.COM ')`,
        ).join(",");
        await onTarget(
          e,
          sqlite(
            `DROP TABLE IF EXISTS customers; CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT NOT NULL); INSERT INTO customers VALUES ${rows};`,
          ),
        );
        // Batch 3 (ids 21-30) dies: its transaction is rolled back.
        await onTarget(
          e,
          sqlite(
            "CREATE TRIGGER crash BEFORE UPDATE ON customers WHEN NEW.id > 20 BEGIN SELECT RAISE(ABORT, 'runner lost'); END;",
          ),
        );
        const m = e.manifest;
        const migrate = m.steps.find((s) => s.name === "migrate")!;
        const expand = m.steps.find((s) => s.name === "expand")!;
        expect(expand.index).toBeLessThan(migrate.index);
        expect(m.steps[migrate.index + 1]?.name).toBe("drain_wave");

        const id = await e.startRelease();
        const n = Number(id.slice(1));
        const srId = stepRunId(n, migrate.index, false);
        const paused = await e.waitFor(
          id,
          (r) => r.state === "paused" || TERMINAL.has(r.state),
          "the release to wait for a re-run of migrate",
          T,
        );
        expect(paused.state, summarize(paused)).toBe("paused");
        const written = async () =>
          (
            await onTarget(
              e,
              sqlite(
                "SELECT count(email_norm), coalesce(sum(email_norm_writes),0), coalesce(max(email_norm_writes),0) FROM customers;",
              ),
            )
          ).trim();
        expect(await written()).toBe("20|20|1");

        await onTarget(e, sqlite("DROP TRIGGER crash;"));
        expect(await rerunWhenCompleted(e.stack.runner, srId, "lee")).toMatchObject({ attempt: 2 });
        const done = await e.waitFor(id, (r) => TERMINAL.has(r.state), `${id} to end`, T);
        expect(done.state, summarize(done)).toBe("succeeded");
        // 50 rows, each written exactly once: the re-run began after the checkpoint.
        expect(await written()).toBe("50|50|1");

        const rec = (await (await e.api(`/v1/releases/${id}/record`)).json()) as {
          migration?: {
            id: string;
            phases: {
              phase: string;
              state: string;
              checkpoints?: { attempt: number; checkpoint: Record<string, unknown> }[];
              evidence?: { attempt: number; checks: { name: string; passed: boolean }[] }[];
            }[];
          };
        };
        const phases = rec.migration?.phases ?? [];
        expect(phases.map((p) => [p.phase, p.state])).toEqual([
          ["expand", "succeeded"],
          ["migrate", "succeeded"],
          ["activate", "succeeded"],
        ]);
        const mig = phases.find((p) => p.phase === "migrate")!;
        expect(mig.checkpoints?.map((c) => [c.attempt, c.checkpoint.after_key])).toEqual([
          [1, 20],
          [2, 50],
        ]);
        expect(mig.evidence?.at(-1)?.checks.map((c) => [c.name, c.passed])).toEqual([
          ["count", true],
          ["integrity", true],
          ["equivalence", true],
        ]);
      },
      T,
    );
  },
);
