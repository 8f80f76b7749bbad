/**
 * Recovery verification through the engine (docs/lifecycle.md "Recovery verification"), on both
 * stores: once an undo has run, the reconciler reads the control plane's lanes and asks each
 * touched lane's machine (here a target double standing in for `deploy.sh smoke` over SSH: it
 * runs what the runners' deploys and restores left, unless told to drop a restore silently).
 * A restore that restored ends rolled_back with per-lane verdicts in the release record; a
 * restore the target silently did not apply, or a weight the control plane kept, ends
 * needs_operator naming the lane and the field, and `verify` after a fix ends rolled_back;
 * `verify` of a succeeded release records its lanes against the manifest's end state.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ManifestLane } from "../../engine/src/domain/types.ts";
import type { TargetAnswer } from "../../engine/src/domain/verification.ts";
import type { TargetProbe } from "../../engine/src/ports/target-probe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import {
  createRelease,
  drive,
  type Harness,
  laneId,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

/**
 * A fleet the runners' steps change and the engine reads: each lane runs one image. `drop`
 * names lanes whose restore the target reports done but does not apply (it keeps running the
 * candidate), as a target that lost the write would.
 */
class Fleet implements TargetProbe {
  readonly runs = new Map<string, string>();
  readonly drop = new Set<string>();
  asked = 0;

  /** What a runner's step does to the lane (called for every dispatch the test answers). */
  step(p: DispatchPayload): void {
    const lane = (p.args.lane as { id?: string } | undefined)?.id;
    const image = typeof p.args.image === "string" ? p.args.image : null;
    if (!lane || !image) return;
    if (p.tool === "attach-queue-lane") this.runs.set(lane, image);
    if (p.tool === "restore-queue-lane" && !this.drop.has(lane)) this.runs.set(lane, image);
  }

  async inspect() {
    return [];
  }

  async observe(lane: ManifestLane, image: string): Promise<TargetAnswer> {
    this.asked += 1;
    const now = this.runs.get(lane.id) ?? PREVIOUS_IMAGE;
    const running = now === image;
    return {
      reached: true,
      running,
      image: running ? image : null,
      health: running ? "pass" : null,
      message: running
        ? `baton-${lane.id} runs ${image}; ${lane.health_url} healthy`
        : `the container of ${image} is not running (the lane runs ${now})`,
    };
  }
}

interface Verification {
  seq: number;
  state: string;
  trigger: string;
  desired_from: string;
  by: string | null;
  summary: string | null;
  lanes: {
    lane: string;
    ok: boolean;
    target_source: string | null;
    fields: { field: string; desired: unknown; observed: unknown; ok: boolean | null }[];
  }[];
}

async function getRelease(h: Harness, id: string) {
  const res = await op(h, "GET", `/v1/releases/${id}`);
  return (await res.json()) as {
    state: string;
    reason: string | null;
    verification: Verification | null;
    available_actions: { action: string; command: string }[];
  };
}

async function getRecordDoc(h: Harness, id: string) {
  const res = await op(h, "GET", `/v1/releases/${id}/record`);
  return (await res.json()) as { recovery_verification: Verification | null; known_gaps: string[] };
}

const lane0 = laneId(0);
const lane1 = laneId(1);

describe.each(STORE_KINDS)("recovery verification on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  /** Two lanes; lane 1's deploy fails (it started the candidate), so both lanes are undone. */
  async function failedRelease(fleet: Fleet, beforeTick?: (id: string) => Promise<void>) {
    h = await makeHarness({ kind, targetProbe: fleet });
    const hh = h;
    const id = await createRelease(hh, recipe(2, { policy: { rerun_window_minutes: 0 } }));
    await drive(
      hh,
      (p) => {
        fleet.step(p);
        const lane = (p.args.lane as { id?: string } | undefined)?.id;
        return p.tool === "attach-queue-lane" && lane === lane1 ? "fail" : "pass";
      },
      400,
      beforeTick ? () => beforeTick(id) : undefined,
    );
    return { h: hh, id };
  }

  it.skipIf(skip)(
    "a restore that restored: verification passed, rolled_back, the record has per-lane verdicts",
    async () => {
      const fleet = new Fleet();
      const { h, id } = await failedRelease(fleet);
      const rel = await getRelease(h, id);
      expect(rel.state).toBe("rolled_back");
      expect(fleet.asked).toBe(2);
      const v = (await getRecordDoc(h, id)).recovery_verification;
      expect(v).toMatchObject({
        seq: 1,
        state: "passed",
        trigger: "compensation",
        desired_from: "baseline",
        by: "control plane lanes + target probe (deploy.sh smoke over SSH)",
      });
      expect(v?.lanes.map((l) => [l.lane, l.ok, l.target_source])).toEqual([
        [lane0, true, "target_probe"],
        [lane1, true, "target_probe"],
      ]);
      const image0 = v?.lanes[0]?.fields.find((f) => f.field === "image");
      expect(image0).toEqual({
        field: "image",
        desired: PREVIOUS_IMAGE,
        observed: PREVIOUS_IMAGE,
        ok: true,
        note: null,
      });
      expect(v?.lanes[0]?.fields.map((f) => f.field)).toEqual([
        "weight",
        "excluded",
        "capabilities",
        "image",
        "health",
      ]);
    },
  );

  it.skipIf(skip)(
    "a restore the target silently did not apply: needs_operator naming the lane and the image; verify after the fix ends rolled_back",
    async () => {
      const fleet = new Fleet();
      fleet.drop.add(lane0);
      const { h, id } = await failedRelease(fleet);
      const rel = await getRelease(h, id);
      expect(rel.state).toBe("needs_operator");
      expect(rel.reason).toContain(
        `lane ${lane0}: image desired ${PREVIOUS_IMAGE} is not running (the container of ${PREVIOUS_IMAGE} is not running (the lane runs ${IMAGE}))`,
      );
      expect(rel.reason).not.toContain(`lane ${lane1}:`);
      expect(rel.verification?.state).toBe("failed");
      expect(rel.available_actions.map((a) => a.action)).toEqual(["verify", "abandon"]);
      // The operator restores the lane by hand, then asks again.
      fleet.runs.set(lane0, PREVIOUS_IMAGE);
      const asked = await op(h, "POST", `/v1/releases/${id}/verify`, { actor: "alice" });
      expect(asked.status).toBe(202);
      expect(await asked.json()).toMatchObject({
        id,
        state: "compensating",
        verification: { seq: 2, state: "verifying", requested_by: "operator:alice" },
      });
      await drive(h);
      const after = await getRelease(h, id);
      expect(after.state).toBe("rolled_back");
      expect(after.verification).toMatchObject({ seq: 2, state: "passed", trigger: "operator" });
    },
  );

  it.skipIf(skip)(
    "a weight the control plane kept after the undo: needs_operator naming the lane and the weight",
    async () => {
      const fleet = new Fleet();
      let moved = false;
      const { h: hh, id } = await failedRelease(fleet, async (rid) => {
        // Between the undo's last write and its reading: someone moves lane 1's traffic.
        const cur = h;
        if (moved || !cur) return;
        const r = await getRelease(cur, rid);
        if (r.verification?.state !== "verifying") return;
        moved = true;
        const read = await cur.cp.lanes(cur.cp.model);
        if (!read.ok) throw new Error(read.message);
        cur.cp.seed(read.lanes.map((l) => ({ ...l, weight: l.id === lane0 ? 100 : 0 })));
      });
      expect(moved).toBe(true);
      const rel = await getRelease(hh, id);
      expect(rel.state).toBe("needs_operator");
      expect(rel.reason).toContain(`lane ${lane0}: weight desired 50% observed 100%`);
      expect(rel.reason).toContain(`lane ${lane1}: weight desired 50% observed 0%`);
    },
  );

  it.skipIf(skip)(
    "verify of a succeeded release records every lane against the manifest's end state",
    async () => {
      const fleet = new Fleet();
      h = await makeHarness({ kind, targetProbe: fleet });
      const hh = h;
      const id = await createRelease(hh, recipe(2));
      await drive(hh, (p) => {
        fleet.step(p);
        return "pass";
      });
      expect((await getRelease(hh, id)).state).toBe("succeeded");
      expect(fleet.asked).toBe(0);
      const asked = await op(hh, "POST", `/v1/releases/${id}/verify`, {});
      expect(asked.status).toBe(202);
      await drive(hh);
      const rel = await getRelease(hh, id);
      expect(rel.state).toBe("succeeded");
      expect(rel.verification).toMatchObject({
        seq: 1,
        state: "passed",
        desired_from: "manifest",
      });
      expect(rel.verification?.lanes.map((l) => [l.lane, l.ok])).toEqual([
        [lane0, true],
        [lane1, true],
      ]);
      const w1 = rel.verification?.lanes[1]?.fields.find((f) => f.field === "weight");
      expect(w1?.ok).toBe(true);
      expect(w1?.observed).toBe(w1?.desired);
      // The target moves lane 0 back by hand: a new verification names it; the state stays.
      fleet.runs.set(lane0, PREVIOUS_IMAGE);
      await op(hh, "POST", `/v1/releases/${id}/verify`, {});
      await drive(hh);
      const again = await getRelease(hh, id);
      expect(again.state).toBe("succeeded");
      expect(again.verification?.state).toBe("failed");
      expect(again.verification?.summary).toContain(
        `lane ${lane0}: image desired ${IMAGE} is not running`,
      );
      // A pending or running release refuses it, naming why.
      const refused = await op(hh, "POST", `/v1/releases/r999/verify`, {});
      expect(refused.status).toBe(404);
    },
  );
});
