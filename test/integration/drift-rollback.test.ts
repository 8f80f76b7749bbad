/**
 * Drift after a rollback that was undone (docs/drift.md "What is compared"), on both
 * stores. A rollback runs an older manifest whose `previous_image` is not what the lanes ran
 * when it started; when it is aborted, or fails and compensates, its undo restores what was
 * really there (its observed baseline). Drift must then compare the lanes with that, not with
 * the manifest's `previous_image`: no drift right after, and a change by hand after it still
 * shows. The lanes' images are what the simulated targets report to the control plane after
 * each deploy and restore (as the demo stack's lanes do), so the assertions read the control
 * plane, not Baton's tables alone.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import {
  drive,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const OLDEST = `ghcr.io/acme/summarizer@sha256:${"a1".repeat(32)}`;
const HOTFIX = `ghcr.io/acme/summarizer@sha256:${"b0".repeat(32)}`;
const BY_HAND = `ghcr.io/acme/summarizer@sha256:${"9e".repeat(32)}`;
const INTERVAL = 30_000;
const MODEL = "summarizer-v7";

interface DriftView {
  state: string;
  drift: {
    lanes: {
      id: string;
      fields: string[];
      desired: { image?: string };
      observed: { image?: string };
    }[];
  } | null;
  history: { kind: string; message: string }[];
}

describe.each(STORE_KINDS)("drift after an undone rollback on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  /** Each lane reports the image a passing deploy or restore left running to the control plane. */
  const target =
    (hh: Harness, fail?: (p: DispatchPayload) => boolean) =>
    (p: DispatchPayload): "pass" | "fail" => {
      if (fail?.(p)) return "fail";
      if (p.tool === "attach-queue-lane" || p.tool === "restore-queue-lane") {
        const a = p.args as { lane: { id: string }; image: string };
        hh.cp.core.reportImage(a.lane.id, a.image);
      }
      return "pass";
    };
  const images = (hh: Harness) => ({
    "lane-a": hh.cp.lane("lane-a")?.image,
    "lane-b": hh.cp.lane("lane-b")?.image,
  });
  const view = async (hh: Harness, id: string) =>
    (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as DriftView;
  const observe = async (hh: Harness) => {
    hh.clock.advance(INTERVAL);
    await hh.engine.tick();
  };
  const driftLanes = async (hh: Harness) => {
    const text = await (await op(hh, "GET", "/metrics")).text();
    return text.split("\n").find((l) => l.startsWith(`baton_drift_lanes{model="${MODEL}"}`));
  };
  async function succeed(hh: Harness, r: RecipeInput): Promise<string> {
    const res = await op(hh, "POST", "/v1/releases", r);
    expect(res.status, await res.clone().text()).toBe(201);
    const id = ((await res.json()) as { id: string }).id;
    for (let i = 0; i < 5; i++) {
      await drive(hh, target(hh));
      const s = await view(hh, id);
      if (s.state === "succeeded") return id;
      // A manual promotion holds after the first wave: promote it.
      expect(s.state).toBe("paused");
      expect((await op(hh, "POST", `/v1/releases/${id}/promote`, { reason: "go" })).status).toBe(
        200,
      );
    }
    throw new Error(`${id} did not succeed`);
  }

  it.skipIf(skip)(
    "a rollback aborted after its first wave: the lanes want what its undo restored; a later change by hand still drifts",
    async () => {
      h = await makeHarness({ kind, config: { driftIntervalMs: INTERVAL } });
      for (const l of ["lane-a", "lane-b"]) h.cp.core.reportImage(l, OLDEST);
      const v1 = recipe(2, { image: PREVIOUS_IMAGE, previous_image: OLDEST, promotion: "manual" });
      await succeed(h, v1);
      h.clock.advance(3_600_000);
      const v2 = await succeed(h, recipe(2));
      expect(images(h)).toEqual({ "lane-a": IMAGE, "lane-b": IMAGE });

      // Both lanes hot-fixed by hand: a real drift of v2.
      for (const l of ["lane-a", "lane-b"]) h.cp.core.reportImage(l, HOTFIX);
      await observe(h);
      expect((await view(h, v2)).drift?.lanes.map((l) => [l.id, l.fields])).toEqual([
        ["lane-a", ["image"]],
        ["lane-b", ["image"]],
      ]);

      // Roll v2 back: v1's manifest runs again (manual promotion: it holds after wave 1).
      const res = await op(h, "POST", `/v1/releases/${v2}/rollback`, { reason: "v8 is slow" });
      expect(res.status, await res.clone().text()).toBe(201);
      const rb = ((await res.json()) as { id: string }).id;
      await drive(h, target(h));
      expect((await view(h, rb)).state).toBe("paused");
      expect(images(h)).toEqual({ "lane-a": PREVIOUS_IMAGE, "lane-b": HOTFIX });
      const abort = await op(h, "POST", `/v1/releases/${rb}/abort`, { reason: "wrong target" });
      expect(abort.status, await abort.clone().text()).toBe(200);
      await drive(h, target(h));
      expect((await view(h, rb)).state).toBe("rolled_back");
      // The undo put back what was really there: the hotfix, not the manifest's previous_image
      // (v2's image, which the lanes no longer ran when the rollback started).
      expect(images(h)).toEqual({ "lane-a": HOTFIX, "lane-b": HOTFIX });

      await observe(h);
      const after = await view(h, rb);
      expect(after.drift).toBeNull();
      expect(after.history.filter((e) => e.kind === "drift")).toEqual([]);
      expect(await driftLanes(h)).toBe(`baton_drift_lanes{model="${MODEL}"} 0`);

      // A change by hand after it is drift, on the rollback that decided the lanes.
      h.cp.core.reportImage("lane-b", BY_HAND);
      await observe(h);
      const drifted = await view(h, rb);
      expect(drifted.drift?.lanes.map((l) => [l.id, l.fields])).toEqual([["lane-b", ["image"]]]);
      expect(drifted.drift?.lanes[0]).toMatchObject({
        desired: { image: HOTFIX },
        observed: { image: BY_HAND },
      });
      expect(await driftLanes(h)).toBe(`baton_drift_lanes{model="${MODEL}"} 1`);
    },
  );

  it.skipIf(skip)(
    "an older recipe started again that fails and compensates: no false drift to that recipe's previous_image",
    async () => {
      h = await makeHarness({ kind, config: { driftIntervalMs: INTERVAL } });
      for (const l of ["lane-a", "lane-b"]) h.cp.core.reportImage(l, OLDEST);
      const v1 = recipe(2, {
        image: PREVIOUS_IMAGE,
        previous_image: OLDEST,
        policy: { rerun_window_minutes: 0 },
      });
      await succeed(h, v1);
      h.clock.advance(3_600_000);
      await succeed(h, recipe(2));
      expect(images(h)).toEqual({ "lane-a": IMAGE, "lane-b": IMAGE });

      // `baton start v1.yaml` (unsigned: no freshness check to pass): v1's previous_image is
      // OLDEST, the lanes run IMAGE.
      h.clock.advance(3_600_000);
      const res = await op(h, "POST", "/v1/releases", { recipe: v1 });
      expect(res.status, await res.clone().text()).toBe(201);
      const rb = ((await res.json()) as { id: string }).id;
      let failed = "";
      await drive(
        h,
        target(h, (p) => {
          const a = p.args as { lane?: { id: string } };
          if (!failed && p.tool === "attach-queue-lane" && a.lane?.id === "lane-b") {
            failed = p.step_run_id;
          }
          return p.step_run_id === failed;
        }),
        400,
        () => h?.clock.advance(1000),
      );
      expect(failed).not.toBe("");
      expect((await view(h, rb)).state).toBe("rolled_back");
      expect(images(h)).toEqual({ "lane-a": IMAGE, "lane-b": IMAGE });

      await observe(h);
      expect((await view(h, rb)).drift).toBeNull();
      expect(await driftLanes(h)).toBe(`baton_drift_lanes{model="${MODEL}"} 0`);

      h.cp.core.reportImage("lane-a", BY_HAND);
      await observe(h);
      const drifted = await view(h, rb);
      expect(drifted.drift?.lanes.map((l) => [l.id, l.fields])).toEqual([["lane-a", ["image"]]]);
      expect(drifted.drift?.lanes[0]).toMatchObject({
        desired: { image: IMAGE },
        observed: { image: BY_HAND },
      });
    },
  );
});
