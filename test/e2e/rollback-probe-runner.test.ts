/**
 * Rollback prerequisites asked by runners (docs/lifecycle.md "Rollback prerequisites", asked by
 * a runner step), end to end on the embedded stack on both stores, the way a GitHub runner
 * does it: the engine has no SSH probe (as with BATON_DISPATCHER=github), so a rollback's first
 * steps are read-only probe steps, one per lane, that the local runner executes through the
 * bundled release-step action and the `inspect-lane` tool over SSH against the embedded target.
 * - v1's image removed from the machine: the probes run at once, and the first lane's probe to
 *   report says `image_present` failed; the rollback ends `aborted` naming the lane, the check
 *   and the fix, the other lane's answer is no longer awaited, its evidence (API and release
 *   record) holds the checks, and nothing was written on the control plane (its history has no
 *   write of the rollback) nor deployed (the lanes still serve v2).
 * - the image loaded again: every probe passes, the rollback runs and succeeds, the control
 *   plane's weights are the model's again and the lanes serve v1's image.
 */
import { afterEach, expect, it } from "vitest";
import { shQuote } from "../../scripts/lib/shell-quote.ts";
import {
  cpHistory,
  cpTraffic,
  describeStore,
  type InProcess,
  onTarget,
  postRecipe,
  type StoreKind,
  servedImage,
  startInProcess,
  twoLaneRecipe,
} from "../support/e2e-harness.ts";

const T = 300_000;
const V2 = `ghcr.io/acme/summarizer:v8@sha256:${"8e".repeat(32)}`;

interface Check {
  check: string;
  lane: string | null;
  outcome: string;
  message: string;
  fix: string | null;
}
interface Rel {
  id: string;
  state: string;
  reason: string | null;
  prerequisites: { ok: boolean; image: string; asked_by?: string; checks: Check[] } | null;
  step_runs: { id: string; step_index: number; state: string }[];
  history: { kind: string; message: string }[];
}

async function rollback(e: InProcess, id: string): Promise<{ status: number; body: Rel }> {
  const res = await e.api(`/v1/releases/${id}/rollback`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ reason: "v8 answers wrong", actor: "alice" }),
  });
  return { status: res.status, body: (await res.json()) as Rel };
}

for (const kind of ["sqlite", "postgres"] as StoreKind[]) {
  describeStore(kind, `rollback prerequisites asked by runner steps on ${kind}`, () => {
    let env: InProcess | null = null;
    afterEach(async () => {
      await env?.close();
      env = null;
    });

    it(
      "a runner probe refuses a rollback whose previous image is gone (lane, check and fix; nothing written on the control plane); with the image back it passes and rolls back",
      async () => {
        const e = await startInProcess(kind, { recipe: twoLaneRecipe(), rollbackProbe: "runner" });
        env = e;
        const v1 = e.recipe;
        const model = v1.model as string;
        const lanes = (v1.lanes ?? []).map((l) => l.id);
        const r1 = await postRecipe(e.api, v1);
        await e.waitFor(r1, (r) => r.state === "succeeded", `${r1} succeeded`, T);
        const v2 = { ...structuredClone(v1), image: V2, previous_image: v1.image as string };
        const r2 = await postRecipe(e.api, v2);
        await e.waitFor(r2, (r) => r.state === "succeeded", `${r2} succeeded`, T);
        for (const l of lanes) expect(await servedImage(e, l)).toBe(V2);
        const weights = (await cpTraffic(e, model)).weights;

        // Someone cleans up the machine: v1's image is gone.
        await onTarget(e, `docker rmi ${shQuote(v1.image as string)}`);
        const asked = await rollback(e, r2);
        expect(asked.status, JSON.stringify(asked.body)).toBe(201);
        const r3 = asked.body.id;
        // Created, not admitted: the lanes are asked by runner steps first.
        expect(asked.body.prerequisites?.asked_by).toBe("runner");
        expect(
          asked.body.prerequisites?.checks.filter((c) => c.lane !== null).map((c) => c.outcome),
        ).toEqual(lanes.flatMap(() => ["skipped", "skipped", "skipped"]));
        const ended = (await e.waitFor(
          r3,
          (r) => r.state === "aborted" || r.state === "succeeded",
          `${r3} ended`,
          T,
        )) as unknown as Rel;
        expect(ended.state, ended.reason ?? "").toBe("aborted");
        // Both lanes are asked at once: the first probe to report ends the rollback.
        const first = ended.prerequisites?.checks.find(
          (c) => c.check === "image_present" && c.outcome === "fail",
        )?.lane as string;
        expect(lanes).toContain(first);
        const other = lanes.find((l) => l !== first) as string;
        expect(ended.reason).toContain("rollback prerequisites failed, nothing was applied");
        expect(ended.reason).toContain(`lane ${first} image_present`);
        expect(ended.reason).toContain(`image ${v1.image} is not on this machine`);
        expect(ended.reason).toContain(`docker pull ${v1.image}`);
        const rows = ended.prerequisites?.checks.filter((c) => c.lane === first) ?? [];
        expect(rows.map((c) => [c.check, c.outcome])).toEqual([
          ["lane_credentials", "pass"],
          ["image_present", "fail"],
          ["lane_capacity", "pass"],
        ]);
        expect(ended.prerequisites?.ok).toBe(false);
        // The other lane's probe was in flight: its answer is no longer awaited.
        for (const c of ended.prerequisites?.checks.filter((x) => x.lane === other) ?? []) {
          expect(c.outcome).toBe("skipped");
          expect(c.message).toContain(`not awaited: the probe of lane ${first} failed first`);
        }
        // Only the probe steps began: nothing else of the rollback.
        expect(ended.step_runs.map((s) => s.step_index).sort()).toEqual([0, 1]);
        expect(ended.step_runs.some((s) => s.state === "failed")).toBe(true);
        expect(
          ended.history.some(
            (h) => h.kind === "prerequisites" && h.message.includes(`lane ${first}`),
          ),
        ).toBe(true);
        // The release record keeps the checks as evidence.
        const rec = (await (await e.api(`/v1/releases/${r3}/record`)).json()) as {
          evidence: { prerequisites: { ok: boolean; checks: Check[] } | null };
        };
        expect(rec.evidence.prerequisites?.ok).toBe(false);
        expect(
          rec.evidence.prerequisites?.checks.find(
            (c) => c.lane === first && c.check === "image_present",
          )?.outcome,
        ).toBe("fail");
        // Nothing written on the control plane, nothing deployed.
        expect(await cpHistory(e, r3)).toEqual([]);
        expect((await cpTraffic(e, model)).weights).toEqual(weights);
        for (const l of lanes) expect(await servedImage(e, l)).toBe(V2);

        // The image is loaded again: every probe passes and the rollback runs.
        await onTarget(e, `docker pull ${shQuote(v1.image as string)}`);
        const again = await rollback(e, r2);
        expect(again.status, JSON.stringify(again.body)).toBe(201);
        const r4 = again.body.id;
        const done = (await e.waitFor(
          r4,
          (r) => r.state === "succeeded" || r.state === "aborted",
          `${r4} ended`,
          2 * T,
        )) as unknown as Rel;
        expect(done.state, done.reason ?? "").toBe("succeeded");
        expect(done.prerequisites?.ok).toBe(true);
        for (const l of lanes) {
          expect(
            done.prerequisites?.checks.filter((c) => c.lane === l).map((c) => [c.check, c.outcome]),
          ).toEqual([
            ["lane_credentials", "pass"],
            ["image_present", "pass"],
            ["lane_capacity", "pass"],
          ]);
        }
        expect(
          done.history.some((h) =>
            h.message.includes("rollback prerequisites passed on every lane"),
          ),
        ).toBe(true);
        // The environment: the lanes serve v1 again, the control plane routes as before.
        for (const l of lanes) expect(await servedImage(e, l)).toBe(v1.image);
        expect((await cpTraffic(e, model)).weights).toEqual(weights);
        expect((await cpHistory(e, r4)).length).toBeGreaterThan(0);
      },
      4 * T,
    );
  });
}
