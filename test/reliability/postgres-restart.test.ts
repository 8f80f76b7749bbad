/**
 * Postgres restarted in the middle of a release: the engine on its own throwaway
 * Postgres cluster (scripts/ci/pg-start.sh on a free port, so the shared test server is never
 * touched). While the server is down `/healthz` answers 503 and runner requests get a 5xx the
 * action retries; nothing crashes; once the server is back `/healthz` answers 200 again and the
 * release finishes with each operation key applied once.
 * Needs root and the Debian postgresql package (as CI has); skipped with a message otherwise,
 * unless CI=true.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../engine/src/adapters/store-factory.ts";
import { REPO_ROOT } from "../../engine/src/demo/fleet.ts";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  drive,
  type Harness,
  makeHarness,
  preflightBody,
  preflightUrl,
  recipe,
  signedPost,
} from "../integration/service-harness.ts";
import { onFreshPort, PortTaken, saysPortTaken } from "../support/ports.ts";

const bins = existsSync("/usr/lib/postgresql")
  ? readdirSync("/usr/lib/postgresql").map((v) => `/usr/lib/postgresql/${v}/bin`)
  : [];
const bin = bins.find((b) => existsSync(join(b, "pg_ctl")));
const usable = !!bin && process.getuid?.() === 0;
if (!usable && process.env.CI !== "true") {
  console.warn(
    "[reliability] skipping the Postgres restart test: needs root and the postgresql package",
  );
}

let pgDir = "";
let port = 0;
let url = "";
const pgCtl = (...args: string[]) =>
  execFileSync(
    "runuser",
    ["-u", "postgres", "--", join(bin!, "pg_ctl"), "-D", join(pgDir, "data"), ...args],
    {
      stdio: "ignore",
      timeout: 30_000,
    },
  );

describe.skipIf(!usable && process.env.CI !== "true")("Postgres restarted mid-release", () => {
  let h: Harness;
  const dir = mkdtempSync(join(tmpdir(), "baton-pgr-"));
  beforeAll(async () => {
    const out = await onFreshPort("the throwaway Postgres", async (p) => {
      try {
        const started = execFileSync(
          "bash",
          [join(REPO_ROOT, "scripts/ci/pg-start.sh"), String(p)],
          {
            encoding: "utf8",
            timeout: 60_000,
            stdio: ["ignore", "pipe", "pipe"],
          },
        );
        port = p;
        return started;
      } catch (e) {
        const said = String((e as { stderr?: string }).stderr ?? "");
        if (saysPortTaken(said)) throw new PortTaken(p, said);
        throw e;
      }
    });
    pgDir = /BATON_PG_DIR=(\S+)/.exec(out)![1]!;
    url = /BATON_TEST_DATABASE_URL=(\S+)/.exec(out)![1]!;
    const store = await openStore({ databaseUrl: url, dataDir: dir });
    h = await makeHarness({ dir, store, seed: recipe(2) });
  }, 90_000);
  afterAll(async () => {
    await h?.close(true).catch(() => {});
    if (pgDir)
      execFileSync("bash", [join(REPO_ROOT, "scripts/ci/pg-stop.sh"), pgDir], { stdio: "ignore" });
    rmSync(dir, { recursive: true, force: true });
  });

  it("unhealthy while down, 5xx to runners (retried), healthy again, the release finishes", async () => {
    const id = await createRelease(h, recipe(2));
    for (let i = 0; i < 10 && h.dispatcher.accepted.length === 0; i++) await h.engine.tick();
    const p = h.dispatcher.accepted[0]!;
    const run = { run_id: "4242", run_attempt: 1 };
    expect((await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run))).status).toBe(
      200,
    );

    pgCtl("-m", "fast", "-w", "stop");
    const health = await h.engine.app.request("/healthz");
    expect(health.status).toBe(503);
    // The runner's callback meets the outage: a 5xx (the action retries those), never a crash.
    const cb = await signedPost(h, callbackUrl(p.step_run_id), callbackBody(p.step_run_id, run));
    expect(cb.status).toBeGreaterThanOrEqual(500);
    await h.engine.tick().catch(() => {});

    // Back on its port (the engine's URL names it): another process that bound it while the
    // server was down is waited out, bounded (20 tries, 250 ms apart).
    for (let i = 0; ; i++) {
      try {
        pgCtl(
          "-w",
          "-l",
          join(pgDir, "server.log"),
          "start",
          "-o",
          `-p ${port} -c listen_addresses=127.0.0.1 -k ${pgDir} -c fsync=off`,
        );
        break;
      } catch (e) {
        const log = readFileSync(join(pgDir, "server.log"), "utf8").slice(-2_000);
        if (i >= 20 || !saysPortTaken(log)) throw e;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    let healthy = 0;
    for (let i = 0; i < 40 && healthy !== 200; i++) {
      healthy = (await h.engine.app.request("/healthz")).status;
      if (healthy !== 200) await new Promise((r) => setTimeout(r, 250));
    }
    expect(healthy).toBe(200);
    // The action's retry of the same callback now lands.
    const again = await signedPost(h, callbackUrl(p.step_run_id), callbackBody(p.step_run_id, run));
    expect(again.status).toBe(200);
    await drive(h);
    const rel = (await h.store.getRelease(id))!;
    expect(rel.state).toBe("succeeded");
    for (const [key, n] of Object.entries(h.cp.applicationCounts())) expect(n, key).toBe(1);
  }, 120_000);
});
