/**
 * Ctrl-C during `npm run demo` (not --serve): the demo says where the release was left, runs
 * the same cleanup as a normal end (the stand-in health servers stopped, its temporary folder
 * with the signing key removed) and exits 130. Asserted on the machine: the folder, the health
 * servers' processes (PIDs read from the stand-in's state before the signal) and the demo's
 * own process group. Also: the demo's engine observes drift (its /metrics has baton_drift_*).
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../engine/src/demo/fleet.ts";

/** True while a process (or, with a negative id, a process group) exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Polls `cond` every 100 ms, at most `ms`; resolves with its last value. */
async function within(ms: number, cond: () => boolean): Promise<boolean> {
  for (let i = 0; i < ms / 100; i++) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return cond();
}

describe("npm run demo interrupted", () => {
  it("SIGINT during the release (drift detection on): one line, health servers stopped, temp folder removed, exit 130", async () => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(REPO_ROOT, "engine/src/cli/main.ts"), "demo"],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, NO_COLOR: "1" },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true, // its own process group, checked empty at the end
      },
    );
    const pgid = child.pid!;
    let out = "";
    const exited = new Promise<{ code: number | null; signal: string | null }>((ok) =>
      child.on("exit", (code, signal) => ok({ code, signal })),
    );
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      out += d.toString();
    });
    try {
      // The release has started once the first step line is printed.
      const started = await within(300_000, () => /^\s+\d+\s+\S+\s+fwd\s+attempt \d+/m.test(out));
      expect(started, out).toBe(true);
      const dir = /\[demo\] data dir\s+(\S+) \(temporary/.exec(out)?.[1] ?? "";
      expect(dir, out).toMatch(/baton-demo-/);
      expect(existsSync(join(dir, "trust"))).toBe(true);
      const serversDir = join(dir, "target/standin/servers");
      const servers = readdirSync(serversDir)
        .filter((f) => f.endsWith(".pid"))
        .map((f) => Number(readFileSync(join(serversDir, f), "utf8").trim()));
      // One health server per lane, each alive (the previous image answers on every lane).
      expect(servers.length).toBeGreaterThan(0);
      for (const pid of servers) expect(alive(pid)).toBe(true);

      // Drift detection is on in the demo (every 5 s): the engine's /metrics has its series.
      const url = /\[demo\] engine\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
      const token = /with the operator token (\S+)/.exec(out)?.[1];
      const metrics = await fetch(`${url}/metrics`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(/^baton_drift_observation_interval_seconds 5$/m);

      process.kill(pgid, "SIGINT");
      const done = await Promise.race([
        exited,
        new Promise<null>((r) => setTimeout(() => r(null), 120_000)),
      ]);
      expect(done, out).toEqual({ code: 130, signal: null });
      expect(out).toMatch(/\[demo\] interrupted: release r1 left \w+; cleaning up/);
      expect(existsSync(dir)).toBe(false);
      expect(await within(10_000, () => servers.every((pid) => !alive(pid)))).toBe(true);
      expect(await within(10_000, () => !alive(-pgid))).toBe(true);
    } finally {
      if (alive(-pgid)) process.kill(-pgid, "SIGKILL");
    }
  }, 600_000);
});
