// The recipe workflow's start logic (the `run:` script of recipe.yml's start job, executed as
// GitHub does: bash -e -o pipefail) against a throwaway git history and a real engine over
// HTTP: a first merge, three quick merges whose middle run GitHub cancelled, a force-push and
// a run with a zero `before`. Every merged recipe is started exactly once, asserted on the
// engine's releases; a recipe failing its check or an unreachable engine fails the job. Merge
// order is release order: the cancelled run of an older recipe, re-run after a newer one was
// released, fails naming the release that stands, and a revert starts a new release.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import {
  drive,
  type Harness,
  makeHarness,
  OPERATOR,
  recipe,
} from "../integration/service-harness.ts";
import { runWorkflowStep, START_STEP } from "../support/recipe-workflow.ts";

let h: Harness;
let server: ReturnType<typeof serve>;
let url: string;
let dir: string;
beforeAll(async () => {
  h = await makeHarness({ kind: "sqlite" });
  // The control plane knows each recipe's lane, serving its model (a write never creates one).
  h.cp.seed(
    Array.from({ length: 9 }, (_, i) => ({
      id: `lane-${i + 1}`,
      model: `model-${i + 1}`,
      weight: 100,
    })),
  );
  server = serve({ fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), "baton-recipe-wf-"));
});
afterAll(async () => {
  await new Promise<void>((resolve) => server?.close(() => resolve()));
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * A recipe on its own lane and model (so releases of different recipes never share lanes, and
 * each recipe agrees with the control plane's observed baseline: lane-k serves model-k alone).
 */
function recipeText(k: number, model = `model-${k}`): string {
  const r = recipe(1, { name: `svc-${k}`, model });
  const l = { ...(r.lanes?.[0] as object), id: `lane-${k}`, port: 2200 + k };
  return stringify({
    ...r,
    lanes: [l],
    rollout: { waves: [{ lanes: [`lane-${k}`], traffic: 100 }] },
  });
}

/** Commit dates of `gitAt` (epoch seconds); `git` leaves them to the clock. */
let commitDate: number | null = null;

function git(repo: string, ...args: string[]): string {
  const date =
    commitDate === null
      ? {}
      : { GIT_AUTHOR_DATE: `@${commitDate} +0000`, GIT_COMMITTER_DATE: `@${commitDate} +0000` };
  return execFileSync("git", ["-C", repo, ...args], {
    encoding: "utf8",
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@example.com",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@example.com",
      ...date,
    },
  }).trim();
}

/** One run of the start job at `sha` (a fresh checkout, like actions/checkout). Async: the
 * engine answers from this process. */
async function runStart(origin: string, sha: string, env: Record<string, string> = {}) {
  const checkout = mkdtempSync(join(dir, "checkout-"));
  execFileSync("git", ["clone", "-q", origin, checkout]);
  git(checkout, "checkout", "-q", sha);
  const summary = join(checkout, "summary.md");
  const { code, out } = await runWorkflowStep(checkout, {
    BATON_ENGINE_URL: url,
    BATON_TOKEN: OPERATOR,
    GITHUB_STEP_SUMMARY: summary,
    GITHUB_EVENT_BEFORE: "0000000000000000000000000000000000000000",
    ...env,
  });
  return { code, out, summary: readFileSync(summary, "utf8") };
}

async function releasesByRecipe(): Promise<Record<string, number>> {
  const res = await fetch(`${url}/v1/releases?limit=200`, {
    headers: { authorization: `Bearer ${OPERATOR}` },
  });
  const { releases } = (await res.json()) as { releases: { recipe_name: string }[] };
  const out: Record<string, number> = {};
  for (const r of releases) out[r.recipe_name] = (out[r.recipe_name] ?? 0) + 1;
  return out;
}

describe("recipe.yml start job", () => {
  it("extracts the start script from the workflow", () => {
    expect(START_STEP).toContain("start-pending");
    expect(START_STEP).not.toMatch(/git diff/);
  });

  it("starts every merged recipe exactly once across cancelled runs, a force-push and a zero before", async () => {
    const origin = join(dir, "origin");
    mkdirSync(join(origin, "recipes"), { recursive: true });
    git(origin, "init", "-q", "-b", "main");
    writeFileSync(join(origin, "README"), "fleet\n");
    git(origin, "add", ".");
    git(origin, "commit", "-q", "-m", "init");
    const merge = (k: number) => {
      writeFileSync(join(origin, "recipes", `svc-${k}.yaml`), recipeText(k));
      git(origin, "add", ".");
      git(origin, "commit", "-q", "-m", `recipe ${k}`);
      return git(origin, "rev-parse", "HEAD");
    };
    // Merge 1, its run starts svc-1.
    const first = await runStart(origin, merge(1));
    expect(first.code, first.out).toBe(0);
    expect(await releasesByRecipe()).toEqual({ "svc-1": 1 });
    // Three quick merges; GitHub cancelled the middle run (it never ran).
    const m2 = merge(2);
    const m3 = merge(3);
    const m4 = merge(4);
    const r2 = await runStart(origin, m2);
    expect(r2.code, r2.out).toBe(0);
    void m3; // cancelled: no run at m3
    const r4 = await runStart(origin, m4);
    expect(r4.code, r4.out).toBe(0);
    expect(r4.out).toMatch(/already_released\s+recipes\/svc-1\.yaml/);
    expect(await releasesByRecipe()).toEqual({ "svc-1": 1, "svc-2": 1, "svc-3": 1, "svc-4": 1 });
    // Force-push: history rewritten (the old `before` is unknown), recipe 5 added on top.
    git(origin, "reset", "-q", "--hard", m2);
    writeFileSync(join(origin, "recipes", "svc-3.yaml"), recipeText(3));
    writeFileSync(join(origin, "recipes", "svc-4.yaml"), recipeText(4));
    writeFileSync(join(origin, "recipes", "svc-5.yaml"), recipeText(5));
    git(origin, "add", ".");
    git(origin, "commit", "-q", "-m", "rewritten: 3, 4, 5 squashed");
    const forced = await runStart(origin, git(origin, "rev-parse", "HEAD"), {
      GITHUB_EVENT_BEFORE: m4,
    });
    expect(forced.code, forced.out).toBe(0);
    // A re-run with a zero before (new branch / first push) starts nothing new.
    const again = await runStart(origin, git(origin, "rev-parse", "HEAD"));
    expect(again.code, again.out).toBe(0);
    expect(again.out).not.toMatch(/\bstarted\b/);
    expect(again.summary).toContain("already_released");
    expect(await releasesByRecipe()).toEqual({
      "svc-1": 1,
      "svc-2": 1,
      "svc-3": 1,
      "svc-4": 1,
      "svc-5": 1,
    });
  }, 240_000);

  it("merge order is release order: a re-run of an older run fails naming the release that stands; a revert starts", async () => {
    const origin = join(dir, "origin-order");
    mkdirSync(join(origin, "recipes"), { recursive: true });
    git(origin, "init", "-q", "-b", "main");
    const image = (n: number) => `ghcr.io/acme/summarizer@sha256:${String(n).repeat(64)}`;
    const base = 1_800_000_000;
    const merge = (minute: number, n: number) => {
      const r = parse(recipeText(6)) as Record<string, unknown>;
      writeFileSync(join(origin, "recipes", "svc-6.yaml"), stringify({ ...r, image: image(n) }));
      commitDate = base + minute * 60;
      try {
        git(origin, "add", ".");
        git(origin, "commit", "-q", "-m", `svc-6 d${n}`);
        return git(origin, "rev-parse", "HEAD");
      } finally {
        commitDate = null;
      }
    };
    const c1 = merge(1, 1);
    const first = await runStart(origin, c1);
    expect(first.code, first.out).toBe(0);
    await drive(h);
    const c2 = merge(2, 2); // its run was cancelled: a newer push queued
    const c3 = merge(3, 3);
    const third = await runStart(origin, c3);
    expect(third.code, third.out).toBe(0);
    const r3 = /started\s+recipes\/svc-6\.yaml: started (r\d+)/.exec(third.out)?.[1];
    expect(r3, third.out).toBeDefined();
    await drive(h);
    // The cancelled run, re-run from the Actions UI: the job fails, naming what stands.
    const rerun = await runStart(origin, c2);
    expect(rerun.code, rerun.out).toBe(1);
    const stands = `commit ${c3.slice(0, 7)} (committed 2027-01-15T08:03:00Z), from which release ${r3} (succeeded, image ${image(3)}) stands for model model-6`;
    expect(rerun.out).toMatch(/superseded\s+recipes\/svc-6\.yaml: \[cli\] commit /);
    expect(rerun.out).toContain(stands);
    expect(rerun.summary).toContain(stands);
    expect(rerun.out).not.toMatch(/\bstarted r/);
    expect((await releasesByRecipe())["svc-6"]).toBe(2);
    // main back to d1 while the fleet runs d3: a new release of d1.
    const c4 = merge(4, 1);
    const revert = await runStart(origin, c4);
    expect(revert.code, revert.out).toBe(0);
    expect(revert.out).toMatch(/started\s+recipes\/svc-6\.yaml: started r\d+/);
    expect((await releasesByRecipe())["svc-6"]).toBe(3);
  }, 240_000);

  it("fails loudly on a recipe that fails its check and on an unreachable engine", async () => {
    const origin = join(dir, "origin-bad");
    mkdirSync(join(origin, "recipes"), { recursive: true });
    git(origin, "init", "-q", "-b", "main");
    writeFileSync(join(origin, "recipes", "svc-8.yaml"), recipeText(8));
    writeFileSync(join(origin, "recipes", "broken.yaml"), "name: broken\nlanes: 3\n");
    git(origin, "add", ".");
    git(origin, "commit", "-q", "-m", "one good, one broken");
    const sha = git(origin, "rev-parse", "HEAD");
    const bad = await runStart(origin, sha);
    expect(bad.code).toBe(1);
    expect(bad.out).toMatch(/failed\s+recipes\/broken\.yaml/);
    // The good recipe was still started.
    expect((await releasesByRecipe())["svc-8"]).toBe(1);
    const down = await runStart(origin, sha, { BATON_ENGINE_URL: "http://127.0.0.1:9" });
    expect(down.code).toBe(1);
    expect(down.out).toMatch(/127\.0\.0\.1:9/);
  }, 120_000);
});
