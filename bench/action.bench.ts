/**
 * Benchmark of the release-step action's own cost: the bundled action (as a runner runs it)
 * with the no-op tool against the engine stand-in on 127.0.0.1; the bundle sizes; one SSH
 * connect + exec round trip to a real sshd on loopback.
 *   overhead_ms = median over runs of (action start -> tool start) + (tool end -> callback acked)
 *   main_cpu_ms, post_cpu_ms = median CPU (user + system, the process and what it waited for)
 *     of the main step and of the post step after a main step that reported;
 *   node_start_cpu_ms = median CPU of `node empty.mjs` started the same way, in the same run: the
 *     reference. main_cpu_ratio and post_cpu_ratio are the steps' CPU over it (Linux only,
 *     null elsewhere: read from /proc/self/stat).
 * Fails (exit 1) when overhead_ms >= 500, the bundle is 2 MB or more, or a step's CPU ratio is
 * over ACTION_CPU_RATIO_LIMITS. Last line: RESULT {json}.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "../scripts/lib/ssh.ts";
import { startEngineStandin } from "../test/support/engine-standin.ts";
import { runAction, TEST_ALLOWLIST } from "../test/support/run-action.ts";
import { generateKey, sharedTempDir, startSshd } from "../test/support/sshd.ts";
import { REPO } from "../test/support/standin-target.ts";

const RUNS = Number(process.env.BENCH_ACTION_RUNS ?? 10);

/**
 * The most CPU each step may take, as a multiple of a bare Node start measured in the same run.
 * Every step is a fresh Node process on the runner, so what a step loads and compiles is paid
 * on every step of every release. Measured when set (2 cores, CPU read in 10 ms ticks): main
 * 1.9-2.5 (its work: read the payload and key, preflight, run the tool, the callback; one bundle
 * with `fetch`: 3.6), post 0.5-0.7 (nothing to report: the entry and @actions/core). The post
 * limit only catches gross regressions; test/unit/action-bundle.test.ts counts the bytes each
 * step loads. Raising a limit is a reviewed change with its reason.
 */
const ACTION_CPU_RATIO_LIMITS = { main: 3.0, post: 1.5 };

/** CPU seconds of this process's waited-for children so far (Linux), else null. */
function childrenCpuMs(): number | null {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    // Fields after the command name "(...)": cutime and cstime are the 14th and 15th.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(f[13]) + Number(f[14])) * 1000) / 100;
  } catch {
    return null;
  }
}

/** CPU (ms) `fn`'s waited-for child processes took, or null off Linux. */
async function childCpu(fn: () => Promise<unknown>): Promise<number | null> {
  const before = childrenCpuMs();
  await fn();
  const after = childrenCpuMs();
  return before === null || after === null ? null : after - before;
}
// Every figure includes starting Node for the bundle, as on a runner; a loaded machine inflates it.

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[Math.floor((s.length - 1) / 2)] as number) : Number.NaN;
};

async function actionOverhead(): Promise<
  Record<"toStart" | "toAck" | "mainCpu" | "postCpu" | "nodeCpu", number[]>
> {
  const engine = await startEngineStandin();
  const runnerTemp = sharedTempDir("baton-bench-");
  // The no-op tool never connects, but the action still provisions (and removes) a real key.
  const [keyPath] = generateKey(runnerTemp, "bench_key");
  const key = readFileSync(keyPath, "utf8");
  // The reference: Node starting a module that does nothing, as a step starts its entry.
  const EMPTY_MODULE = join(runnerTemp, "empty.mjs");
  writeFileSync(EMPTY_MODULE, "");
  const toStart: number[] = [];
  const toAck: number[] = [];
  const mainCpu: number[] = [];
  const postCpu: number[] = [];
  const nodeCpu: number[] = [];
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
      let r!: Awaited<ReturnType<typeof runAction>>;
      const main = await childCpu(async () => {
        r = await runAction({
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
      });
      const post = await childCpu(() => r.runPost());
      // Three bare starts per run: CPU is read in 10 ms ticks, and the reference divides both.
      const bare: (number | null)[] = [];
      for (let k = 0; k < 3; k++)
        bare.push(
          await childCpu(
            () => new Promise((done) => spawn(process.execPath, [EMPTY_MODULE]).on("close", done)),
          ),
        );
      const line = /\[action\] timings (\{.*\})/.exec(r.main.stdout);
      if (r.main.code !== 0 || !line)
        throw new Error(`[bench] action run ${i} failed:\n${r.main.stdout}\n${r.main.stderr}`);
      const t = JSON.parse(line[1] as string) as Record<string, number>;
      if (i === 0) continue;
      if (main !== null && post !== null && !bare.includes(null)) {
        mainCpu.push(main);
        postCpu.push(post);
        nodeCpu.push(...(bare as number[]));
      }
      toStart.push((t.tool_started_at as number) - spawnedAt);
      toAck.push((t.callback_acked_at as number) - (t.tool_finished_at as number));
    }
  } finally {
    await engine.close();
    rmSync(runnerTemp, { recursive: true, force: true });
  }
  return { toStart, toAck, mainCpu, postCpu, nodeCpu };
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
// Every module of the action: the two entries and the chunks they load.
const actionFiles = readdirSync(join(REPO, "actions/release-step/dist"), { recursive: true })
  .map(String)
  .filter((f) => f.endsWith(".js"))
  .sort()
  .map((f) => `actions/release-step/dist/${f}`);
const actionBytes = actionFiles.reduce((n, f) => n + size(f), 0);
for (const f of [
  ...actionFiles,
  "scripts/release/dist/attach-queue-lane.mjs",
  "scripts/release/dist/noop.mjs",
]) {
  console.log(`bundle ${f}: ${size(f)} bytes`);
}
const { toStart, toAck, mainCpu, postCpu, nodeCpu } = await actionOverhead();
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
const cpu = nodeCpu.length
  ? {
      main_cpu_ms: median(mainCpu),
      post_cpu_ms: median(postCpu),
      node_start_cpu_ms: median(nodeCpu),
      main_cpu_ratio: Math.round((median(mainCpu) / median(nodeCpu)) * 100) / 100,
      post_cpu_ratio: Math.round((median(postCpu) / median(nodeCpu)) * 100) / 100,
    }
  : {
      main_cpu_ms: null,
      post_cpu_ms: null,
      node_start_cpu_ms: null,
      main_cpu_ratio: null,
      post_cpu_ratio: null,
    };
console.log(
  `CPU per step (median of ${mainCpu.length} runs, ${nodeCpu.length} bare starts): main ${cpu.main_cpu_ms} ms, post ${cpu.post_cpu_ms} ms, a bare node start ${cpu.node_start_cpu_ms} ms (ratios ${cpu.main_cpu_ratio} and ${cpu.post_cpu_ratio}; limits ${ACTION_CPU_RATIO_LIMITS.main} and ${ACTION_CPU_RATIO_LIMITS.post})`,
);
console.log(
  `targets: overhead ${overhead} ms (< 500), action bundle ${actionBytes} bytes (< 2 MB)`,
);
const problems = [
  overhead >= 500 && `overhead ${overhead} ms is not under 500 ms`,
  actionBytes >= 2_000_000 && `the action's modules weigh ${actionBytes} bytes, not under 2 MB`,
  cpu.main_cpu_ratio !== null &&
    cpu.main_cpu_ratio > ACTION_CPU_RATIO_LIMITS.main &&
    `the main step took ${cpu.main_cpu_ratio}x a bare node start's CPU (limit ${ACTION_CPU_RATIO_LIMITS.main}): what does it load now?`,
  cpu.post_cpu_ratio !== null &&
    cpu.post_cpu_ratio > ACTION_CPU_RATIO_LIMITS.post &&
    `the post step took ${cpu.post_cpu_ratio}x a bare node start's CPU (limit ${ACTION_CPU_RATIO_LIMITS.post}): what does it load now?`,
].filter(Boolean);
for (const p of problems) console.error(`[bench] action: ${p}`);
if (problems.length) process.exitCode = 1;
console.log(
  `RESULT ${JSON.stringify({ overhead_ms: overhead, bundle_bytes: actionBytes, ssh_roundtrip_ms: Math.round(median(ssh)), tool_start_ms: median(toStart), callback_ack_ms: median(toAck), ...cpu })}`,
);
