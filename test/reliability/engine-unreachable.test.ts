/**
 * The engine unreachable while the action posts its callback: the bundled action,
 * run by the local runner on the embedded SSH target, reaches the engine (its own process)
 * through a proxy that drops the first callbacks of the first runner step run. The main step
 * retries and gives up (2 attempts here); the post step sends the result; nothing is lost: the
 * step run succeeds with the runner's real result stored, and the release goes on.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { type CrashWorld, startCrashWorld } from "../support/chaos-world.ts";

describe("engine unreachable during the callback", () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-unreach-"));
  let world: CrashWorld | null = null;
  afterAll(async () => {
    await world?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("main gives up after its retries, the post step delivers the result, the step run succeeds", async () => {
    world = await startCrashWorld({
      dir,
      proxy: true,
      runnerEnv: { BATON_HTTP_ATTEMPTS: "2", BATON_HTTP_BASE_DELAY_MS: "100" },
    });
    const proxy = world.proxy!;
    const sr = "sr_1_2_f"; // attach_queue_lane:lane-a, the first runner step of r1
    proxy.dropCallbacks(sr, 2);
    await world.startEngine();
    const id = await world.startRelease();
    expect(id).toBe("r1");
    let state = "";
    for (let i = 0; i < 600 && state !== "succeeded"; i++) {
      const r = await world.readRelease(id);
      state = r?.step_runs.find((s) => s.id === sr)?.state ?? "";
      if (state === "failed" || state === "unknown") break;
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(state).toBe("succeeded");
    const callbacks = proxy.seen.filter((s) => s.path.includes(sr) && s.path.endsWith("/callback"));
    expect(callbacks.filter((c) => c.dropped)).toHaveLength(2);
    expect(callbacks.filter((c) => !c.dropped).length).toBeGreaterThanOrEqual(1);
    const run = world.runner.runsOf(sr)[0]!;
    await world.runner.idle(30_000);
    const log = readFileSync(run.logFile, "utf8");
    expect(log).toMatch(/post/i);
    const rec = await world.api(`/v1/releases/${id}`);
    const body = (await rec.json()) as {
      attempt_results?: { step_run_id: string; overall: string }[];
    };
    const stored = body.attempt_results?.find((a) => a.step_run_id === sr);
    expect(stored?.overall).toBe("pass");
  }, 120_000);
});
