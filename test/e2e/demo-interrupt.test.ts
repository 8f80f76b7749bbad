/**
 * Ctrl-C during `npm run demo` (not --serve): the demo says where the release was left, runs
 * the same cleanup as a normal end (the stand-in health servers stopped, its temporary folder
 * with the signing key removed) and exits 130. Asserted on the machine: the folder, the health
 * servers' processes (PIDs read from the stand-in's state before the signal) and the demo's
 * own process group. Also: the demo's engine observes drift (its /metrics has baton_drift_*).
 * And SIGTERM to the whole process group of `npm run demo -- --serve` (as npm, systemd or docker
 * send it) while serving: the same cleanup, with its line, and nothing of the group left.
 * And a demo stopped mid-release on a kept --data-dir: the next run on it follows the release
 * the engine resumes instead of being refused for the lanes that release still owns.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { alive, spawnDemo, within } from "../support/demo-process.ts";

describe("npm run demo interrupted", () => {
  it("SIGINT during the release (drift detection on): one line, health servers stopped, temp folder removed, exit 130", async () => {
    const demo = await spawnDemo([]);
    const { pgid } = demo;
    try {
      const started = await demo.started(300_000);
      expect(started, demo.output()).toBe(true);
      const dir = /\[demo\] data dir\s+(\S+) \(temporary/.exec(demo.output())?.[1] ?? "";
      expect(dir, demo.output()).toMatch(/baton-demo-/);
      expect(existsSync(join(dir, "trust"))).toBe(true);
      const serversDir = join(dir, "target/standin/servers");
      const servers = readdirSync(serversDir)
        .filter((f) => f.endsWith(".pid"))
        .map((f) => Number(readFileSync(join(serversDir, f), "utf8").trim()));
      // One health server per lane, each alive (the previous image answers on every lane).
      expect(servers.length).toBeGreaterThan(0);
      for (const pid of servers) expect(alive(pid)).toBe(true);

      // Drift detection is on in the demo (every 5 s): the engine's /metrics has its series.
      const { url, token } = demo.engine();
      const metrics = await fetch(`${url}/metrics`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(/^baton_drift_observation_interval_seconds 5$/m);

      process.kill(pgid, "SIGINT");
      const done = await demo.exit(120_000);
      expect(done, demo.output()).toEqual({ code: 130, signal: null });
      expect(demo.output()).toMatch(/\[demo\] interrupted: release r1 left \w+; cleaning up/);
      expect(existsSync(dir)).toBe(false);
      expect(await within(10_000, () => servers.every((pid) => !alive(pid)), 100)).toBe(true);
      expect(await within(10_000, () => !alive(-pgid), 100)).toBe(true);
    } finally {
      demo.kill();
    }
  }, 600_000);

  it("SIGTERM to the group of `npm run demo -- --serve` while serving: shutdown line, health servers stopped, temp folder removed, group empty", async () => {
    const demo = await spawnDemo(["--serve"], { npm: true });
    const { pgid } = demo;
    try {
      const serving = await within(300_000, () => /serving until Ctrl-C/.test(demo.output()));
      expect(serving, demo.output()).toBe(true);
      const dir = /\[demo\] data dir\s+(\S+) \(temporary/.exec(demo.output())?.[1] ?? "";
      expect(dir, demo.output()).toMatch(/baton-demo-/);
      const serversDir = join(dir, "target/standin/servers");
      const servers = readdirSync(serversDir)
        .filter((f) => f.endsWith(".pid"))
        .map((f) => Number(readFileSync(join(serversDir, f), "utf8").trim()));
      expect(servers.length).toBeGreaterThan(0);
      for (const pid of servers) expect(alive(pid)).toBe(true);
      // The engine answers before the signal (it is what the cleanup stops).
      const { url } = demo.engine();
      expect((await fetch(`${url}/healthz`)).status).toBe(200);

      process.kill(-pgid, "SIGTERM");
      // Every process of the group (npm, its shell, the demo) ends, after the cleanup.
      expect(await within(120_000, () => !alive(-pgid), 100), demo.output()).toBe(true);
      expect(demo.output()).toMatch(
        /\[demo\] SIGTERM: stopping the engine and the stand-in; cleaning up/,
      );
      expect(existsSync(dir)).toBe(false);
      expect(await within(10_000, () => servers.every((pid) => !alive(pid)), 100)).toBe(true);
      expect(
        await fetch(`${url}/healthz`).then(
          () => "up",
          () => "down",
        ),
      ).toBe("down");
    } finally {
      demo.kill();
    }
  }, 600_000);

  it("a demo stopped mid-release on a kept --data-dir: the next run follows that release instead of being refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-demo-kept-"));
    try {
      const first = await spawnDemo(["--data-dir", dir]);
      try {
        expect(await first.started(300_000), first.output()).toBe(true);
        process.kill(first.pgid, "SIGINT");
        expect(await first.exit(120_000), first.output()).toEqual({ code: 130, signal: null });
      } finally {
        first.kill();
      }
      expect(first.output()).toMatch(/\[demo\] interrupted: release r1 left \w+/);
      const second = await spawnDemo(["--data-dir", dir]);
      try {
        const resumed = await within(
          240_000,
          () => /\[demo\] release r1 is running/.test(second.output()),
          200,
        );
        expect(resumed, second.output()).toBe(true);
        process.kill(second.pgid, "SIGINT");
        expect(await second.exit(120_000), second.output()).toEqual({ code: 130, signal: null });
      } finally {
        second.kill();
      }
      expect(second.output()).toMatch(/\[demo\] resuming {7}release r1 of an earlier run/);
      expect(second.output()).not.toMatch(/refused the recipe/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
