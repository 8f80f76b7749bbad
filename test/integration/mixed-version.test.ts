/**
 * Mixed versions outside a release, end to end on both stores: a release of a recipe whose
 * second wave has two lanes succeeds; one lane of that wave is then changed by hand at the
 * control plane to run another image. Within one observation interval `GET /metrics`
 * (promtool-checked) shows `baton_mixed_version{model,wave="2"} 1` (wave 1 stays 0), the
 * fleet page and `baton status` flag mixed versions; once the lane is put back, the wave is 0
 * again and the flags are gone.
 */
import { execFileSync } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { releaseSummary } from "../../engine/src/cli/output.ts";
import { IMAGE } from "../unit/recipe-fixture.ts";
import {
  createRelease,
  drive,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
  VIEWER,
} from "./service-harness.ts";

const INTERVAL = 30_000;
const MODEL = "summarizer-v7";
const HAND = `ghcr.io/acme/summarizer@sha256:${"7c".repeat(32)}`;

/** Three lanes: a canary wave [lane-a], then [lane-b, lane-c] at 100%. */
const RECIPE = recipe(3, {
  rollout: {
    waves: [
      { lanes: ["lane-a"], traffic: 10 },
      { lanes: ["lane-b", "lane-c"], traffic: 100 },
    ],
  },
});

/** `GET /metrics` as the viewer: its sample lines, after `promtool check metrics`. */
async function scrape(h: Harness): Promise<string[]> {
  const res = await h.engine.app.request("/metrics", {
    headers: { authorization: `Bearer ${VIEWER}` },
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  execFileSync("promtool", ["check", "metrics"], { input: text, timeout: 30_000 });
  return text.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
}

/** The fleet page's section of the model (HTML), read as the viewer. */
async function fleetSection(h: Harness): Promise<string> {
  const res = await h.engine.app.request(`/fleet?model=${MODEL}`, {
    headers: { authorization: `Bearer ${VIEWER}` },
  });
  expect(res.status).toBe(200);
  const html = await res.text();
  const at = html.indexOf(`data-model="${MODEL}"`);
  expect(at).toBeGreaterThan(-1);
  return html.slice(at, html.indexOf("</h2>", at));
}

/** What `baton status <id>` prints for the release. */
async function status(h: Harness, id: string): Promise<string> {
  const rec = await (await op(h, "GET", `/v1/releases/${id}`)).json();
  return releaseSummary(rec as never, h.clock.now()).join("\n");
}

const mixed = (lines: string[], wave: number) =>
  lines.find((l) => l.startsWith(`baton_mixed_version{model="${MODEL}",wave="${wave}"} `));

describe.each(STORE_KINDS)("mixed versions of a wave on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it.skipIf(skip)(
    "one lane of a wave changed by hand to another image: baton_mixed_version 1 for that wave, flagged, then 0 once fixed",
    async () => {
      h = await makeHarness({ kind, seed: RECIPE, config: { driftIntervalMs: INTERVAL } });
      const id = await createRelease(h, RECIPE);
      await drive(h);
      const done = (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as { state: string };
      expect(done.state).toBe("succeeded");
      // What the release left: lanes of wave 2 taking traffic, on one image (the release's).
      const b = h.cp.lane("lane-b");
      const c = h.cp.lane("lane-c");
      if (!b || !c) throw new Error("lanes of wave 2 not in the control plane");
      expect(b.weight).toBeGreaterThan(0);
      expect(c.weight).toBeGreaterThan(0);

      h.clock.advance(INTERVAL);
      await h.engine.tick();
      const clean = await scrape(h);
      expect(mixed(clean, 1)).toBe(`baton_mixed_version{model="${MODEL}",wave="1"} 0`);
      expect(mixed(clean, 2)).toBe(`baton_mixed_version{model="${MODEL}",wave="2"} 0`);
      expect(await fleetSection(h)).not.toContain("mixed versions");

      // By hand, outside any release: lane-c now runs another image, weights unchanged (the
      // control plane reports what each lane of the wave runs).
      h.cp.seed([
        { ...b, model: MODEL, image: IMAGE },
        { ...c, model: MODEL, image: HAND },
      ]);
      expect(h.cp.lane("lane-c")?.image).toBe(HAND);
      expect(h.cp.lane("lane-b")?.image).toBe(IMAGE);
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      const seen = await scrape(h);
      expect(mixed(seen, 2)).toBe(`baton_mixed_version{model="${MODEL}",wave="2"} 1`);
      expect(mixed(seen, 1)).toBe(`baton_mixed_version{model="${MODEL}",wave="1"} 0`);
      expect(seen).toContain(`baton_serving_images{model="${MODEL}"} 2`);
      expect(seen).toContain(
        `baton_lane_image_drift_info{model="${MODEL}",lane="lane-c",desired="${IMAGE}",observed="${HAND}"} 1`,
      );
      expect(await fleetSection(h)).toContain("mixed versions");
      const shown = await status(h, id);
      expect(shown).toMatch(/DRIFT since .*lane-c image desired .* observed .*mixed versions/);
      expect(shown).toContain(`${HAND} on lane-c`);

      // Put back by hand: one image per wave again.
      h.cp.seed([{ ...c, model: MODEL, image: IMAGE }]);
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      const fixed = await scrape(h);
      expect(mixed(fixed, 2)).toBe(`baton_mixed_version{model="${MODEL}",wave="2"} 0`);
      expect(fixed).toContain(`baton_serving_images{model="${MODEL}"} 1`);
      expect(await fleetSection(h)).not.toContain("mixed versions");
      expect(await status(h, id)).not.toContain("DRIFT");
    },
  );
});
