/**
 * `baton demo --recipe recipes/migration.yaml --record FILE` (one child process, real
 * parts): expand → migrate (the `migrate-table` tool backfills a 200-row SQLite table on the
 * SSH target, checkpointed and verified) → activate; exit 0, `succeeded`; the record (checked
 * against the published JSON Schema) names the phases with their checkpoint and evidence; then
 * the demo shows the contract refused with when it may run, and still exits 0.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { spawnDemo } from "../support/demo-process.ts";
import { recordSchemaErrors } from "../support/record-schema.ts";

it("recipes/migration.yaml: expand, migrate and activate succeed (exit 0), the record shows the phases, the contract is refused with when it may run", async () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-demo-migration-"));
  const file = join(dir, "record.json");
  const d = await spawnDemo(["--recipe", "recipes/migration.yaml", "--record", file]);
  try {
    const end = await d.exit(560_000);
    const out = d.output();
    expect(end?.code, out).toBe(0);
    expect(out).toContain("ended succeeded");
    expect(out).toMatch(/table customers now: 200 rows, 200 with email_norm, 200 row writes/);
    expect(out).toMatch(
      /contract {7}refused \(HTTP 409 contract_not_yet\): .*the rollback window of r1, which activated the new form, is open until \d{4}-\d\d-\d\dT[\d:.]+Z .*it may run from \d{4}-/,
    );
    const doc = JSON.parse(readFileSync(file, "utf8")) as {
      release: { state: string };
      migration?: {
        phases: {
          phase: string;
          state: string;
          checkpoints?: { checkpoint: { after_key: number } }[];
          evidence?: { checks: { name: string; passed: boolean }[] }[];
        }[];
        contract_may_run_from: number | null;
      };
    };
    expect(recordSchemaErrors(doc)).toBeNull();
    expect(doc.release.state).toBe("succeeded");
    const phases = doc.migration?.phases ?? [];
    expect(phases.map((p) => [p.phase, p.state])).toEqual([
      ["expand", "succeeded"],
      ["migrate", "succeeded"],
      ["activate", "succeeded"],
    ]);
    const migrate = phases[1]!;
    expect(migrate.checkpoints?.at(-1)?.checkpoint.after_key).toBe(200);
    expect(migrate.evidence?.at(-1)?.checks.every((c) => c.passed)).toBe(true);
    expect(typeof doc.migration?.contract_may_run_from).toBe("number");
  } finally {
    d.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}, 600_000);
