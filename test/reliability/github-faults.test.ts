/**
 * Faults at GitHub around a running release: the real GitHub dispatcher against the
 * GitHub stand-in (which checks GitHub's documented limits) and the real engine (SQLite).
 * A 5xx and a timeout are retried as the SAME step run (same id, the engine's dispatch
 * sequence unchanged); a dispatch GitHub delivers twice runs twice, and the second run is
 * fenced at preflight (409) before it touches anything.
 */
import { afterEach, describe, expect, it } from "vitest";
import { GitHubDispatcher } from "../../engine/src/adapters/github/index.ts";
import type { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  createRelease,
  type Harness,
  makeHarness,
  preflightBody,
  preflightUrl,
  recipe,
  runStep,
  signedPost,
} from "../integration/service-harness.ts";
import { type GitHubStandin, startGitHubStandin } from "../support/github-standin.ts";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

async function world(): Promise<{ h: Harness; gh: GitHubStandin }> {
  const gh = await startGitHubStandin({ repository: "acme/models", tokens: ["ghp_chaos"] });
  cleanups.push(() => gh.close());
  const dispatcher = new GitHubDispatcher({
    repository: "acme/models",
    auth: { kind: "token", token: "ghp_chaos" },
    baseUrl: gh.baseUrl,
    timeoutMs: 300,
  });
  const h = await makeHarness({
    dispatcher: dispatcher as unknown as MemoryDispatcher,
    seed: recipe(2),
  });
  cleanups.push(() => h.close());
  return { h, gh };
}

const payloads = (gh: GitHubStandin) =>
  gh.accepted.map((d) => d.client_payload as unknown as DispatchPayload);

/** Ticks (moving the fake clock over backoffs) until GitHub accepted `n` dispatches. */
async function untilAccepted(h: Harness, gh: GitHubStandin, n: number): Promise<void> {
  for (let i = 0; i < 60 && gh.accepted.length < n; i++) {
    await h.engine.tick();
    h.clock.advance(2_000);
  }
  expect(gh.accepted.length).toBeGreaterThanOrEqual(n);
}

describe("GitHub faults", () => {
  it.each([
    ["5xx", { kind: "status", status: 502, message: "Server Error" }],
    ["timeout", { kind: "hang" }],
  ] as const)(
    "dispatch %s: retried as the same step run; the run then proceeds",
    async (_n, behaviour) => {
      const { h, gh } = await world();
      gh.behave(behaviour, 2);
      const id = await createRelease(h, recipe(2));
      await untilAccepted(h, gh, 1);
      const tries = gh.seen.filter((s) => s.path.endsWith("/dispatches"));
      expect(tries.length).toBeGreaterThanOrEqual(3);
      const [p] = payloads(gh);
      const rel = (await h.store.getRelease(id))!;
      const sr = rel.step_runs.find((s) => s.id === p!.step_run_id)!;
      // Same step run, same dispatch sequence: a retry of the send, not a new dispatch.
      expect(p!.release.dispatch).toBe(1);
      expect(sr.dispatch).toBe(1);
      const r = await runStep(h, p!, "pass");
      expect(r.preflight.status).toBe(200);
      expect(r.callback?.status).toBe(200);
    },
  );

  it("a dispatch delivered twice: the second run is fenced at preflight, nothing recorded for it", async () => {
    const { h, gh } = await world();
    const id = await createRelease(h, recipe(2));
    await untilAccepted(h, gh, 1);
    const [p] = payloads(gh);
    const first = { run_id: "9001", run_attempt: 1 };
    const second = { run_id: "9002", run_attempt: 1 };
    const a = await signedPost(h, preflightUrl(p!.step_run_id), preflightBody(p!, first));
    const b = await signedPost(h, preflightUrl(p!.step_run_id), preflightBody(p!, second));
    expect(a.status).toBe(200);
    expect(b.status).toBe(409);
    const rel = (await h.store.getRelease(id))!;
    const sr = rel.step_runs.find((s) => s.id === p!.step_run_id)!;
    expect(sr.attempts.map((x) => x.run_id)).toEqual(["9001"]);
  });
});
