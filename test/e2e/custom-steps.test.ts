/**
 * Custom steps end to end on the embedded stack, both stores (docs/recipes.md "Custom steps"):
 * a two-lane recipe declares two custom step pairs, each an allowlisted tool forward and
 * another backward, run by the local runner through the bundled release-step action (the same
 * dispatch, preflight, allowlist and callback credential as the built-in runner steps):
 * `warm_cache` in lane-a's block right after its redeploy (needs_drained), and
 * `register_discovery` right after wave 1's set_traffic. Wave 2's redeploy of lane-b then
 * fails its health check. The witness is the runner (which tools it ran, for which step run,
 * in which order), not the engine's tables: both forward tools ran in table order; in the undo
 * both backward tools ran after lane-b's restore, `register_discovery`'s before `warm_cache`'s
 * (reverse table order), and `warm_cache`'s before lane-a's own restore. The release ends
 * `rolled_back`; the record, the dashboard and `baton status` name both steps.
 */
import { expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { stepRunId } from "../../engine/src/protocol/ids.ts";
import { baton } from "../cli/run-baton.ts";
import { describeInProcess, summarize, TERMINAL, twoLaneRecipe } from "../support/e2e-harness.ts";

const T = 300_000;

/** Two custom step pairs on the two-lane recipe; no re-run window (compensate at once). */
function recipe(): RecipeInput {
  const r = twoLaneRecipe({ rerun_window_minutes: 0 });
  const [a] = (r.lanes ?? []).map((l) => String(l.id));
  return {
    ...r,
    custom_steps: [
      {
        name: "warm_cache",
        forward: "run-smoke",
        backward: "inspect-lane",
        placement: { after: "attach_queue_lane", lanes: [a!] },
        inputs: { cache: "kv" },
        needs_drained: true,
      },
      {
        name: "register_discovery",
        forward: "run-smoke",
        backward: "inspect-lane",
        placement: { after: "set_traffic", waves: [1] },
      },
    ],
  };
}

describeInProcess(
  (kind) => `custom steps on ${kind}`,
  (start) => {
    it(
      "a custom step pair runs forward and, after a later step fails, its backward tool runs in reverse table order",
      async () => {
        const e = await start({ recipe: recipe() });
        const m = e.manifest;
        const [a, b] = m.lanes.map((l) => l.id);
        const at = (name: string, lane: string | null) => {
          const s = m.steps.find((x) => x.name === name && (lane === null || x.lane === lane));
          if (!s) throw new Error(`no step ${name} ${lane ?? ""}`);
          return s.index;
        };
        const warm = at("warm_cache", a!);
        const register = at("register_discovery", null);
        const attachA = at("attach_queue_lane", a!);
        const attachB = at("attach_queue_lane", b!);
        expect(warm).toBe(attachA + 1);
        expect(m.steps[register - 1]?.name).toBe("set_traffic");
        expect(register).toBeLessThan(attachB);

        e.stack.failHealthAt(attachB, "next_run");
        const id = await e.startRelease();
        const done = await e.waitFor(id, (r) => TERMINAL.has(r.state), `${id} to end`, T);
        expect(done.state, summarize(done)).toBe("rolled_back");

        // The runner's account: every run it made for this release, oldest first.
        const n = Number(id.slice(1));
        const runs = e.stack.runner.list().filter((r) => r.payload.release?.id === id);
        const runOf = (index: number, backward: boolean) => {
          const sr = stepRunId(n, index, backward);
          const found = runs.filter((r) => r.stepRunId === sr);
          expect(found, `${sr} ran once`).toHaveLength(1);
          return { pos: runs.indexOf(found[0]!), run: found[0]! };
        };
        const fwdWarm = runOf(warm, false);
        const fwdRegister = runOf(register, false);
        const bwdWarm = runOf(warm, true);
        const bwdRegister = runOf(register, true);
        const bwdB = runOf(attachB, true);
        const bwdA = runOf(attachA, true);
        for (const f of [fwdWarm, fwdRegister]) {
          expect(f.run.payload.tool).toBe("run-smoke");
          expect(f.run.conclusion).toBe("success");
        }
        for (const u of [bwdWarm, bwdRegister]) {
          expect(u.run.payload.tool).toBe("inspect-lane");
          expect(u.run.conclusion).toBe("success");
        }
        expect(fwdWarm.run.payload.args).toMatchObject({
          inputs: { cache: "kv" },
          step: { name: "warm_cache", direction: "forward" },
        });
        expect(bwdWarm.run.payload.args).toMatchObject({
          step: { name: "warm_cache", direction: "backward" },
        });
        // Forward in table order; backward in reverse, after the failed lane-b's restore.
        expect(fwdWarm.pos).toBeLessThan(fwdRegister.pos);
        expect(bwdB.pos).toBeLessThan(bwdRegister.pos);
        expect(bwdRegister.pos).toBeLessThan(bwdWarm.pos);
        expect(bwdWarm.pos).toBeLessThan(bwdA.pos);
        // Each undo was under way before the next one was dispatched (the engine waits for
        // its callback; the run itself ends later, after its post step).
        expect(bwdRegister.run.startedAt).toBeLessThanOrEqual(bwdWarm.run.queuedAt);
        expect(bwdWarm.run.startedAt).toBeLessThanOrEqual(bwdA.run.queuedAt);

        // By name in the record, the dashboard and the CLI.
        const rec = (await (await e.api(`/v1/releases/${id}/record`)).json()) as {
          ran: { step_runs: { name: string; direction: string; state: string }[] };
        };
        for (const name of ["warm_cache", "register_discovery"])
          expect(
            rec.ran.step_runs.filter((s) => s.name === name && s.state === "succeeded"),
          ).toEqual([
            expect.objectContaining({ direction: "fwd" }),
            expect.objectContaining({ direction: "bwd" }),
          ]);
        const page = await (await e.api(`/releases/${id}`)).text();
        expect(page).toContain(`warm cache · ${a}`);
        expect(page).toContain(`register discovery · ${a}`);
        const status = await baton(["status", id], {
          BATON_ENGINE_URL: e.url(),
          BATON_TOKEN: e.operatorToken,
        });
        expect(status.code, status.stderr).toBe(0);
        expect(status.stdout).toContain(`warm cache · ${a}`);
        expect(status.stdout).toContain(`undo warm cache · ${a}`);
        expect(status.stdout).toContain(`undo register discovery · ${a}`);
      },
      T,
    );
  },
);
