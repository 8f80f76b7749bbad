/**
 * Release-labelled telemetry in the record (docs/record.md "Release labels"), on both stores:
 * the embedded metrics source counts requests per release label where the router forwarded
 * them and where the lanes served them (the label they echoed), and the release record states
 * both figures and whether they agree. A mutant lane that drops the label makes them disagree,
 * and the record says so.
 */
import { expect, it } from "vitest";
import { gatedRecipe, MODEL, run, start } from "../support/gate-rig.ts";
import { op } from "./service-harness.ts";
import { describeEachRig } from "./store-suites.ts";

interface LabelRecord {
  evidence: {
    release_labels?: { release: string; router: number; lanes: number; agree: boolean; at: number };
  };
  deviations: { at: number; what: string }[];
}

describeEachRig("release labels in the record on %s", ({ skip, open }) => {
  it.skipIf(skip)(
    "the counts per release agree at the router and the lanes on a healthy run",
    async () => {
      const g = await open();
      const id = await start(g.h, gatedRecipe());
      await run(g);
      expect((await g.h.store.getRelease(id))?.state).toBe("succeeded");
      const rec = (await (await op(g.h, "GET", `/v1/releases/${id}/record`)).json()) as LabelRecord;
      const l = rec.evidence.release_labels;
      expect(l).toMatchObject({ release: id, agree: true });
      expect(l?.router).toBeGreaterThan(400);
      expect(l?.lanes).toBe(l?.router);
      expect(rec.deviations.some((d) => d.what.startsWith("release labels disagree"))).toBe(false);
      // The lanes' metrics carry the label (the exposition the Prometheus adapter scrapes).
      expect(g.traffic.metricsText()).toMatch(
        new RegExp(
          `baton_release_requests_total\\{model="${MODEL}",lane="lane-a",release="${id}"\\} \\d+`,
        ),
      );
    },
  );

  it.skipIf(skip)(
    "a mutant lane that drops the label makes the record say they disagree",
    async () => {
      const g = await open();
      g.traffic.setLaneDropsLabel("lane-a", true);
      const id = await start(g.h, gatedRecipe());
      await run(g);
      const rec = (await (await op(g.h, "GET", `/v1/releases/${id}/record`)).json()) as LabelRecord;
      const l = rec.evidence.release_labels;
      expect(l?.agree).toBe(false);
      expect(l?.lanes).toBeLessThan(l?.router ?? 0);
      expect(rec.deviations.map((d) => d.what)).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^release labels disagree: the router forwarded ${l?.router} requests labelled ${id}, the lanes counted ${l?.lanes}`,
          ),
        ),
      );
    },
  );
});
