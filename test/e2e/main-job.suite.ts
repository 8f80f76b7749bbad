/**
 * The main job end to end, on real parts: recipe → engine →
 * dispatch → local runner running the bundled action → tools over SSH to the embedded target
 * (deploy.sh + container stand-in) → signed callback; control-plane steps against the
 * reference control plane over HTTP. One suite, run on SQLite and on Postgres (test 6) by
 * `main-job.sqlite.test.ts` and `main-job.postgres.test.ts` (two files, so they run in parallel).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { afterEach, expect, it } from "vitest";
import { stepLabel } from "../../engine/src/demo/progress.ts";
import { loadRecipe } from "../../engine/src/demo/stack.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Manifest, StepRun } from "../../engine/src/domain/types.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import {
  describeStore,
  type E2EBase,
  reconcilerRounds,
  rerunWhenCompleted,
  type StoreKind,
  startInProcess,
  startSplit,
  summarize,
  waitUntil,
} from "../support/e2e-harness.ts";

const TERMINAL = new Set(["succeeded", "rolled_back", "aborted", "needs_operator"]);
const T = 240_000; // per-test bound (ms); the runs themselves take 15–45 s

/** Forward step run of step `i` of release `id`. */
const fwd = (id: string, i: number) => `sr_${id.slice(1)}_${i}_f`;

function stepIndex(m: Manifest, label: string): number {
  const s = m.steps.find((x) => stepLabel(x) === label);
  if (!s) throw new Error(`no step ${label}`);
  return s.index;
}

/** The example recipe cut to two lanes (lane-a 50%, then lane-b 100%), with extra fields. */
function twoLaneRecipe(extra: Partial<RecipeInput> = {}): RecipeInput {
  const r = loadRecipe();
  const lanes = (r.lanes ?? []).slice(0, 2);
  return {
    ...r,
    lanes,
    rollout: {
      waves: [
        { lanes: [lanes[0]!.id], traffic: 50 },
        { lanes: [lanes[1]!.id], traffic: 100 },
      ],
    },
    ...extra,
  };
}

async function cpGet<T>(e: E2EBase, path: string): Promise<T> {
  const res = await fetch(`${e.fleet.cp.url}${path}`);
  expect(res.status, `control plane GET ${path}`).toBe(200);
  return (await res.json()) as T;
}

/** Stand-in containers on the target: name → {image, running}. */
function containers(e: E2EBase): Map<string, { image: string; lane: string; running: boolean }> {
  const dir = join(e.fleet.target.sandboxDir, "standin", "containers");
  const out = new Map<string, { image: string; lane: string; running: boolean }>();
  for (const f of readdirSync(dir)) {
    const c = JSON.parse(readFileSync(join(dir, f), "utf8"));
    out.set(c.name, { image: c.image, lane: c.lane, running: c.running });
  }
  return out;
}

function runningImageOf(e: E2EBase, lane: string): string[] {
  return [...containers(e).values()]
    .filter((c) => c.lane === lane && c.running)
    .map((c) => c.image);
}

export function mainJobSuite(kind: StoreKind): void {
  describeStore(kind, `main job end to end on ${kind}`, () => {
    let env: E2EBase | null = null;
    afterEach(async () => {
      await env?.close();
      env = null;
    });

    it(
      "1. recipes/example.yaml succeeds; every step run has its checks and log; the control plane shows the final absolute weights",
      async () => {
        const e = await startInProcess(kind);
        env = e;
        const id = await e.startRelease();
        const r = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
        expect(r.state, summarize(r)).toBe("succeeded");
        const m = r.manifest;
        expect(r.step_runs.filter((s) => s.direction === "fwd")).toHaveLength(m.steps.length);
        expect(r.step_runs.filter((s) => s.direction === "bwd")).toHaveLength(0);
        for (const sr of r.step_runs) {
          expect(sr.state, sr.id).toBe("succeeded");
          if (sr.kind === "runner") {
            // The attempt's result as the runner sent it: checks (per phase) and the log.
            const results = r.attempt_results.filter((a) => a.step_run_id === sr.id);
            expect(results, sr.id).toHaveLength(1);
            const a = results[0]!;
            expect(a.overall).toBe("pass");
            expect(a.status).toBe("succeeded");
            expect(Array.isArray(a.checks) && a.checks.length, sr.id).toBeGreaterThan(0);
            for (const c of a.checks as { name: string; status: string }[]) {
              expect(["ok", "skipped"], `${sr.id} check ${c.name}`).toContain(c.status);
            }
            expect(a.log.length, `${sr.id} log`).toBeGreaterThan(0);
            expect(sr.attempts).toHaveLength(1);
            expect(sr.attempts[0]!.run_attempt).toBe(1);
          } else {
            // A control-plane step run's outcome is in its history.
            const outcome = r.history.filter(
              (h) => h.step_run_id === sr.id && /applied|observed/.test(h.kind),
            );
            expect(outcome.length, `${sr.id} outcome in history`).toBeGreaterThan(0);
          }
        }
        // Final absolute weights: the last wave's, every lane included and advertised.
        const last = m.steps.filter((s) => s.name === "set_traffic").at(-1)!;
        const want = (last.forward as { request: { weights: Record<string, number> } }).request
          .weights;
        const traffic = await cpGet<{ weights: Record<string, number> }>(
          e,
          `/v1/models/${m.model}/traffic`,
        );
        expect(traffic.weights).toEqual(want);
        expect(Object.values(traffic.weights).reduce((a, b) => a + b, 0)).toBe(100);
        for (const lane of m.lanes) {
          const l = await cpGet<{ excluded: boolean; advertised: boolean }>(
            e,
            `/v1/lanes/${lane.id}`,
          );
          expect(l.excluded, lane.id).toBe(false);
          expect(l.advertised, lane.id).toBe(true);
          expect(runningImageOf(e, lane.id), lane.id).toEqual([m.image]);
        }
      },
      T,
    );

    it(
      "2. lane 2's health check fails: backward steps run in reverse from the high-water mark; rolled_back; weights and markers back to the baseline",
      async () => {
        // No re-run window: the failed step compensates at once (test/e2e/rerun-window.test.ts
        // covers the default window).
        const recipe = loadRecipe();
        const e = await startInProcess(kind, {
          recipe: { ...recipe, policy: { ...recipe.policy, rerun_window_minutes: 0 } },
        });
        env = e;
        const m = e.manifest;
        const failing = stepIndex(m, "attach_queue_lane:lane-b");
        const before = await cpGet<{ weights: Record<string, number> }>(
          e,
          `/v1/models/${m.model}/traffic`,
        );
        const lanesBefore = await cpGet<unknown>(e, "/v1/lanes");
        e.stack.failHealthAt(failing);
        const id = await e.startRelease();
        const r = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
        expect(r.state, summarize(r)).toBe("rolled_back");
        expect(r.high_water_mark).toBe(failing);
        const failed = r.step_runs.find((s) => s.id === fwd(id, failing))!;
        expect(failed.state).toBe("failed");
        const result = r.attempt_results.find((a) => a.step_run_id === failed.id)!;
        const health = (result.checks as { name: string; status: string }[]).find(
          (c) => c.name === "health",
        );
        expect(health?.status).toBe("failed");
        // No forward step after the failing one ran.
        expect(
          r.step_runs.filter((s) => s.direction === "fwd" && s.step_index > failing),
        ).toHaveLength(0);
        // Backward step runs: every step at or below the mark that has a backward action, in
        // strictly decreasing order of index, each succeeded.
        const expected = m.steps
          .filter((s) => s.index <= failing && s.backward)
          .map((s) => s.index)
          .reverse();
        const backward = r.step_runs
          .filter((s) => s.direction === "bwd")
          .sort((a, b) => (a.started_at ?? a.created_at) - (b.started_at ?? b.created_at));
        expect(backward.map((s) => s.step_index)).toEqual(expected);
        for (const b of backward) expect(b.state, b.id).toBe("succeeded");
        for (let i = 1; i < backward.length; i++) {
          expect(backward[i]!.started_at!).toBeGreaterThanOrEqual(backward[i - 1]!.finished_at!);
        }
        // The control plane is where it was: weights, markers, capabilities not advertised.
        const after = await cpGet<{ weights: Record<string, number> }>(
          e,
          `/v1/models/${m.model}/traffic`,
        );
        expect(after.weights).toEqual(before.weights);
        const strip = (ls: unknown) =>
          (ls as { lanes: Record<string, unknown>[] }).lanes.map(
            ({ updated_at: _u, ...rest }) => rest,
          );
        // A lane reports the image it runs once its restore run has ended, which may come a
        // moment after the release does (the run's post step): wait a bounded while for it.
        let lanesAfter = strip(await cpGet<unknown>(e, "/v1/lanes"));
        for (let i = 0; i < 60 && !isDeepStrictEqual(lanesAfter, strip(lanesBefore)); i++) {
          await new Promise((r) => setTimeout(r, 500));
          lanesAfter = strip(await cpGet<unknown>(e, "/v1/lanes"));
        }
        expect(lanesAfter).toEqual(strip(lanesBefore));
        // And the machines run the previous image again, the new one stopped.
        for (const lane of m.lanes) {
          expect(runningImageOf(e, lane.id), lane.id).toEqual([m.previous_image]);
        }
      },
      T,
    );

    it(
      "3. crash after the control plane applied traffic=10 and before the engine recorded it: restart reads/re-sends under the same key, one application, the router gives exactly 1,000 of 10,000 to the candidate",
      async () => {
        const e = await startSplit(kind);
        env = e;
        const m = e.manifest;
        const traffic = stepIndex(m, "set_traffic(10%)");
        const nextLaneStep = stepIndex(m, "exclude_lane:lane-b");
        // A fresh store numbers its first release r1, so the fault can name its step runs.
        const id = "r1";
        const key = `${id}:${traffic}:fwd:traffic=10`;
        const first = await e.startEngine({
          BATON_FAULT: `after_effect_before_outcome@step_run_id=${fwd(id, traffic)},effect=control_plane`,
        });
        expect(await e.startRelease()).toBe(id);
        const died = await Promise.race([
          first.exited,
          new Promise<null>((r) => setTimeout(() => r(null), 120_000)),
        ]);
        expect(died, first.output()).toEqual({ code: null, signal: "SIGKILL" });
        expect(first.output()).toContain("fault point after_effect_before_outcome reached");
        // The control plane applied it once, under the operation key; the engine never heard.
        const counts = e.fleet.cp.core.applicationCounts();
        expect(counts[key]).toBe(1);

        // Restart on the same store; stop it again just before the next lane's first effect,
        // so the fleet can be inspected at exactly this point of the release.
        const second = await e.startEngine({
          BATON_FAULT: `after_commit_before_effect@step_run_id=${fwd(id, nextLaneStep)}`,
        });
        const died2 = await Promise.race([
          second.exited,
          new Promise<null>((r) => setTimeout(() => r(null), 120_000)),
        ]);
        expect(died2, second.output()).toEqual({ code: null, signal: "SIGKILL" });
        expect(e.fleet.cp.core.applicationCounts()[key]).toBe(1);
        const { ledger } = await cpGet<{ ledger: { operation_key: string }[] }>(
          e,
          `/v1/ledger?release_id=${id}`,
        );
        const { history } = await cpGet<{ history: { operation_key: string }[] }>(
          e,
          `/v1/history?operation_key=${encodeURIComponent(key)}`,
        );
        expect(history).toHaveLength(1);
        expect(ledger.filter((x) => x.operation_key === key)).toHaveLength(1);
        const routed = await fetch(`${e.fleet.cp.url}/v1/route`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ requests: 10_000, model: m.model }),
        });
        expect(routed.status).toBe(200);
        const route = (await routed.json()) as { counts: Record<string, number> };
        expect(route.counts["lane-a"]).toBe(1_000);
        expect(Object.values(route.counts).reduce((a, b) => a + b, 0)).toBe(10_000);

        // Third start: no fault; the release finishes.
        await e.startEngine();
        const r = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
        expect(r.state, summarize(r)).toBe("succeeded");
        const sr = r.step_runs.find((s) => s.id === fwd(id, traffic))!;
        expect(sr.state).toBe("succeeded");
        expect(sr.operation_key).toBe(key);
        // Recorded from the control plane's answer under the same key (a replay or a read).
        const applied = r.history.filter((h) => h.step_run_id === sr.id && h.kind === "applied");
        expect(applied).toHaveLength(1);
        expect((applied[0]!.data as { message?: string }).message).toMatch(/replayed/);
        expect(e.fleet.cp.core.applicationCounts()[key]).toBe(1);
      },
      T,
    );

    it(
      "4. re-run from the Actions UI: a pause-policy runner step fails, attempt 2 of the same run passes preflight and succeeds, the release succeeds, attempt 1's late callback is refused",
      async () => {
        const recipe = twoLaneRecipe({
          policy: {
            on_failure: "compensate",
            steps: { attach_queue_lane: { retries: 0, on_failure: "pause" } },
          },
        });
        const e = await startInProcess(kind, { recipe });
        env = e;
        const { stack } = e;
        const step = stepIndex(e.manifest, "attach_queue_lane:lane-a");
        stack.failHealthAt(step, "next_run");
        const id = await e.startRelease();
        const srId = fwd(id, step);
        const paused = await e.waitFor(
          id,
          (x) => x.state === "paused" || TERMINAL.has(x.state),
          "the release to pause",
        );
        expect(paused.state, summarize(paused)).toBe("paused");
        expect(paused.step_runs.find((s) => s.id === srId)?.state).toBe("failed");
        // The Actions UI's "Re-run jobs": same run id, GITHUB_RUN_ATTEMPT=2.
        const again = await rerunWhenCompleted(stack.runner, srId);
        const run1 = stack.runner.runsOf(srId)[0]!;
        expect(again).toEqual({ runId: run1.runId, attempt: 2 });
        const r = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
        expect(r.state, summarize(r)).toBe("succeeded");
        const sr = r.step_runs.find((s) => s.id === srId)!;
        expect(sr.dispatch).toBe(1);
        expect(sr.attempts.map((a) => [a.n, a.run_id, a.run_attempt])).toEqual([
          [1, run1.runId, 1],
          [2, run1.runId, 2],
        ]);
        expect(sr.attempts[1]!.state).toBe("succeeded");
        expect(["failed", "fenced"]).toContain(sr.attempts[0]!.state);
        // Attempt 1's callback arrives late (a replay of its body with a fresh valid signature).
        const late = r.attempt_results.find((a) => a.step_run_id === srId && a.attempt === 1)!;
        expect(late.overall).toBe("fail");
        const res = await fetch(`${e.url()}/v1/releases/step-runs/${srId}/callback`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...signBody(e.callbackSecret, late.raw_callback),
          },
          body: late.raw_callback,
        });
        expect(res.status).toBe(409);
        const after = await e.record(id);
        expect(after.state).toBe("succeeded");
        const refused = after.history.filter(
          (h) => h.step_run_id === srId && h.outcome === "refused" && /callback/.test(h.kind),
        );
        expect(
          refused.length,
          JSON.stringify(after.history.filter((h) => h.step_run_id === srId)),
        ).toBeGreaterThan(0);
        expect(after.step_runs.find((s) => s.id === srId)?.state).toBe("succeeded");
        // The dashboard's release page lists it too.
        const page = await e.api(`/releases/${id}`);
        expect(page.status).toBe(200);
        expect(await page.text()).toContain("refused");
      },
      T,
    );

    it(
      "5. a dispatch accepted but never run: no preflight before the start deadline → unknown, shown, never success; an operator retry dispatches again and the release completes",
      async () => {
        // The engine's clock is the wall clock plus `ahead`: the start deadline is passed by
        // moving it, not by waiting for it.
        let ahead = 0;
        const e = await startInProcess(kind, {
          recipe: twoLaneRecipe(),
          deadlines: { start_ms: 10_000 },
          clock: { now: () => Date.now() + ahead },
        });
        env = e;
        const { stack } = e;
        const step = stepIndex(e.manifest, "attach_queue_lane:lane-a");
        stack.runner.acceptButNeverRun(
          (p) => /_\d+_f$/.test(p.step_run_id) && p.step_run_id.endsWith(`_${step}_f`),
          1,
        );
        const id = await e.startRelease();
        const srId = fwd(id, step);
        // Dispatched (GitHub said 204) and never run: then its start deadline passes.
        await waitUntil(
          () => e.record(id),
          (x) => x.step_runs.some((q) => q.id === srId && q.state === "dispatched"),
          "the step run to be dispatched",
          60_000,
          summarize,
        );
        ahead += 11_000;
        const seen = new Set<string>();
        const stuck = await waitUntil(
          () => e.record(id),
          (x) => {
            const s = x.step_runs.find((q) => q.id === srId);
            if (s) seen.add(s.state);
            return s?.state === "unknown" || TERMINAL.has(x.state);
          },
          "the step run to become unknown",
          60_000,
          summarize,
        );
        const sr = stuck.step_runs.find((s) => s.id === srId) as StepRun;
        expect(sr.state, summarize(stuck)).toBe("unknown");
        expect(seen.has("succeeded")).toBe(false);
        expect(sr.attempts).toHaveLength(0);
        expect(stuck.state).toBe("paused");
        expect(stuck.reason ?? "").toMatch(/unknown|start deadline|preflight/i);
        expect(stack.runner.runsOf(srId).map((x) => x.state)).toEqual(["never_ran"]);
        // Shown as such on the step run's page.
        const page = await e.api(`/step-runs/${srId}`);
        expect(page.status).toBe(200);
        expect(await page.text()).toContain("unknown");
        // Stays unknown (never success) until someone acts: a few reconciler rounds later.
        await reconcilerRounds(e, 5);
        expect((await e.record(id)).step_runs.find((s) => s.id === srId)?.state).toBe("unknown");
        // Bad token first: refused, nothing dispatched.
        const denied = await e.api(`/v1/releases/step-runs/${srId}/retry`, {
          method: "POST",
          headers: { authorization: "Bearer not-the-operator-token-000" },
        });
        expect(denied.status).toBe(401);
        const retry = await e.api(`/v1/releases/step-runs/${srId}/retry`, { method: "POST" });
        expect(retry.status, await retry.clone().text()).toBe(200);
        const r = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
        expect(r.state, summarize(r)).toBe("succeeded");
        const done = r.step_runs.find((s) => s.id === srId)!;
        expect(done.dispatch).toBe(2);
        expect(done.attempts).toHaveLength(1);
        expect(done.attempts[0]!.dispatch).toBe(2);
        expect(stack.runner.runsOf(srId).map((x) => x.state)).toEqual(["never_ran", "completed"]);
      },
      T,
    );
  });
}
