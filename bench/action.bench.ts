/**
 * Benchmark of the release-step action's own cost: the bundled action (as a runner runs it)
 * with the no-op tool against the engine stand-in on 127.0.0.1; the bundle sizes; one SSH
 * connect + exec round trip to a real sshd on loopback.
 *   overhead_ms = median over runs of (action start -> tool start) + (tool end -> callback acked)
 * Targets: overhead < 500 ms, action bundle < 2 MB. Last line: RESULT {json}.
 */
import { readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { connect } from "../scripts/lib/ssh.ts";
import { startEngineStandin } from "../test/support/engine-standin.ts";
import { runAction, TEST_ALLOWLIST } from "../test/support/run-action.ts";
import { generateKey, sharedTempDir, startSshd } from "../test/support/sshd.ts";
import { REPO } from "../test/support/standin-target.ts";

const RUNS = Number(process.env.BENCH_ACTION_RUNS ?? 10);
// Every figure includes starting Node for the bundle, as on a runner; a loaded machine inflates it.

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[Math.floor((s.length - 1) / 2)] as number) : Number.NaN;
};

async function actionOverhead(): Promise<{ toStart: number[]; toAck: number[] }> {
  const engine = await startEngineStandin();
  const runnerTemp = sharedTempDir("baton-bench-");
  // The no-op tool never connects, but the action still provisions (and removes) a real key.
  const [keyPath] = generateKey(runnerTemp, "bench_key");
  const key = readFileSync(keyPath, "utf8");
  const toStart: number[] = [];
  const toAck: number[] = [];
  try {
    // Run 0 warms the file cache and is not counted.
    for (let i = 0; i <= RUNS; i++) {
      const id = `sr_${900000 + i}_1_f`;
      engine.addStepRun({
        id,
        release_id: `r${900000 + i}`,
        generation: 1,
        manifest_digest: "d".repeat(64),
        dispatch: 1,
      });
      const payload = {
        v: 1,
        step_run_id: id,
        tool: "noop",
        args: {},
        callback_url: `${engine.url}/v1/releases/step-runs/${id}/callback`,
        release: {
          id: `r${900000 + i}`,
          generation: 1,
          manifest_digest: "d".repeat(64),
          dispatch: 1,
          operation_key: `r${i}:1:fwd:noop`,
        },
      };
      const spawnedAt = Date.now();
      const r = await runAction({
        runnerTemp,
        eventName: "repository_dispatch",
        event: { action: "release-step", client_payload: payload },
        inputs: {
          "engine-url": engine.url,
          "callback-secret": engine.secret,
          "ssh-key": key,
          allowlist: TEST_ALLOWLIST,
        },
        post: false,
      });
      const line = /\[action\] timings (\{.*\})/.exec(r.main.stdout);
      if (r.main.code !== 0 || !line)
        throw new Error(`[bench] action run ${i} failed:\n${r.main.stdout}\n${r.main.stderr}`);
      const t = JSON.parse(line[1] as string) as Record<string, number>;
      if (i === 0) continue;
      toStart.push((t.tool_started_at as number) - spawnedAt);
      toAck.push((t.callback_acked_at as number) - (t.tool_finished_at as number));
    }
  } finally {
    await engine.close();
    rmSync(runnerTemp, { recursive: true, force: true });
  }
  return { toStart, toAck };
}

async function sshRoundTrip(): Promise<number[]> {
  const sshd = await startSshd();
  const times: number[] = [];
  try {
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const s = await connect(
        { host: sshd.host, port: sshd.port, user: sshd.user, hostKey: sshd.hostKeyPin },
        { privateKey: sshd.clientKey, connectTimeoutMs: 10_000 },
      );
      const r = await s.exec("true", 10_000);
      s.close();
      if (r.exit_code !== 0) throw new Error("[bench] ssh exec failed");
      times.push(performance.now() - t0);
    }
  } finally {
    await sshd.stop();
  }
  return times;
}

const size = (rel: string) => statSync(join(REPO, rel)).size;
const actionBytes =
  size("actions/release-step/dist/index.js") + size("actions/release-step/dist/post.js");
for (const f of [
  "actions/release-step/dist/index.js",
  "actions/release-step/dist/post.js",
  "scripts/release/dist/attach-queue-lane.mjs",
  "scripts/release/dist/noop.mjs",
]) {
  console.log(`bundle ${f}: ${size(f)} bytes`);
}
const { toStart, toAck } = await actionOverhead();
console.log(
  `action start -> tool start: median ${median(toStart)} ms over ${RUNS} runs (min ${Math.min(...toStart)}, max ${Math.max(...toStart)})`,
);
console.log(
  `tool end -> callback acked: median ${median(toAck)} ms (min ${Math.min(...toAck)}, max ${Math.max(...toAck)})`,
);
const ssh = await sshRoundTrip();
console.log(
  `ssh connect + exec round trip on loopback: median ${median(ssh).toFixed(1)} ms over ${ssh.length}`,
);
const overhead = median(toStart) + median(toAck);
console.log(
  `targets: overhead ${overhead} ms (< 500), action bundle ${actionBytes} bytes (< 2 MB)`,
);
console.log(
  `RESULT ${JSON.stringify({ overhead_ms: overhead, bundle_bytes: actionBytes, ssh_roundtrip_ms: Math.round(median(ssh)), tool_start_ms: median(toStart), callback_ack_ms: median(toAck) })}`,
);
