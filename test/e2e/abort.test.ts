/**
 * `abort` end to end on the embedded stack (engine, reference control plane, SSH target
 * running deploy.sh, local runner), on both stores (docs/lifecycle.md). A two-lane release with
 * `promotion: manual` applies wave 1 (lane-a runs the candidate at 50%) and waits `paused` for
 * promote; the operator aborts it:
 * - without a reason the abort is refused (422 naming `reason`) and nothing changes;
 * - with one, no further exposure happens (lane-b is never taken out of service) and
 *   compensation runs the step table backwards to the end (`rolled_back`, its reason naming the
 *   abort, docs/state-machine.md): the control plane's weights and markers are
 *   back to the baseline, each lane's health URL answers from a container running the previous
 *   image again, and the router sends the candidate none of its requests;
 * - the record (valid against the published JSON Schema) has the abort decision with who, when
 *   and why, and the recovery's RTO;
 * - a second abort of the finished release is refused 409 naming its state.
 */
import { expect, it } from "vitest";
import {
  cpHistory,
  cpTraffic,
  describeInProcess,
  ended,
  postJson as post,
  refused,
  routed,
  servedImage,
  summarize,
  twoLaneRecipe,
  waitsForPromote,
  waitUntil,
} from "../support/e2e-harness.ts";
import { recordSchemaErrors } from "../support/record-schema.ts";

const T = 300_000;
const WHY = "p99 latency on lane-a doubled";

describeInProcess(
  (kind) => `abort on the embedded stack on ${kind}`,
  (start) => {
    it(
      "abort after wave 1 stops exposure and compensates: control plane, lanes and router back to the baseline; the record has who, when, why and the RTO",
      async () => {
        const e = await start({ recipe: { ...twoLaneRecipe(), promotion: "manual" } });
        const m = e.manifest;
        const [a, b] = m.lanes.map((l) => l.id) as [string, string];
        const baseline = await cpTraffic(e, m.model);
        expect(baseline.excluded).toEqual([]);
        expect(await servedImage(e, a)).toBe(m.previous_image);

        const id = await e.startRelease();
        let r = await e.waitFor(
          id,
          (x) => waitsForPromote(x) || ended(x),
          `${id} to wait for promote after wave 1`,
          T,
        );
        expect(r.state, summarize(r)).toBe("paused");
        // Wave 1 took effect: lane-a runs the candidate and gets its share of the requests.
        expect(await servedImage(e, a)).toBe(m.image);
        expect((await cpTraffic(e, m.model)).weights[a]).toBe(50);
        expect((await routed(e, m.model, 1000))[a]).toBe(500);

        // No reason: refused naming the field; the release still waits where it was.
        const bare = await refused(e, id, "abort", { actor: "alice" }, 422);
        expect(bare).toMatch(/reason is required/);
        expect((await e.record(id)).state).toBe("paused");

        const abortedAt = Date.now();
        const res = await post(e, `/v1/releases/${id}/abort`, { reason: WHY, actor: "alice" });
        expect(res.status, await res.clone().text()).toBe(200);
        r = await e.waitFor(
          id,
          (x) => !["running", "paused", "pending", "compensating"].includes(x.state),
          `${id} to end after the abort`,
          T,
        );
        // Compensated to the end: `rolled_back`, its reason naming the abort (docs/state-machine.md).
        expect(r.state, summarize(r)).toBe("rolled_back");
        expect(r.reason).toBe(`aborted by operator:alice: ${WHY}`);
        const backward = r.step_runs.filter((s) => s.direction === "bwd");
        expect(backward.length).toBeGreaterThan(0);
        for (const s of backward) expect(s.state, s.id).toBe("succeeded");

        // The environment: the control plane holds the baseline again, no lane out of service.
        expect(await cpTraffic(e, m.model)).toEqual(baseline);
        // Each lane's container runs the previous image (a lane reports once its restore ends).
        const served = await waitUntil(
          () => Promise.all([a, b].map((l) => servedImage(e, l))),
          (imgs) => imgs.every((img) => img === m.previous_image),
          "every lane to serve the previous image",
          60_000,
          (imgs) => JSON.stringify(imgs),
        );
        expect(served).toEqual([m.previous_image, m.previous_image]);
        // The router sends the candidate nothing: no lane it routes to runs it.
        const counts = await routed(e, m.model, 1000);
        const images = new Map(
          await Promise.all([a, b].map(async (l) => [l, await servedImage(e, l)] as const)),
        );
        const toCandidate = Object.entries(counts)
          .filter(([lane]) => images.get(lane) === m.image)
          .reduce((n, [, c]) => n + c, 0);
        expect(toCandidate).toBe(0);
        expect(Object.values(counts).reduce((x, y) => x + y, 0)).toBe(1000);
        // No further exposure: wave 2's lane was never touched by the release.
        const writes = await cpHistory(e, id);
        expect(writes.some((c) => c.lane === b)).toBe(false);

        // The record: the abort decision (who, when, why) and the recovery's RTO.
        const recRes = await e.api(`/v1/releases/${id}/record`);
        expect(recRes.status).toBe(200);
        const rec = (await recRes.json()) as {
          release: { state: string; closed: boolean };
          decisions: { at: number; kind: string; by: string; automatic: boolean; why: string }[];
          recovery: {
            exercised: boolean;
            started_at: number | null;
            traffic_restored_at: number | null;
            finished_at: number | null;
            rto_ms: number | null;
          };
          digest: string | null;
        };
        expect(recordSchemaErrors(rec)).toBeNull();
        expect(rec.release).toMatchObject({ state: "rolled_back", closed: true });
        const decision = rec.decisions.find((d) => d.kind === "abort");
        expect(decision, JSON.stringify(rec.decisions)).toMatchObject({
          by: "operator:alice",
          automatic: false,
        });
        expect(decision?.why).toContain(WHY);
        expect(decision?.at).toBeGreaterThanOrEqual(abortedAt - 1000);
        expect(rec.recovery.exercised).toBe(true);
        expect(rec.recovery.started_at).toBeGreaterThanOrEqual(decision?.at ?? Infinity);
        expect(rec.recovery.finished_at).toBe(rec.recovery.traffic_restored_at);
        expect(rec.recovery.rto_ms).toBe(
          (rec.recovery.finished_at ?? 0) - (rec.recovery.started_at ?? 0),
        );
        expect(rec.recovery.rto_ms).toBeGreaterThan(0);
        expect(rec.digest).toMatch(/^[0-9a-f]{64}$/);

        // A finished release: abort is refused naming its state.
        const late = await refused(e, id, "abort", { reason: "again", actor: "alice" });
        expect(late).toContain(`release ${id} is rolled_back`);
        expect((await e.record(id)).state).toBe("rolled_back");
      },
      3 * T,
    );
  },
);
