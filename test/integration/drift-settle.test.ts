/**
 * Drift settle time (docs/drift.md) on both stores: right after a release ended, a lane whose
 * control-plane image still shows the old value (the lane reports its image asynchronously,
 * after the release's last step) is not reported as drifted; once the report arrives there is
 * nothing to record (no `drift`, no `drift_cleared`). A change by hand after the settle time
 * still appears within one observation interval.
 */
import { afterEach, describe, expect, it } from "vitest";
import { IMAGE } from "../unit/recipe-fixture.ts";
import {
  createRelease,
  drive,
  type Harness,
  makeHarness,
  op,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const INTERVAL = 30_000;
const SETTLE = 3 * INTERVAL;
const OLD = `ghcr.io/acme/summarizer@sha256:${"0a".repeat(32)}`;
const HAND = `ghcr.io/acme/summarizer@sha256:${"9e".repeat(32)}`;

describe.each(STORE_KINDS)("drift settle time on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  const history = async (hh: Harness, id: string) =>
    (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as {
      state: string;
      drift: { lanes: { id: string; fields: string[] }[] } | null;
      history: { kind: string; message: string }[];
    };

  it.skipIf(skip)(
    "a lane's late image report right after the release ended is no drift; a change by hand after the settle time is",
    async () => {
      h = await makeHarness({
        kind,
        config: { driftIntervalMs: INTERVAL, driftSettleMs: SETTLE },
      });
      const id = await createRelease(h);
      await drive(h);
      expect((await history(h, id)).state).toBe("succeeded");
      const a = h.cp.lane("lane-a")!;
      // The lane has not reported the release's image yet: the control plane shows the old one.
      h.cp.seed([{ ...a, model: "summarizer-v7", image: OLD }]);
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      let r = await history(h, id);
      expect(r.drift).toBeNull();
      expect(r.history.filter((e) => e.kind.startsWith("drift"))).toEqual([]);
      // Its report arrives: the fleet is as the release left it; nothing to record.
      h.cp.seed([{ ...a, model: "summarizer-v7", image: IMAGE }]);
      for (let i = 0; i < 3; i++) {
        h.clock.advance(INTERVAL);
        await h.engine.tick();
      }
      r = await history(h, id);
      expect(r.drift).toBeNull();
      expect(r.history.filter((e) => e.kind.startsWith("drift"))).toEqual([]);

      // After the settle time, a change by hand appears within one interval.
      h.cp.seed([{ ...a, model: "summarizer-v7", weight: a.weight === 0 ? 5 : 0, image: HAND }]);
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      r = await history(h, id);
      expect(h.cp.lane("lane-a")?.image).toBe(HAND);
      expect(r.drift?.lanes.find((l) => l.id === "lane-a")?.fields.sort()).toEqual([
        "image",
        "weight",
      ]);
      expect(r.history.filter((e) => e.kind === "drift")).toHaveLength(1);
    },
  );
});
