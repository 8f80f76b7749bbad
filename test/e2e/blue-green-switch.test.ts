/**
 * Blue-green end to end on the embedded stack, both stores (docs/recipes.md "Strategies"): the
 * example recipe recipes/blue-green.yaml cut to one blue lane and one green lane, with a one-hour
 * rollback window. The release deploys green dark and switches; `baton rollback` of it is one
 * switch back to the blue lane, which kept serving the previous image the whole time; once the
 * window has closed (the engine's clock moved past it) `baton rollback` is refused 409
 * `rollback_window_closed`, saying why and what to do instead.
 *
 * The witnesses are not Baton's records: requests sent through the reference router (as a proxy
 * in front of the lanes' containers, splitting by the control plane's weights) are counted by the
 * image of the container that answered; the blue container's instance id (the stand-in runtime's
 * per-`run` id) is the same before the release and after the switch back, so it was never
 * stopped or restarted; the control plane's own history of applied writes shows the switch back
 * as one traffic write; the local runner shows no deploy on the blue lane, and the switch back's
 * only runner step is its health check of it (run-smoke). With the blue container stopped, the
 * switch back fails that health check and moves nothing: the router keeps every request on green.
 * `baton verify` of the switch back reads the blue lane, now serving, at its machine (`deploy.sh
 * smoke` over SSH): the previous image running and healthy.
 */
import { join } from "node:path";
import { expect, it } from "vitest";
import { REPO_ROOT } from "../../engine/src/demo/fleet.ts";
import { loadRecipe } from "../../engine/src/demo/stack.ts";
import { shortDigest } from "../../engine/src/domain/catalogue.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { shortImage } from "../../engine/src/views/format.ts";
import { baton } from "../cli/run-baton.ts";
import {
  askRollback,
  cpHistory,
  describeInProcess,
  laneInstance,
  onTarget,
  startLaneRouter,
  summarize,
  TERMINAL,
} from "../support/e2e-harness.ts";

const T = 300_000;
const HOUR = 3_600_000;
const N = 20;

/** recipes/blue-green.yaml with lane-a blue (all the traffic) and lane-c green, window 1h. */
function recipe(): RecipeInput {
  const r = loadRecipe(join(REPO_ROOT, "recipes/blue-green.yaml"));
  const lanes = (r.lanes ?? [])
    .filter((l) => l.id === "lane-a" || l.id === "lane-c")
    .map((l) => ({ ...l, weight: l.id === "lane-a" ? 100 : 0 }));
  return {
    ...r,
    lanes,
    rollout: { waves: [{ lanes: ["lane-c"] }] },
    policy: { ...r.policy, rollback_window: "1h" },
  };
}

describeInProcess(
  (kind) => `blue-green switch back on ${kind}`,
  (start) => {
    it(
      "rollback of a blue-green release is one switch back to the warm old environment, checked at the router; after the window it is refused 409",
      async () => {
        // The engine's clock: the wall clock, moved past the window at the end.
        let ahead = 0;
        const e = await start({ recipe: recipe(), clock: { now: () => Date.now() + ahead } });
        const m = e.manifest;
        const cli = (args: string[]) =>
          baton(args, { BATON_ENGINE_URL: e.url(), BATON_TOKEN: e.operatorToken });
        const router = await startLaneRouter(e, m.model);
        try {
          // Before: blue answers every request on the previous image.
          const before = await router.answers(N);
          expect(before.images).toEqual({ [m.previous_image]: N });
          const blue = before.instances["lane-a"]?.[0];
          expect(before.instances).toEqual({ "lane-a": [blue] });

          const id = await e.startRelease();
          const done = await e.waitFor(id, (r) => TERMINAL.has(r.state), `${id} to end`, T);
          expect(done.state, summarize(done)).toBe("succeeded");
          // Switched: the candidate answers every request, from green.
          const switched = await router.answers(N);
          expect(switched.images).toEqual({ [m.image]: N });
          expect(Object.keys(switched.instances)).toEqual(["lane-c"]);
          // Blue is warm: the same container still answers on its own port.
          expect(await laneInstance(e, "lane-a")).toBe(blue);
          const status = await cli(["status", id]);
          expect(status.code, status.stderr).toBe(0);
          expect(status.stdout).toMatch(
            new RegExp(
              `old environment \\(lane-a\\) warm on ${m.previous_image.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} until \\S+ \\(weight 0, not stopped\\)`,
            ),
          );

          // The dashboard's release page: the old environment and its switch back.
          const page = await (await e.api(`/releases/${id}`)).text();
          expect(page).toContain("Old environment: warm until");
          expect(page).toMatch(new RegExp(`href="/releases/${id}/rollback" id="switch-back"`));

          // baton rollback: the switch back.
          const rb = await cli(["rollback", id, "--reason", "v7 regressed", "--json"]);
          expect(rb.code, rb.stderr).toBe(0);
          const back = (JSON.parse(rb.stdout) as { id: string }).id;
          const after = await e.waitFor(back, (r) => TERMINAL.has(r.state), `${back} to end`, T);
          expect(after.state, summarize(after)).toBe("succeeded");
          // At the router: the previous image answers every request, from the very container
          // that answered before the release: the old lane was never stopped.
          const returned = await router.answers(N);
          expect(returned.images).toEqual({ [m.previous_image]: N });
          expect(returned.instances).toEqual({ "lane-a": [blue] });
          // One switch: the control plane applied one traffic write for the switch back, all
          // of it to blue; the only runner step of it is blue's health check (run-smoke, which
          // reads the lane), and no deploy ever ran on the blue lane.
          const writes = await cpHistory(e, back);
          expect(writes.map((c) => c.kind)).toEqual(["set_traffic"]);
          expect(writes[0]?.after).toMatchObject({ "lane-a": 100, "lane-c": 0 });
          const runs = e.stack.runner.list();
          const laneOf = (r: (typeof runs)[number]) =>
            (r.payload.args as { lane?: { id?: string } }).lane?.id;
          expect(
            runs
              .filter((r) => r.payload.release?.id === back)
              .map((r) => [r.payload.tool, laneOf(r)]),
          ).toEqual([["run-smoke", "lane-a"]]);
          expect(runs.filter((r) => laneOf(r) === "lane-a").map((r) => r.payload.tool)).toEqual([
            "run-smoke",
          ]);
          expect(runs.filter((r) => laneOf(r) === "lane-c").length).toBeGreaterThan(0);

          // baton verify of the switch back reads the lane now serving at its machine (deploy.sh
          // smoke over SSH): blue runs the previous image and is healthy.
          const verified = await cli(["verify", back, "--json", "--interval", "200"]);
          expect(verified.code, verified.stdout + verified.stderr).toBe(0);
          const v = JSON.parse(verified.stdout) as {
            state: string;
            lanes: {
              lane: string;
              target_source: string | null;
              fields: { field: string; observed: unknown; ok: boolean | null }[];
            }[];
          };
          expect(v.state).toBe("passed");
          const read = v.lanes.find((l) => l.lane === "lane-a");
          expect(read?.target_source).toBe("target_probe");
          expect(read?.fields.find((f) => f.field === "image")).toMatchObject({
            observed: m.previous_image,
            ok: true,
          });
          expect(read?.fields.find((f) => f.field === "health")?.ok).toBe(true);

          // After the switch back's own window: its old environment (green) is retired and
          // baton rollback is refused, saying why; nothing is started, traffic stays on blue.
          ahead = HOUR;
          const late = await cli(["status", back]);
          expect(late.stdout).toContain("old environment (lane-c) retired at");
          // Its lanes as what serves after it: blue restored, green switched away.
          expect(late.stdout).toContain(`${shortImage(m.previous_image)} (restored)`);
          expect(late.stdout).toContain(`${shortImage(m.image)} (switched away)`);
          expect(late.stdout).not.toContain("(candidate)");
          const count = (await (await e.api("/v1/releases?limit=50")).json()) as {
            releases: unknown[];
          };
          const refused = await cli(["rollback", back, "--reason", "too late"]);
          expect(refused.code).toBe(1);
          expect(refused.stderr).toContain(`rollback of ${back} refused: its rollback window (1h`);
          expect(refused.stderr).toContain("Roll forward instead");
          const res = await e.api(`/v1/releases/${back}/rollback`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ reason: "too late" }),
          });
          expect(res.status).toBe(409);
          expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
            "rollback_window_closed",
          );
          const count2 = (await (await e.api("/v1/releases?limit=50")).json()) as {
            releases: unknown[];
          };
          expect(count2.releases.length).toBe(count.releases.length);
          const latePage = await (await e.api(`/releases/${back}`)).text();
          expect(latePage).toContain("Old environment: retired at");
          expect(latePage).not.toContain(`href="/releases/${back}/rollback"`);
          expect((await router.answers(N)).images).toEqual({ [m.previous_image]: N });
        } finally {
          await router.close();
        }
      },
      T,
    );

    it(
      "a switch back whose old container is stopped fails its health check before any traffic moves: no request reaches the stopped lane",
      async () => {
        const e = await start({ recipe: recipe() });
        const m = e.manifest;
        const router = await startLaneRouter(e, m.model);
        try {
          const id = await e.startRelease();
          const done = await e.waitFor(id, (r) => TERMINAL.has(r.state), `${id} to end`, T);
          expect(done.state, summarize(done)).toBe("succeeded");
          // The old environment's container goes down (its health check answers nothing).
          await onTarget(e, `docker stop baton-lane-a-${shortDigest(m.previous_image)}`);
          expect(await laneInstance(e, "lane-a")).toBeNull();
          const rb = await askRollback(e, id);
          expect(rb.status, await rb.clone().text()).toBe(201);
          const back = ((await rb.json()) as { id: string }).id;
          const after = await e.waitFor(back, (r) => TERMINAL.has(r.state), `${back} to end`, T);
          expect(after.state, summarize(after)).toBe("rolled_back");
          expect(after.reason ?? "").toContain(
            "lane lane-a of the old environment failed its health check before the switch back, so no traffic moved",
          );
          // No traffic write, and at the router every request still reaches green.
          expect(await cpHistory(e, back)).toEqual([]);
          const seen = await router.answers(N);
          expect(seen.images).toEqual({ [m.image]: N });
          expect(Object.keys(seen.instances)).toEqual(["lane-c"]);
        } finally {
          await router.close();
        }
      },
      T,
    );
  },
);
