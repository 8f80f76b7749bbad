/**
 * A lane whose host does not resolve, through the
 * bundled release-step action as the local runner runs it, on both stores: the first runner
 * step of lane-a fails at connect, its result files prove nothing ran (connect_failed, every
 * other phase not_run), so the high-water mark does not cover it and compensation skips its
 * backward step. The release ends in a terminal state without anyone SSHing to that host,
 * the control plane is back to the observed baseline, the lanes are free (a fixed recipe
 * starts and succeeds), and each way out is tested:
 * - re-run window 0: compensates at once and ends rolled_back; abort, resume, retry and
 *   resolve are then refused naming what the release accepts;
 * - default window (30 min): the release waits for a re-run; `abort` compensates to a terminal
 *   state; the window's end (engine clock moved past the deadline) compensates too.
 */
import { afterEach, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { LaneState } from "../../engine/src/protocol/control-plane.ts";
import {
  describeStore,
  type InProcess,
  postRecipe,
  type RecordJson,
  type StoreKind,
  startInProcess,
  stepIndex,
  summarize,
  TERMINAL,
  twoLaneRecipe,
} from "../support/e2e-harness.ts";

const T = 240_000;
const HOST = "lane-a.baton-test.invalid";
const MINUTE = 60_000;

/** What the control plane holds for a lane, without its change time. */
function laneView(l: LaneState) {
  const { updated_at: _t, ...rest } = l;
  return rest;
}

for (const kind of ["sqlite", "postgres"] as StoreKind[]) {
  describeStore(kind, `unreachable lane host on ${kind}`, () => {
    let env: InProcess | null = null;
    let offset = 0;
    afterEach(async () => {
      await env?.close();
      env = null;
      offset = 0;
    });

    /** Starts the stack and a release whose lane-a host does not resolve. */
    async function startUnreachable(policy: RecipeInput["policy"]) {
      const e = await startInProcess(kind, {
        recipe: twoLaneRecipe(policy),
        clock: { now: () => Date.now() + offset },
      });
      env = e;
      const model = String(e.recipe.model);
      const baseline = e.fleet.cp.core.lanes(model).map(laneView);
      const bad = structuredClone(e.recipe);
      bad.lanes![0]!.host = HOST;
      const id = await postRecipe(e.api, bad);
      const attach = stepIndex(e.manifest, "attach_queue_lane:lane-a");
      const srId = `sr_${id.slice(1)}_${attach}_f`;
      return { e, id, srId, baseline, model };
    }

    /** The checks every exit shares: nothing undone that never happened, nobody SSHed to HOST. */
    async function checkEnd(
      e: InProcess,
      r: RecordJson,
      srId: string,
      baseline: unknown,
      model: string,
    ) {
      const attach = r.step_runs.find((s) => s.id === srId)!;
      expect(attach.state).toBe("failed");
      // The result files: connect failed, every other phase not_run.
      const results = r.attempt_results.filter((a) => a.step_run_id === srId);
      expect(results.length).toBeGreaterThanOrEqual(1);
      for (const a of results) {
        const checks = a.checks as { name: string; status: string; class?: string }[];
        expect(checks.find((c) => c.name === "connect")?.class).toBe("connect_failed");
        expect(
          checks.filter((c) => c.name !== "connect").every((c) => c.status === "not_run"),
        ).toBe(true);
      }
      // The high-water mark does not cover the step; its backward step was never dispatched.
      expect(r.high_water_mark).toBeLessThan(attach.step_index);
      const bwd = r.step_runs.find(
        (s) => s.step_index === attach.step_index && s.direction === "bwd",
      );
      expect(bwd === undefined || bwd.dispatch === 0, JSON.stringify(bwd)).toBe(true);
      // Every run the runner started for that host was a forward attempt of lane-a's attach.
      const toHost = e.stack.runner
        .list()
        .filter((run) => JSON.stringify(run.payload.args).includes(HOST));
      expect(toHost.length).toBeGreaterThanOrEqual(1);
      expect(new Set(toHost.map((run) => run.stepRunId))).toEqual(new Set([srId]));
      // The control plane is back to the observed baseline.
      expect(e.fleet.cp.core.lanes(model).map(laneView)).toEqual(baseline);
    }

    /** The lanes are free: the fixed recipe starts (201) and succeeds. */
    async function fixedRecipeSucceeds(e: InProcess) {
      const next = await postRecipe(e.api, e.recipe);
      const done = await e.waitFor(next, (x) => TERMINAL.has(x.state), "the fixed release to end");
      expect(done.state, summarize(done)).toBe("succeeded");
    }

    it(
      "window 0: compensation skips the step that never ran and ends rolled_back; abort, resume, retry and resolve are refused naming what is accepted; the lanes are free",
      async () => {
        const { e, id, srId, baseline, model } = await startUnreachable({
          rerun_window_minutes: 0,
        });
        const r = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
        expect(r.state, summarize(r)).toBe("rolled_back");
        await checkEnd(e, r, srId, baseline, model);
        const accepted = "it accepts roll-forward";
        const refusals: [string, string, unknown][] = [
          ["abort", `/v1/releases/${id}/abort`, { reason: "x" }],
          ["resume", `/v1/releases/${id}/resume`, undefined],
          ["retry", `/v1/releases/step-runs/${srId}/retry`, undefined],
          ["resolve", `/v1/releases/step-runs/${srId}/resolve`, { reason: "did it by hand" }],
        ];
        for (const [verb, path, body] of refusals) {
          const res = await e.api(path, {
            method: "POST",
            headers: { "content-type": "application/json" },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          });
          const text = await res.text();
          expect(res.status, `${verb}: ${text}`).toBe(409);
          expect(text, verb).toContain(accepted);
        }
        const after = await e.record(id);
        expect(after.state).toBe("rolled_back");
        expect(after.step_runs.find((s) => s.id === srId)?.dispatch).toBe(1);
        await fixedRecipeSucceeds(e);
      },
      T,
    );

    /** Default window: the release waits for a re-run of lane-a's attach. */
    async function waiting() {
      const s = await startUnreachable(undefined);
      const paused = await s.e.waitFor(
        s.id,
        (x) => x.state === "paused" || TERMINAL.has(x.state),
        "the release to wait for a re-run",
      );
      expect(paused.state, summarize(paused)).toBe("paused");
      const rec = (await (await s.e.api(`/v1/releases/${s.id}`)).json()) as {
        rerun_deadline: number;
        available_actions: { action: string }[];
      };
      expect(rec.rerun_deadline).toBeGreaterThan(Date.now());
      expect(rec.available_actions.map((a) => a.action)).toContain("abort");
      return { ...s, deadline: rec.rerun_deadline };
    }

    it(
      "default window: abort while waiting for a re-run compensates to a terminal state without SSHing to the host",
      async () => {
        const { e, id, srId, baseline, model } = await waiting();
        // While it waits: what is offered is what the guards accept, and the refusals say
        // what is accepted instead.
        const offered = (
          (await (await e.api(`/v1/releases/${id}`)).json()) as {
            available_actions: { action: string; target: string }[];
          }
        ).available_actions;
        expect(offered.map((a) => a.action)).not.toContain("resolve");
        expect(offered.map((a) => a.action)).not.toContain("abandon");
        const resolve = await e.api(`/v1/releases/step-runs/${srId}/resolve`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ reason: "did it by hand" }),
        });
        const resolveText = await resolve.text();
        expect(resolve.status, resolveText).toBe(409);
        expect(resolveText).toContain("waits for a re-run of its failed step until");
        expect(resolveText).toContain(`baton retry ${srId}`);
        expect(resolveText).toContain(`baton abort ${id}`);
        const second = await e.api("/v1/releases", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(e.recipe),
        });
        const secondText = await second.text();
        expect(second.status, secondText).toBe(409);
        expect(secondText).toContain(`release ${id}`);
        expect(secondText).toContain("still owns lanes");
        const res = await e.api(`/v1/releases/${id}/abort`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ reason: "host is gone" }),
        });
        expect(res.status, await res.text()).toBe(200);
        const r = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
        expect(["aborted", "rolled_back"], summarize(r)).toContain(r.state);
        await checkEnd(e, r, srId, baseline, model);
        await fixedRecipeSucceeds(e);
      },
      T,
    );

    it(
      "default window: the window's end compensates to rolled_back without SSHing to the host",
      async () => {
        const { e, id, srId, baseline, model, deadline } = await waiting();
        // The engine's clock passes the deadline (30 minutes after the failure).
        offset = deadline - Date.now() + MINUTE;
        const r = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
        expect(r.state, summarize(r)).toBe("rolled_back");
        await checkEnd(e, r, srId, baseline, model);
        // The lanes are free (the fixed recipe is accepted; it is not run here, as the runner
        // signs with the wall clock while the engine's clock is ahead).
        await postRecipe(e.api, e.recipe, true);
      },
      T,
    );
  });
}
