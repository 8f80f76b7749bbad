/**
 * The observed baseline through the API, on both stores (docs/state-machine.md "The observed
 * baseline"): the start reads the control plane's lanes, refuses a disagreement with 422
 * naming the lanes and the fix (nothing written), records the baseline on the release, and
 * compensation restores exactly what was observed (weights, markers, capabilities), read
 * from the control plane itself.
 */
import { afterEach, describe, expect, it } from "vitest";
import { releaseSummary } from "../../engine/src/cli/output.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import {
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const MODEL = "summarizer-v7";

describe.each(STORE_KINDS)("observed baseline on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it.skipIf(skip)(
    "a lane the recipe does not name, or one never seen: 422, nothing started",
    async () => {
      h = await makeHarness({ kind });
      h.cp.seed([
        { id: "lane-x", weight: 20 },
        { id: "lane-a", weight: 40 },
        { id: "lane-b", weight: 40 },
      ]);
      const res = await op(h, "POST", "/v1/releases", recipe(2));
      expect(res.status).toBe(422);
      const body = (await res.json()) as {
        error: { message: string; problems: { path: string; message: string; fix: string }[] };
      };
      expect(body.error.message).toContain("the recipe and the control plane disagree");
      expect(body.error.problems[0]).toMatchObject({ path: "control_plane.lanes.lane-x" });
      expect(body.error.problems[0]?.fix).toContain("add lane lane-x to the recipe");

      const unseen = await op(h, "POST", "/v1/releases", recipe(3));
      expect(unseen.status).toBe(422);
      expect(await unseen.text()).toContain(
        "lane lane-c is not registered for model summarizer-v7",
      );
      const list = await op(h, "GET", "/v1/releases");
      expect(JSON.stringify(await list.json())).not.toContain('"r1"');
      // The control plane was only read.
      expect(h.cp.history()).toEqual([]);
    },
  );

  it.skipIf(skip)(
    "a lane in service already on the candidate: 422 naming the lane and the fix, nothing started; excluded, it is accepted",
    async () => {
      h = await makeHarness({ kind });
      h.cp.seed([
        { id: "lane-a", weight: 50 },
        { id: "lane-b", weight: 50 },
      ]);
      // A fix by hand left lane-b on the candidate; it reports it.
      h.cp.core.reportImage("lane-b", IMAGE);
      const res = await op(h, "POST", "/v1/releases", recipe(2));
      expect(res.status).toBe(422);
      const body = (await res.json()) as {
        error: { message: string; problems: { path: string; message: string; fix: string }[] };
      };
      expect(body.error.message).toContain("lane lane-b already runs the candidate");
      expect(body.error.problems[0]?.path).toBe("control_plane.lanes.lane-b.image");
      expect(body.error.problems[0]?.fix).toContain(`redeploy lane lane-b to ${PREVIOUS_IMAGE}`);
      expect(h.cp.history()).toEqual([]);
      const list = await op(h, "GET", "/v1/releases");
      expect(JSON.stringify(await list.json())).not.toContain('"r1"');

      // The fix's second way: the lane out of service until its wave redeploys it.
      h.cp.seed([
        { id: "lane-a", weight: 100 },
        { id: "lane-b", weight: 0, excluded: true, image: IMAGE },
        { id: "lane-c", weight: 0 },
      ]);
      const waves = [
        { lanes: ["lane-a"], traffic: 25 },
        { lanes: ["lane-b", "lane-c"], traffic: 100 },
      ];
      const r = recipe(3, { rollout: { waves } });
      const id = await createRelease(h, r);
      await drive(h, () => "pass");
      expect((await getRecord(h, id)).state).toBe("succeeded");
    },
  );

  it.skipIf(skip)("an unreadable control plane: 503, nothing started", async () => {
    h = await makeHarness({ kind });
    h.cp.faults.arm({ mode: "error", on: "read", match: "/v1/lanes" });
    const res = await op(h, "POST", "/v1/releases", recipe(2));
    expect(res.status).toBe(503);
    expect(await res.text()).toContain("could not read the control plane");
  });

  it.skipIf(skip)("compensation restores exactly the observed baseline", async () => {
    h = await makeHarness({ kind });
    // Not what the recipe assumes: 70/30, lane-a advertising, lane-b advertising more.
    h.cp.seed([
      { id: "lane-a", weight: 70, capabilities: ["summarize"], advertised: true },
      { id: "lane-b", weight: 30, capabilities: ["long-context", "summarize"], advertised: true },
    ]);
    const lanesNow = () =>
      h!.cp.core
        .lanes(MODEL)
        .map((l) => [l.id, l.weight, l.excluded, l.capabilities, l.advertised]);
    const before = lanesNow();
    const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
    const rec0 = await getRecord(h, id);
    const baseline = (rec0 as unknown as { baseline: { lanes: unknown[] } }).baseline;
    expect(baseline.lanes).toEqual([
      {
        id: "lane-a",
        weight: 70,
        excluded: false,
        capabilities: ["summarize"],
        advertised: true,
        image: null,
      },
      {
        id: "lane-b",
        weight: 30,
        excluded: false,
        capabilities: ["long-context", "summarize"],
        advertised: true,
        image: null,
      },
    ]);
    expect(rec0.history.find((e) => e.kind === "baseline")?.message).toContain("lane-a 70%");
    // Fail the last smoke check: every earlier step is undone.
    const steps = (rec0 as unknown as { manifest: { steps: { name: string }[] } }).manifest.steps;
    const last = steps.findLastIndex((s) => s.name === "assert_smoke_passed");
    const failing = `sr_${id.slice(1)}_${last}_f`;
    await drive(h, (p: DispatchPayload) => (p.step_run_id === failing ? "fail" : "pass"));
    expect((await getRecord(h, id)).state).toBe("rolled_back");
    expect(lanesNow()).toEqual(before);
  });
  it.skipIf(skip)(
    "the image each lane reported is in the baseline, shown, and what compensation leaves running",
    async () => {
      h = await makeHarness({ kind });
      // lane-a runs a hotfix the recipe's previous_image does not name; the control plane
      // reports it (the lane's own report); lane-b runs previous_image.
      const HOTFIX = `ghcr.io/acme/summarizer@sha256:${"c".repeat(64)}`;
      h.cp.seed([
        { id: "lane-a", weight: 50 },
        { id: "lane-b", weight: 50 },
      ]);
      h.cp.core.reportImage("lane-a", HOTFIX);
      h.cp.core.reportImage("lane-b", PREVIOUS_IMAGE);
      const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
      const rec0 = await getRecord(h, id);
      const baseline = (rec0 as unknown as { baseline: { lanes: { image: string | null }[] } })
        .baseline;
      expect(baseline.lanes.map((l) => l.image)).toEqual([HOTFIX, PREVIOUS_IMAGE]);
      expect(rec0.history.find((e) => e.kind === "baseline")?.message).toContain(
        `lane-a 50% running ${HOTFIX}`,
      );
      // `baton status` shows it.
      const shown = releaseSummary(rec0 as never, Date.now()).join("\n");
      expect(shown).toContain(
        `observed baseline: lane-a 50% on ${HOTFIX}; lane-b 50% on ${PREVIOUS_IMAGE}`,
      );
      // The record (GET /v1/releases/:id/record) lists it as the observed lane states.
      const record = await op(h, "GET", `/v1/releases/${id}/record`);
      expect(record.status).toBe(200);
      const doc = (await record.json()) as {
        ran: {
          observed_lanes: { lane: string; source: string; observed: { image: string | null } }[];
        };
      };
      const atStart = doc.ran.observed_lanes.filter((l) => l.source === "control_plane_at_start");
      expect(atStart.map((l) => [l.lane, l.observed.image])).toEqual([
        ["lane-a", HOTFIX],
        ["lane-b", PREVIOUS_IMAGE],
      ]);

      // The target: which image each lane runs, changed by the deploy and restore tools.
      const target = new Map([
        ["lane-a", HOTFIX],
        ["lane-b", PREVIOUS_IMAGE],
      ]);
      const steps = (rec0 as unknown as { manifest: { steps: { name: string }[] } }).manifest.steps;
      const last = steps.findLastIndex((s) => s.name === "assert_smoke_passed");
      const failing = `sr_${id.slice(1)}_${last}_f`;
      const restores: { lane: string; image: string }[] = [];
      await drive(h, (p: DispatchPayload) => {
        const verdict = p.step_run_id === failing ? "fail" : "pass";
        const a = p.args as { lane: { id: string }; image: string };
        if (p.tool === "restore-queue-lane") restores.push({ lane: a.lane.id, image: a.image });
        if (
          verdict === "pass" &&
          (p.tool === "attach-queue-lane" || p.tool === "restore-queue-lane")
        )
          target.set(a.lane.id, a.image);
        return verdict;
      });
      expect((await getRecord(h, id)).state).toBe("rolled_back");
      // Both lanes were redeployed to the candidate, then restored: each to what it ran.
      expect(restores).toEqual(
        expect.arrayContaining([
          { lane: "lane-a", image: HOTFIX },
          { lane: "lane-b", image: PREVIOUS_IMAGE },
        ]),
      );
      expect(Object.fromEntries(target)).toEqual({ "lane-a": HOTFIX, "lane-b": PREVIOUS_IMAGE });
      expect([...target.values()]).not.toContain(IMAGE);
    },
  );
});
