// Merge order is release order (docs/lifecycle.md), the two cases it guards against, on both stores:
// `baton start-pending --commit` (in process, as the recipe workflow runs it) against an engine
// served over HTTP, on a throwaway git history with one recipe whose image moves d1 → d2 → d3.
// 1. The run of an older commit (d2), re-run after a newer commit's release (d3) succeeded, is
//    refused naming the release that stands (id, commit, image) and starts nothing; the engine
//    refuses the same start sent by hand (older commit time, or checked against another commit).
// 2. A revert to d1 while the fleet runs d2 starts a new release of d1; a revert to what the fleet
//    runs already (the newer release rolled back) starts nothing, and still makes a later re-run
//    of the older commit superseded.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { afterEach, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { runCli } from "../../engine/src/cli/program.ts";
import {
  drive,
  type Harness,
  makeHarness,
  OPERATOR,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "../integration/service-harness.ts";

/** Image dN: the recipe's content at each commit. */
const D = (n: number) => `ghcr.io/acme/summarizer@sha256:${String(n).repeat(64)}`;
/** Commit times: a minute apart, from here (epoch seconds). */
const BASE = 1_800_000_000;

interface Fixture {
  h: Harness;
  url: string;
  dir: string;
  origin: string;
  close(): Promise<void>;
}

async function fixture(kind: (typeof STORE_KINDS)[number]): Promise<Fixture> {
  const h = await makeHarness({ kind, seed: recipe(1) });
  const server = serve({ fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const dir = mkdtempSync(join(tmpdir(), "baton-order-"));
  const origin = join(dir, "origin");
  mkdirSync(join(origin, "recipes"), { recursive: true });
  git(origin, 0, "init", "-q", "-b", "main");
  return {
    h,
    url,
    dir,
    origin,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await h.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function git(repo: string, at: number, ...args: string[]): string {
  const date = `@${at} +0000`;
  return execFileSync("git", ["-C", repo, ...args], {
    encoding: "utf8",
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@example.com",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@example.com",
      GIT_AUTHOR_DATE: date,
      GIT_COMMITTER_DATE: date,
    },
  }).trim();
}

/** Commits `files` on main, `minute` minutes after BASE; returns the commit id. */
function merge(f: Fixture, minute: number, files: Record<string, string>): string {
  for (const [name, text] of Object.entries(files)) writeFileSync(join(f.origin, name), text);
  const at = BASE + minute * 60;
  git(f.origin, at, "add", ".");
  git(f.origin, at, "commit", "-q", "-m", `minute ${minute}`);
  return git(f.origin, at, "rev-parse", "HEAD");
}

/** The recipe with image dN (a failed step compensates at once: no re-run window). */
const content = (n: number) => recipe(1, { image: D(n), policy: { rerun_window_minutes: 0 } });
const svc = (n: number) => ({ "recipes/svc.yaml": stringify(content(n)) });

/** One run of the recipe workflow's start at `sha`: a fresh full clone checked out there. */
async function runAt(f: Fixture, sha: string) {
  const checkout = mkdtempSync(join(f.dir, "checkout-"));
  execFileSync("git", ["clone", "-q", f.origin, checkout]);
  execFileSync("git", ["-C", checkout, "checkout", "-q", sha]);
  const out: string[] = [];
  const code = await runCli(
    [
      "--engine",
      f.url,
      "--token",
      OPERATOR,
      "start-pending",
      "--commit",
      sha,
      join(checkout, "recipes/svc.yaml"),
    ],
    { out: { write: (s: string) => out.push(s) }, err: { write: (s: string) => out.push(s) } },
  );
  return { code, out: out.join("") };
}

async function releases(f: Fixture): Promise<{ id: string; state: string; image: string }[]> {
  const list = (await (await op(f.h, "GET", "/v1/releases?limit=200")).json()) as {
    releases: { id: string; state: string }[];
  };
  const out = [];
  for (const r of list.releases.reverse()) {
    const rec = (await (await op(f.h, "GET", `/v1/releases/${r.id}`)).json()) as {
      manifest: { image: string };
    };
    out.push({ id: r.id, state: r.state, image: rec.manifest.image });
  }
  return out;
}

const short = (sha: string) => sha.slice(0, 7);

describe.each(STORE_KINDS)("merge order is release order on %s", (kind) => {
  const skip = skipStore(kind);
  let f: Fixture | null = null;
  afterEach(async () => {
    await f?.close();
    f = null;
  });

  it.skipIf(skip)(
    "an older run re-run after a newer release is superseded, naming the release that stands; the engine refuses it too",
    async () => {
      f = await fixture(kind);
      const c1 = merge(f, 1, svc(1));
      const first = await runAt(f, c1);
      expect(first.code, first.out).toBe(0);
      expect(first.out).toMatch(/^started\s+\S+svc\.yaml: started r1/m);
      await drive(f.h);
      // d2 merged; its run was cancelled (a newer one queued). Then d3 merged and released.
      const c2 = merge(f, 2, svc(2));
      const c3 = merge(f, 3, svc(3));
      const third = await runAt(f, c3);
      expect(third.code, third.out).toBe(0);
      await drive(f.h);
      expect(await releases(f)).toEqual([
        { id: "r1", state: "succeeded", image: D(1) },
        { id: "r2", state: "succeeded", image: D(3) },
      ]);
      // The cancelled run of d2, re-run: nothing starts; the line names r2, c3 and d3; exit 1.
      const rerun = await runAt(f, c2);
      expect(rerun.code, rerun.out).toBe(1);
      expect(rerun.out).toMatch(/^superseded\s+\S+svc\.yaml: \[cli\] commit /m);
      expect(rerun.out).toContain(`commit ${short(c2)} (committed 2027-01-15T08:02:00Z) is older`);
      expect(rerun.out).toContain(
        `commit ${short(c3)} (committed 2027-01-15T08:03:00Z), from which release r2 (succeeded, image ${D(3)}) stands for model summarizer-v7`,
      );
      expect(rerun.out).not.toMatch(/\bstarted r/);
      expect((await releases(f)).length).toBe(2);

      // The same start sent to the engine by hand (no git there): an older commit time is
      // refused whatever ancestry the caller claims, and so is a check against another commit.
      const start = (source: object) =>
        op(f!.h, "POST", "/v1/releases", { recipe: content(2), source });
      const older = await start({ commit: c2, committed_at: (BASE + 120) * 1000, after: c3 });
      expect(older.status).toBe(409);
      const olderBody = (await older.json()) as { error: { code: string; message: string } };
      expect(olderBody.error.code).toBe("superseded");
      expect(olderBody.error.message).toContain(
        `from which release r2 (succeeded, image ${D(3)}) stands`,
      );
      const stale = await start({
        commit: "9".repeat(40),
        committed_at: (BASE + 600) * 1000,
        after: c1,
      });
      expect(stale.status).toBe(409);
      expect(((await stale.json()) as { error: { message: string } }).error.message).toMatch(
        new RegExp(`checked against commit ${short(c1)}, but the newest is commit ${short(c3)}`),
      );
      expect((await releases(f)).length).toBe(2);
      expect(await f.h.store.getSourceMark("summarizer-v7")).toMatchObject({
        commit: c3,
        release_id: "r2",
      });
    },
    120_000,
  );

  it.skipIf(skip)(
    "a revert to d1 while the fleet runs d2 starts a new release of d1; a revert to what stands starts nothing",
    async () => {
      f = await fixture(kind);
      const c1 = merge(f, 1, svc(1));
      expect((await runAt(f, c1)).code).toBe(0);
      await drive(f.h);
      const c2 = merge(f, 2, svc(2));
      expect((await runAt(f, c2)).code).toBe(0);
      await drive(f.h);
      // main back to d1 while the fleet runs d2: a new release of d1 (r1 had it once).
      const c3 = merge(f, 3, svc(1));
      const revert = await runAt(f, c3);
      expect(revert.code, revert.out).toBe(0);
      expect(revert.out).toMatch(/^started\s+\S+svc\.yaml: started r3/m);
      await drive(f.h);
      expect(await releases(f)).toEqual([
        { id: "r1", state: "succeeded", image: D(1) },
        { id: "r2", state: "succeeded", image: D(2) },
        { id: "r3", state: "succeeded", image: D(1) },
      ]);
      expect((await f.h.store.getRelease("r3"))?.source).toEqual({
        commit: c3,
        committed_at: (BASE + 180) * 1000,
      });
      // A true repeat starts nothing: the same run again, and a later merge of another file.
      const again = await runAt(f, c3);
      expect(again.code, again.out).toBe(0);
      expect(again.out).toMatch(
        /^already_released\s+\S+svc\.yaml: manifest \S+ already has release r3/m,
      );
      const c4 = merge(f, 4, { README: "fleet\n" });
      const later = await runAt(f, c4);
      expect(later.code, later.out).toBe(0);
      expect(later.out).toMatch(/already_released\s+\S+svc\.yaml: .*r3.*now marked at commit/);
      expect((await releases(f)).length).toBe(3);
    },
    120_000,
  );

  it.skipIf(skip)(
    "a revert to what the fleet runs after a rollback starts nothing, and an older re-run after it is superseded",
    async () => {
      f = await fixture(kind);
      const c1 = merge(f, 1, svc(1));
      expect((await runAt(f, c1)).code).toBe(0);
      await drive(f.h);
      // d2 fails its first runner step and rolls back: the fleet runs d1 (r1) again.
      const c2 = merge(f, 2, svc(2));
      expect((await runAt(f, c2)).code).toBe(0);
      await drive(f.h, (p) => (p.step_run_id.endsWith("_f") ? "fail" : "pass"));
      expect((await f.h.store.getRelease("r2"))?.state).toBe("rolled_back");
      // A cancelled run of d2b, between c2 and the revert.
      const c2b = merge(f, 3, svc(4));
      const c3 = merge(f, 4, svc(1));
      const revert = await runAt(f, c3);
      expect(revert.code, revert.out).toBe(0);
      expect(revert.out).toMatch(
        /^already_released\s+\S+svc\.yaml: the fleet runs manifest \S+ already: release r1 \(succeeded\)/m,
      );
      expect((await releases(f)).map((r) => `${r.id}:${r.state}`)).toEqual([
        "r1:succeeded",
        "r2:rolled_back",
      ]);
      expect(await f.h.store.getSourceMark("summarizer-v7")).toMatchObject({
        commit: c3,
        release_id: "r1",
      });
      expect(
        (await f.h.store.getHistory("r1")).filter((e) => e.kind === "source_repeat"),
      ).toMatchObject([{ message: expect.stringContaining(`commit ${short(c3)} `) }]);
      // Nothing started at c3, yet d2b's run re-run later is refused, naming r1 and c3.
      const rerun = await runAt(f, c2b);
      expect(rerun.code, rerun.out).toBe(1);
      expect(rerun.out).toContain(
        `commit ${short(c3)} (committed 2027-01-15T08:04:00Z), from which release r1 (succeeded, image ${D(1)}) stands`,
      );
      expect((await releases(f)).length).toBe(2);
    },
    120_000,
  );

  it.skipIf(skip)(
    "a model with releases from before source marks: its rolled-back recipe still on main is not retried",
    async () => {
      f = await fixture(kind);
      // Started by hand (no source, no mark): r1 d1 succeeded, r2 d2 rolled back.
      for (const [n, decide] of [
        [1, "pass"],
        [2, "fail"],
      ] as const) {
        expect((await op(f.h, "POST", "/v1/releases", content(n))).status).toBe(201);
        await drive(f.h, (p) => (p.step_run_id.endsWith("_f") ? decide : "pass"));
      }
      expect(await f.h.store.getSourceMark("summarizer-v7")).toBeNull();
      const c1 = merge(f, 1, svc(2));
      const run = await runAt(f, c1);
      expect(run.code, run.out).toBe(0);
      expect(run.out).toMatch(
        /^already_released\s+\S+svc\.yaml: manifest \S+ already has release r2 \(rolled_back\)/m,
      );
      expect((await releases(f)).length).toBe(2);
    },
    120_000,
  );
});
