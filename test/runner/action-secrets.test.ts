// What the tool subprocess may see, and what an orphaned action leaves behind.
// (1) The tool runs with none of the action's inputs in its environment: no INPUT_CALLBACK-SECRET,
//     no INPUT_SSH-KEY (it gets the key as a 0600 file, the passphrase as BATON_SSH_PASSPHRASE).
// (2) The engine that ran the action (local runner) is killed while the tool runs: the action,
//     orphaned with a dead pipe as its stdout, still finishes, reports, and removes the key.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callbacksOf, type Fixture, startFixture } from "../support/action-fixture.ts";
import { ACTION_MAIN, prepareJob } from "../support/run-action.ts";

let f: Fixture;
beforeAll(async () => {
  f = await startFixture();
});
afterAll(async () => {
  await f?.close();
});

/** A tool (sh) that dumps its environment, optionally prints for a while, then passes. */
const TOOL = `#!/bin/sh
env > "$BATON_TEST_DUMP"
while [ $# -gt 0 ]; do case "$1" in --result-dir) d="$2" ;; esac; shift 2; done
: > "$BATON_TEST_DUMP.started"
i=0
while [ "$i" -lt "\${BATON_TEST_PRINT_S:-0}0" ]; do echo "tool output line $i"; sleep 0.1; i=$((i + 1)); done
echo '[{"name":"env","status":"ok"}]' > "$d/checks.json"
echo succeeded > "$d/status"
echo pass > "$d/overall"
`;

describe("the tool subprocess", () => {
  it("inherits no action input and no secret value", async () => {
    const ws = f.workspaceWithTool(TOOL);
    const dump = join(f.runnerTemp, `env-${Date.now()}`);
    const { payload } = await f.stepRun();
    const r = await f.run(payload, {
      workspace: ws,
      env: { BATON_TEST_DUMP: dump },
      inputs: {
        "engine-url": f.engine.url,
        "callback-secret": f.engine.secret,
        "ssh-key": f.sshd.clientKey,
        "ssh-passphrase": "not-a-real-passphrase-123",
        allowlist: "allowlist.json",
      },
    });
    expect(r.main.code, r.main.stdout + r.main.stderr).toBe(0);
    const env = readFileSync(dump, "utf8");
    expect(env).toMatch(/^BATON_RELEASE_ID=/m); // the dump is the tool's real environment
    expect(env).not.toMatch(/^INPUT_/im);
    expect(env).not.toContain(f.engine.secret);
    const keyLine = f.sshd.clientKey.split("\n")[1] as string;
    expect(env).not.toContain(keyLine);
    // The passphrase is the one input the tool needs, under its documented name.
    expect(env).toMatch(/^BATON_SSH_PASSPHRASE=not-a-real-passphrase-123$/m);
  });
});

describe("engine killed during a runner step (local runner)", () => {
  it("the orphaned action finishes, reports and leaves no SSH key on disk", async () => {
    const ws = f.workspaceWithTool(TOOL);
    const dump = join(f.runnerTemp, `env-orphan-${Date.now()}`);
    const { payload } = await f.stepRun();
    const { base } = prepareJob({
      runnerTemp: f.runnerTemp,
      eventName: "repository_dispatch",
      event: { action: "release-step", client_payload: payload },
      inputs: {
        "engine-url": f.engine.url,
        "callback-secret": f.engine.secret,
        "ssh-key": f.sshd.clientKey,
        allowlist: "allowlist.json",
      },
      workspace: ws,
      env: { BATON_TEST_DUMP: dump, BATON_TEST_PRINT_S: "3" },
    });
    // A stand-in for the engine's local runner: starts the action as startStep does (own
    // process group, stdout/stderr piped to itself), prints the action's pid, reads its output.
    const engine = spawn(
      process.execPath,
      [
        "-e",
        `const c = require("node:child_process").spawn(process.execPath, [process.argv[1]], { env: process.env, stdio: ["ignore", "pipe", "pipe"], detached: true });
         c.stdout.on("data", () => {}); c.stderr.on("data", () => {});
         console.log("pid " + c.pid);`,
        ACTION_MAIN,
      ],
      { env: base, stdio: ["ignore", "pipe", "inherit"] },
    );
    const actionPid = await new Promise<number>((resolve, reject) => {
      let out = "";
      engine.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        const m = /pid (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      engine.once("exit", () => reject(new Error("engine stand-in exited early")));
    });
    // Kill the "engine" once the tool runs (the key is on disk by then).
    for (let i = 0; i < 600 && !existsSync(`${dump}.started`); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(existsSync(`${dump}.started`)).toBe(true);
    expect(f.keyDirs().length).toBe(1);
    engine.kill("SIGKILL");
    // Wait (bounded) for the orphaned action to end.
    const alive = () => {
      try {
        process.kill(actionPid, 0);
        return true;
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 600 && alive(); i++) await new Promise((r) => setTimeout(r, 100));
    expect(alive()).toBe(false);
    expect(f.keyDirs()).toEqual([]);
    expect(readdirSync(f.runnerTemp).filter((n) => n.startsWith("baton-key-"))).toEqual([]);
    // It also did its job: the engine got the tool's result.
    const cbs = callbacksOf(f.engine, payload.step_run_id);
    expect(cbs.at(-1)?.status).toBe(200);
    expect(cbs.at(-1)?.body).toMatchObject({ overall: "pass" });
  }, 120_000);
});

describe("annotations", () => {
  it("a payload with many problems gives at most 10 error annotations; the rest are in the log", async () => {
    const bad = {
      v: 2,
      step_run_id: "nope nope",
      tool: 5,
      args: {
        lane: { id: "UPPER CASE", host: "", port: 0, user: 1, host_key: 2, health_url: 3 },
        image: 4,
        previous_image: 5,
      },
      callback_url: "ftp://x",
      release: { id: 1, generation: "x", manifest_digest: 2, dispatch: "y", operation_key: 3 },
      extra1: 1,
      extra2: 2,
      extra3: 3,
    };
    const r = await f.run(bad);
    const errors = r.main.stdout.split("\n").filter((l) => l.startsWith("::error"));
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.length).toBeLessThanOrEqual(10);
    if (/^\[error\] /m.test(r.main.stdout))
      expect(r.main.stdout).toMatch(/more error\(s\) are in the step log/);
    // The number of problems was over the cap, or this test proves nothing.
    expect(r.main.stdout.match(/^(::error|\[error\] )/gm)?.length ?? 0).toBeGreaterThan(10);
  });
});
