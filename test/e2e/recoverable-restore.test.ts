/**
 * Recovery class `recoverable` end to end on the embedded stack, both stores
 * (docs/lifecycle.md "Recovery classes"): a two-lane release whose recipe names a restore
 * action fails its second lane's health check. Compensation rolls traffic back and restores
 * every lane's image (checked on the control plane and on the lanes' health URLs, which answer
 * from the containers on the target), but the release does not end `rolled_back`: it waits
 * `needs_operator` for the restore action, offering only `confirm_restore` and `abandon`.
 * `confirm-restore` without a reason is refused naming it; with one the release ends
 * `rolled_back`, and its record (valid against the published JSON Schema) says the recovery
 * path ran, who confirmed the restore and when, and an RTO that runs to that confirmation.
 */
import { afterEach, expect, it } from "vitest";
import {
  cpTraffic,
  describeStore,
  type InProcess,
  postJson as post,
  type StoreKind,
  servedImage,
  startInProcess,
  summarize,
  twoLaneRecipe,
  waitUntil,
} from "../support/e2e-harness.ts";
import { recordSchemaErrors } from "../support/record-schema.ts";

const T = 300_000;
const RESTORE = "restore the feature store snapshot with ./ops/restore-fs.sh";

for (const kind of ["sqlite", "postgres"] as StoreKind[]) {
  describeStore(kind, `recoverable release on ${kind}`, () => {
    let env: InProcess | null = null;
    afterEach(async () => {
      await env?.close();
      env = null;
    });

    it(
      "traffic rolls back, the release waits for its restore action until an operator confirms it; the record has the recovery path and its RTO",
      async () => {
        const recipe = {
          ...twoLaneRecipe({ rerun_window_minutes: 0 }),
          recovery_class: "recoverable" as const,
          restore: RESTORE,
        };
        const e = await startInProcess(kind, { recipe });
        env = e;
        const m = e.manifest;
        const lanes = m.lanes.map((l) => l.id);
        const failing = m.steps.find((s) => s.name === "attach_queue_lane" && s.lane === lanes[1]);
        expect(failing).toBeDefined();
        const weightsBefore = (await cpTraffic(e, m.model)).weights;
        const imagesBefore = await Promise.all(lanes.map((l) => servedImage(e, l)));
        e.stack.failHealthAt(failing?.index ?? -1);
        const id = await e.startRelease();
        const waiting = await e.waitFor(
          id,
          (r) => ["needs_operator", "rolled_back", "aborted", "succeeded"].includes(r.state),
          `${id} to wait for its restore`,
          T,
        );
        expect(waiting.state, summarize(waiting)).toBe("needs_operator");
        const full = (await (await e.api(`/v1/releases/${id}`)).json()) as {
          reason: string;
          restore: { action: string; confirmed: unknown } | null;
          step_runs: { direction: string; state: string }[];
          available_actions: { action: string; command: string }[];
        };
        expect(full.restore).toMatchObject({ action: RESTORE, confirmed: null });
        expect(full.reason).toContain(`baton confirm-restore ${id}`);
        const backward = full.step_runs.filter((s) => s.direction === "bwd");
        expect(backward.length).toBeGreaterThan(0);
        for (const b of backward) expect(b.state).toBe("succeeded");
        expect(full.available_actions.map((a) => a.action).sort()).toEqual([
          "abandon",
          "confirm_restore",
        ]);
        // The environment is back where it was: the control plane's weights and the image each
        // lane's container serves (a lane reports once its restore run ends: bounded wait).
        expect((await cpTraffic(e, m.model)).weights).toEqual(weightsBefore);
        const served = await waitUntil(
          () => Promise.all(lanes.map((l) => servedImage(e, l))),
          (imgs) => imgs.every((img, i) => img === imagesBefore[i]),
          "every lane to serve its image from before the release",
          60_000,
          (imgs) => JSON.stringify(imgs),
        );
        expect(served).toEqual(imagesBefore);
        expect(served).not.toContain(m.image);

        // Refused without a reason (422 naming it); abort is refused naming the verb.
        const bare = await post(e, `/v1/releases/${id}/confirm-restore`, { actor: "alice" });
        expect(bare.status).toBe(422);
        expect(await bare.text()).toMatch(/reason is required/);
        const abort = await post(e, `/v1/releases/${id}/abort`, { reason: "x" });
        expect(abort.status).toBe(409);
        expect(await abort.text()).toContain("confirm-restore");
        expect((await e.record(id)).state).toBe("needs_operator");

        const ok = await post(e, `/v1/releases/${id}/confirm-restore`, {
          actor: "alice",
          reason: "restored snapshot fs-2041; row counts match",
        });
        expect(ok.status, await ok.clone().text()).toBe(200);
        expect((await e.record(id)).state).toBe("rolled_back");

        const rec = (await (await e.api(`/v1/releases/${id}/record`)).json()) as {
          record_version: number;
          recovery: {
            class: string;
            exercised: boolean;
            started_at: number;
            traffic_restored_at: number;
            finished_at: number;
            rto_ms: number;
            restore: { action: string; confirmed: { by: string; at: number; what: string } };
          };
          decisions: { kind: string; by: string; automatic: boolean }[];
          digest: string | null;
        };
        expect(recordSchemaErrors(rec)).toBeNull();
        expect(rec.record_version).toBe(3);
        expect(rec.recovery.class).toBe("recoverable");
        expect(rec.recovery.exercised).toBe(true);
        expect(rec.recovery.restore.action).toBe(RESTORE);
        expect(rec.recovery.restore.confirmed.by).toBe("operator:alice");
        expect(rec.recovery.restore.confirmed.what).toBe(
          "restored snapshot fs-2041; row counts match",
        );
        expect(rec.recovery.finished_at).toBe(rec.recovery.restore.confirmed.at);
        expect(rec.recovery.traffic_restored_at).toBeLessThanOrEqual(rec.recovery.finished_at);
        expect(rec.recovery.rto_ms).toBe(rec.recovery.finished_at - rec.recovery.started_at);
        expect(rec.recovery.rto_ms).toBeGreaterThan(0);
        expect(rec.decisions.find((d) => d.kind === "confirm_restore")).toMatchObject({
          by: "operator:alice",
          automatic: false,
        });
        expect(rec.digest).toMatch(/^[0-9a-f]{64}$/);
      },
      3 * T,
    );
  });
}
