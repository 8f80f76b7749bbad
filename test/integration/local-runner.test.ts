/**
 * The local runner: runs an action directory exactly as a GitHub runner would (event file,
 * environment, file commands, main then post step), in the background, with re-runs as new
 * attempts of the same run id. A small action written here stands in until the real bundle
 * (actions/release-step/dist) is present; then the last suite runs the real bundle too.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  LocalRunner,
  localRunnerForEmbeddedTarget,
  MaskingLineWriter,
  MaskSet,
  parseCommandFile,
  type RunnerContext,
  repositoryDispatchEvent,
  runnerEnv,
  stateToEnv,
} from "../../engine/src/adapters/local-runner/index.ts";
import { startHealthServer } from "../../engine/src/demo/fleet.ts";
import { generateEd25519, startEmbeddedTarget } from "../../engine/src/embedded-target/index.ts";
import { verifyBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { TEST_ALLOWLIST } from "../support/run-action.ts";

const REPO = resolve(import.meta.dirname, "../..");
const SECRET = "cb-secret-for-tests-123";
const SSH_KEY =
  "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n";

// --- a minimal engine: records signed preflights and callbacks ------------------------------

interface Received {
  kind: "preflight" | "callback";
  stepRunId: string;
  body: Record<string, unknown>;
}

async function startEngineStandin(): Promise<{
  url: string;
  received: Received[];
  close(): Promise<void>;
}> {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const m = /^\/v1\/releases\/step-runs\/([^/]+)\/(preflight|callback)$/.exec(req.url ?? "");
      const sig = req.headers["x-baton-signature"] as string | undefined;
      const ts = req.headers["x-baton-timestamp"] as string | undefined;
      if (!m) return void res.writeHead(404).end();
      if (!verifyBody([SECRET], raw, sig, ts).ok) return void res.writeHead(401).end();
      const body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
      received.push({ kind: m[2] as Received["kind"], stepRunId: m[1]!, body });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify(
          m[2] === "preflight"
            ? {
                proceed: true,
                step_run_id: m[1],
                attempt: body.run_attempt,
                release_id: body.release_id,
                generation: body.generation,
              }
            : { ok: true },
        ),
      );
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}

// --- a tiny action that follows the step protocol (main + post) -----------------------------

const FAKE_MAIN = `
import fs from "node:fs";
import crypto from "node:crypto";
const env = process.env;
const event = JSON.parse(fs.readFileSync(env.GITHUB_EVENT_PATH, "utf8"));
const p = event.client_payload;
fs.writeFileSync(env.RUNNER_TEMP + "/seen-env.json", JSON.stringify(env));
const secret = env["INPUT_CALLBACK-SECRET"];
console.log("::add-mask::" + "runtime-secret-value");
console.log("the secret is " + secret + " and runtime-secret-value");
function sign(body) {
  const ts = String(Math.floor(Date.now() / 1000));
  const mac = crypto.createHmac("sha256", secret).update(ts + ".").update(body).digest("hex");
  return { "content-type": "application/json", "x-baton-signature": "sha256=" + mac, "x-baton-timestamp": ts };
}
async function post(url, obj) {
  const body = JSON.stringify(obj);
  const r = await fetch(url, { method: "POST", body, headers: sign(body) });
  return r.status;
}
const gate = p.args.gate;
for (let i = 0; gate && !fs.existsSync(gate) && i < 400; i++) await new Promise((r) => setTimeout(r, 25));
if (p.args.sleep_ms) await new Promise((r) => setTimeout(r, p.args.sleep_ms));
const run = { run_id: env.GITHUB_RUN_ID, run_attempt: Number(env.GITHUB_RUN_ATTEMPT) };
const pre = await post(env["INPUT_ENGINE-URL"] + "/v1/releases/step-runs/" + p.step_run_id + "/preflight", {
  step_run_id: p.step_run_id, release_id: p.release.id, generation: p.release.generation,
  manifest_digest: p.release.manifest_digest, dispatch: p.release.dispatch, ...run, sha: env.GITHUB_SHA, tool: p.tool });
fs.appendFileSync(env.GITHUB_STATE, "callback_sent<<ghadelimiter_1\\nyes\\nmultiline\\nghadelimiter_1\\n");
fs.appendFileSync(env.GITHUB_STATE, "key_path=" + env.RUNNER_TEMP + "/key\\n");
fs.appendFileSync(env.GITHUB_ENV, "FROM_MAIN=exported\\n");
fs.appendFileSync(env.GITHUB_PATH, "/opt/added-by-main\\n");
fs.appendFileSync(env.GITHUB_OUTPUT, "status=succeeded\\noverall=pass\\nstep-run-id=" + p.step_run_id + "\\n");
fs.appendFileSync(env.GITHUB_STEP_SUMMARY, "| check | status |\\n");
await post(p.callback_url, { step_run_id: p.step_run_id, ...run, status: "succeeded", overall: "pass", checks: [], log: "" });
console.error("preflight answered " + pre);
process.exit(p.args.exit_code ?? 0);
`;

const FAKE_POST = `
import fs from "node:fs";
const state = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("STATE_")));
state.FROM_MAIN = process.env.FROM_MAIN;
state.PATH_FIRST = process.env.PATH.split(":")[0];
fs.writeFileSync(process.env.RUNNER_TEMP + "/post-state.json", JSON.stringify(state));
console.log("post ran");
`;

const ACTION_YML = `name: fake release-step
inputs:
  engine-url: { required: true }
  callback-secret: { required: true }
  ssh-key: { required: true }
  allowlist: { required: false, default: scripts/release/allowlist.json }
runs:
  using: node24
  main: dist/index.js
  post: dist/post.js
`;

let dir: string;
let actionDir: string;
let engine: Awaited<ReturnType<typeof startEngineStandin>>;
let runner: LocalRunner | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "baton-local-runner-"));
  actionDir = join(dir, "action");
  mkdirSync(join(actionDir, "dist"), { recursive: true });
  writeFileSync(join(actionDir, "action.yml"), ACTION_YML);
  writeFileSync(join(actionDir, "dist/index.js"), FAKE_MAIN);
  writeFileSync(join(actionDir, "dist/post.js"), FAKE_POST);
  writeFileSync(join(actionDir, "package.json"), '{"type":"module"}');
  engine = await startEngineStandin();
});
afterAll(async () => {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await runner?.close();
  runner = undefined;
  engine.received.length = 0;
});

function payload(stepRunId: string, args: Record<string, unknown> = {}): DispatchPayload {
  return {
    v: 1,
    step_run_id: stepRunId,
    tool: "noop",
    args,
    callback_url: `${engine.url}/v1/releases/step-runs/${stepRunId}/callback`,
    release: {
      id: "r5",
      generation: 2,
      manifest_digest: "c".repeat(64),
      dispatch: 1,
      operation_key: `r5:${stepRunId}`,
    },
  };
}

function makeRunner(
  extra: Partial<ConstructorParameters<typeof LocalRunner>[0]> = {},
): LocalRunner {
  runner = new LocalRunner({
    repoRoot: REPO,
    actionDir,
    workDir: mkdtempSync(join(dir, "work-")),
    inputs: { "engine-url": engine.url, "callback-secret": SECRET, "ssh-key": SSH_KEY },
    repository: "acme/models",
    ...extra,
  });
  return runner;
}

describe("runner environment and event file", () => {
  const ctx: RunnerContext = {
    repository: "acme/models",
    workspace: "/repo",
    runId: "1234",
    runAttempt: 2,
    runNumber: 7,
    sha: "a".repeat(40),
    eventPath: "/t/event.json",
    runnerTemp: "/t/temp",
    outputFile: "/t/out",
    summaryFile: "/t/sum",
    stateFile: "/t/state",
    envFile: "/t/env",
    pathFile: "/t/path",
    home: "/t/home",
  };

  it("sets what a runner sets for repository_dispatch, with inputs' hyphens kept", () => {
    const env = runnerEnv(ctx, { "ssh-key": "K", "engine-url": "http://e" }, { PATH: "/bin" });
    expect(env).toMatchObject({
      GITHUB_EVENT_NAME: "repository_dispatch",
      GITHUB_EVENT_PATH: "/t/event.json",
      GITHUB_RUN_ID: "1234",
      GITHUB_RUN_ATTEMPT: "2",
      GITHUB_SHA: "a".repeat(40),
      GITHUB_REPOSITORY: "acme/models",
      GITHUB_WORKSPACE: "/repo",
      RUNNER_TEMP: "/t/temp",
      GITHUB_OUTPUT: "/t/out",
      GITHUB_STEP_SUMMARY: "/t/sum",
      GITHUB_STATE: "/t/state",
      GITHUB_ACTIONS: "true",
      "INPUT_SSH-KEY": "K",
      "INPUT_ENGINE-URL": "http://e",
      PATH: "/bin",
    });
    expect(env).not.toHaveProperty("INPUT_SSH_KEY");
  });

  it("writes the event as repository_dispatch action release-step with the client payload", () => {
    const p = payload("sr_5_1_f");
    const ev = repositoryDispatchEvent(p, "acme/models");
    expect(ev).toMatchObject({
      action: "release-step",
      client_payload: p,
      repository: { full_name: "acme/models" },
    });
  });

  it("parses file commands in both forms and maps saved state to STATE_*", () => {
    const parsed = parseCommandFile("a=1\nb<<EOF_X\nline1\nline2\nEOF_X\na=2\n");
    expect(parsed).toEqual({ a: "2", b: "line1\nline2" });
    expect(stateToEnv(parsed)).toEqual({ STATE_a: "2", STATE_b: "line1\nline2" });
    expect(() => parseCommandFile("b<<EOF\nno end\n")).toThrow(/not closed by EOF/);
  });

  it("masks registered secrets and each line of a multi-line key", () => {
    const masks = new MaskSet();
    masks.add(SSH_KEY);
    const lines: string[] = [];
    const w = new MaskingLineWriter(masks, (l) => lines.push(l), true);
    w.write(
      "::add-mask::hunter2hunter2\nkey line b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ here\npass hunter2hunter2",
    );
    w.end();
    expect(lines).toEqual(["key line *** here\n", "pass ***\n"]);
  });
});

describe("local runner with a protocol-following action", () => {
  it("answers at once (queued), then runs main and post in the background", async () => {
    const r = makeRunner();
    const gate = join(dir, "gate-1");
    expect(await r.dispatch(payload("sr_5_1_f", { gate }))).toEqual({ ok: true });
    // The dispatch resolved while the run is held at its gate: nothing reached the engine yet.
    expect(r.list()[0]?.state).not.toBe("completed");
    expect(engine.received).toHaveLength(0);
    writeFileSync(gate, "");
    await r.idle();
    const run = r.list()[0]!;
    expect(run).toMatchObject({
      state: "completed",
      conclusion: "success",
      attempt: 1,
      stepRunId: "sr_5_1_f",
    });
    expect(run.runId).toMatch(/^[0-9]{1,20}$/);
    expect(run.outputs).toEqual({
      status: "succeeded",
      overall: "pass",
      "step-run-id": "sr_5_1_f",
    });
    expect(engine.received.map((x) => [x.kind, x.body.run_id, x.body.run_attempt])).toEqual([
      ["preflight", run.runId, 1],
      ["callback", run.runId, 1],
    ]);
    expect(engine.received[0]!.body.sha).toBe(r.commitSha);
    const temp = join(run.dir, "temp");
    const post = JSON.parse(readFileSync(join(temp, "post-state.json"), "utf8"));
    expect(post).toEqual({
      STATE_callback_sent: "yes\nmultiline",
      STATE_key_path: `${temp}/key`,
      FROM_MAIN: "exported",
      PATH_FIRST: "/opt/added-by-main",
    });
    const seen = JSON.parse(readFileSync(join(temp, "seen-env.json"), "utf8")) as Record<
      string,
      string
    >;
    expect(seen["INPUT_SSH-KEY"]).toBe(SSH_KEY);
    expect(seen.INPUT_ALLOWLIST).toBe("scripts/release/allowlist.json"); // action.yml default
    expect(seen.GITHUB_WORKSPACE).toBe(REPO);
    expect(readFileSync(run.summaryFile, "utf8")).toContain("| check | status |");
    const log = readFileSync(run.logFile, "utf8");
    expect(log).toContain("the secret is *** and ***");
    expect(log).not.toContain(SECRET);
    expect(log).toContain("post ran");
  });

  it("passes none of the engine's own environment to the action", async () => {
    process.env.BATON_CALLBACK_SECRETS = "engine-only-secret";
    try {
      const r = makeRunner();
      await r.dispatch(payload("sr_5_2_f"));
      await r.idle();
      const seen = JSON.parse(readFileSync(join(r.list()[0]!.dir, "temp/seen-env.json"), "utf8"));
      expect(seen).not.toHaveProperty("BATON_CALLBACK_SECRETS");
    } finally {
      delete process.env.BATON_CALLBACK_SECRETS;
    }
  });

  it("gives each dispatch its own run id; a re-run is attempt 2 of the same run id", async () => {
    const r = makeRunner();
    await r.dispatch(payload("sr_5_3_f", { exit_code: 1 }));
    await r.dispatch(payload("sr_5_4_f"));
    await r.idle();
    const [first, second] = r.list();
    expect(first!.runId).not.toBe(second!.runId);
    expect(first!.conclusion).toBe("failure");
    expect(r.rerun(first!.runId)).toEqual({ runId: first!.runId, attempt: 2 });
    await r.idle();
    const attempts = r.runsOf("sr_5_3_f");
    expect(attempts.map((a) => [a.runId, a.attempt])).toEqual([
      [first!.runId, 1],
      [first!.runId, 2],
    ]);
    expect(attempts[1]!.dir).not.toBe(attempts[0]!.dir);
    const pre = engine.received.filter((x) => x.kind === "preflight" && x.stepRunId === "sr_5_3_f");
    expect(pre.map((x) => [x.body.run_id, x.body.run_attempt])).toEqual([
      [first!.runId, 1],
      [first!.runId, 2],
    ]);
  });

  it("runs at most maxConcurrentRuns at once; the rest wait queued", async () => {
    const r = makeRunner({ maxConcurrentRuns: 1 });
    const gate = join(dir, "gate-4");
    await r.dispatch(payload("sr_5_13_f", { gate }));
    await r.dispatch(payload("sr_5_14_f"));
    const [first, second] = r.list();
    for (let i = 0; i < 200 && first!.state !== "running"; i++)
      await new Promise((ok) => setTimeout(ok, 10));
    expect(first!.state).toBe("running");
    expect(second!.state).toBe("queued");
    writeFileSync(gate, "");
    await r.idle();
    expect([first!.conclusion, second!.conclusion]).toEqual(["success", "success"]);
    expect(second!.startedAt!).toBeGreaterThanOrEqual(first!.finishedAt!);
  });

  it("refuses to re-run an unknown run or one still running", async () => {
    const r = makeRunner();
    expect(() => r.rerun("42")).toThrow(/\[local-runner\] no run 42/);
    const gate = join(dir, "gate-2");
    await r.dispatch(payload("sr_5_5_f", { gate }));
    expect(() => r.rerun(r.list()[0]!.runId)).toThrow(/still (queued|running)/);
    writeFileSync(gate, "");
    await r.idle();
  });

  it("can accept a dispatch that never runs (no preflight ever arrives)", async () => {
    const r = makeRunner();
    r.acceptButNeverRun((p) => p.step_run_id === "sr_5_6_f");
    expect(await r.dispatch(payload("sr_5_6_f"))).toEqual({ ok: true });
    expect(await r.dispatch(payload("sr_5_7_f"))).toEqual({ ok: true });
    await r.idle();
    expect(r.runsOf("sr_5_6_f").map((x) => x.state)).toEqual(["never_ran"]);
    expect(engine.received.map((x) => x.stepRunId)).toEqual(["sr_5_7_f", "sr_5_7_f"]);
    expect(() => r.rerun(r.runsOf("sr_5_6_f")[0]!.runId)).toThrow(/never started/);
  });

  it("can deliver one dispatch twice, as two runs with different run ids", async () => {
    const r = makeRunner();
    r.deliverTwice();
    await r.dispatch(payload("sr_5_8_f"));
    await r.idle();
    const ids = r.runsOf("sr_5_8_f").map((x) => x.runId);
    expect(new Set(ids).size).toBe(2);
    expect(
      engine.received
        .filter((x) => x.kind === "preflight")
        .map((x) => x.body.run_id)
        .sort(),
    ).toEqual([...ids].sort());
  });

  it("bounds a run in time: a main step past its bound is killed, and post still runs", async () => {
    const r = makeRunner({ runTimeoutMs: 300 });
    await r.dispatch(payload("sr_5_9_f", { sleep_ms: 30_000 }));
    await r.idle();
    const run = r.list()[0]!;
    expect(run.conclusion).toBe("timed_out");
    expect(run.main?.timedOut).toBe(true);
    expect(run.post?.code).toBe(0);
    expect(engine.received).toHaveLength(0);
  });

  it("cancels a running attempt; its post step still runs", async () => {
    const r = makeRunner();
    const gate = join(dir, "gate-3");
    await r.dispatch(payload("sr_5_10_f", { gate }));
    const run = r.list()[0]!;
    // Wait (bounded) until the main step is running, then cancel it.
    for (let i = 0; i < 200 && run.state !== "running"; i++)
      await new Promise((ok) => setTimeout(ok, 10));
    expect(r.cancel(run.runId)).toBe(true);
    await r.idle();
    expect(run.conclusion).toBe("cancelled");
    expect(run.post?.code).toBe(0);
  });

  it("fails a run, saying how to fix it, when the action bundle is missing", async () => {
    const empty = join(dir, "no-bundle");
    mkdirSync(empty, { recursive: true });
    const r = makeRunner({ actionDir: empty });
    expect(await r.dispatch(payload("sr_5_12_f"))).toEqual({ ok: true });
    await r.idle();
    const run = r.list()[0]!;
    expect(run.conclusion).toBe("failure");
    expect(readFileSync(run.logFile, "utf8")).toContain(
      "is missing; build the bundle with npm run build",
    );
    expect(engine.received).toHaveLength(0);
  });

  it("refuses like GitHub (422) a payload over the limits or off the schema", async () => {
    const r = makeRunner();
    const big = await r.dispatch(payload("sr_5_11_f", { blob: "x".repeat(70 * 1024) }));
    expect(big).toMatchObject({ ok: false, retryable: false, status: 422 });
    if (!big.ok) expect(big.message).toContain("client_payload is too large");
    const bad = await r.dispatch({ ...payload("sr_5_11_f"), tool: "Bad Tool" });
    expect(bad).toMatchObject({ ok: false, retryable: false, status: 422 });
    if (!bad.ok) expect(bad.message).toContain("client_payload.tool");
    expect(r.list()).toHaveLength(0);
  });
});

const BUNDLE = join(REPO, "actions/release-step/dist/index.js");
describe.skipIf(!existsSync(BUNDLE) && process.env.CI !== "true")(
  "local runner with the real action bundle",
  () => {
    it("runs the noop tool: preflight and callback arrive with the run id and attempt; re-run is attempt 2", async () => {
      expect(existsSync(BUNDLE), `${BUNDLE} is missing; build the action (npm run build)`).toBe(
        true,
      );
      const key = generateEd25519("runner-test");
      const r = makeRunner({
        actionDir: join(REPO, "actions/release-step"),
        inputs: {
          "engine-url": engine.url,
          "callback-secret": SECRET,
          "ssh-key": key.privateKey,
          allowlist: TEST_ALLOWLIST,
        },
        runTimeoutMs: 60_000,
      });
      expect(await r.dispatch(payload("sr_5_20_f", { lane: { id: "lane-a" } }))).toEqual({
        ok: true,
      });
      await r.idle();
      const first = r.list()[0]!;
      const log1 = readFileSync(first.logFile, "utf8");
      expect(first.conclusion, log1).toBe("success");
      expect(first.outputs).toMatchObject({
        status: "succeeded",
        overall: "pass",
        "step-run-id": "sr_5_20_f",
      });
      expect(engine.received.map((x) => [x.kind, x.body.run_id, x.body.run_attempt])).toEqual([
        ["preflight", first.runId, 1],
        ["callback", first.runId, 1],
      ]);
      const cb = engine.received[1]!.body;
      expect(cb).toMatchObject({ step_run_id: "sr_5_20_f", status: "succeeded", overall: "pass" });
      expect(cb.checks).toEqual([expect.objectContaining({ name: "noop" })]);
      // The key never reaches the log, and the post step removed it.
      for (const line of key.privateKey
        .split("\n")
        .filter((l) => l.length > 20 && !l.startsWith("-----"))) {
        expect(log1).not.toContain(line);
      }
      expect(first.post?.code).toBe(0);

      expect(r.rerun(first.runId).attempt).toBe(2);
      await r.idle();
      const second = r.runsOf("sr_5_20_f")[1]!;
      expect(second.conclusion, readFileSync(second.logFile, "utf8")).toBe("success");
      expect(
        engine.received.slice(2).map((x) => [x.kind, x.body.run_id, x.body.run_attempt]),
      ).toEqual([
        ["preflight", first.runId, 2],
        ["callback", first.runId, 2],
      ]);
    });

    it("runs attach-queue-lane over SSH to the embedded target: deploy.sh phases pass", async () => {
      const target = await startEmbeddedTarget({
        sandboxDir: join(dir, "lane-a"),
        env: { BATON_HEALTH_INTERVAL_S: "0.2", BATON_STANDIN_SERVER_MAX_S: "120" },
      });
      try {
        // The lane's health port, held by the target's health server from now on.
        const health = startHealthServer(target.standinDir);
        const healthPort = await health.hold();
        health.release();
        const image = `reg.example/acme/model@sha256:${"d".repeat(64)}`;
        const r = localRunnerForEmbeddedTarget({
          repoRoot: REPO,
          workDir: mkdtempSync(join(dir, "work-")),
          engineUrl: engine.url,
          callbackSecret: SECRET,
          target,
          runTimeoutMs: 90_000,
        });
        runner = r;
        const args = {
          lane: {
            id: "lane-a",
            host: target.host,
            port: target.port,
            user: target.user,
            host_key: target.hostKeyPin,
            queue: "q-a",
            health_url: `http://127.0.0.1:${healthPort}/healthz`,
          },
          image,
          previous_image: `reg.example/acme/model@sha256:${"e".repeat(64)}`,
        };
        const p = { ...payload("sr_5_21_f", args), tool: "attach-queue-lane" };
        expect(await r.dispatch(p)).toEqual({ ok: true });
        await r.idle();
        const run = r.list()[0]!;
        const log = readFileSync(run.logFile, "utf8");
        expect(run.conclusion, log).toBe("success");
        const cb = engine.received.find((x) => x.kind === "callback")!.body;
        expect(cb, log).toMatchObject({ status: "succeeded", overall: "pass" });
        const names = (cb.checks as { name: string }[]).map((c) => c.name);
        expect(names).toEqual(expect.arrayContaining(["connect", "pull", "start", "health"]));
        expect(target.commands.some((c) => c.includes(target.deployScript))).toBe(true);
        expect(log).not.toContain(target.clientPrivateKey.split("\n")[1]!);
      } finally {
        await target.close();
      }
    });
  },
);
