/**
 * Benchmark of a real deploy: the attach/restore tools through a bastion (two real sshd; the
 * lane reachable only through the bastion, test/support/bastion.ts) against rootful podman
 * pulling BY DIGEST from Debian's docker-registry on 127.0.0.1 (test/support/podman-target.ts).
 *   deploy_p50_ms   median wall time of attach-queue-lane (connect, pull, start, health, stop-old)
 *   restore_p50_ms  median wall time of restore-queue-lane (the previous digest back)
 *   ssh_via_bastion_p50_ms  median connect (both hops, pinned) + `true` + close
 * Needs root, podman, runc, docker-registry, busybox-static (.ci/run installs them).
 * Bounded: BENCH_DEPLOY_ROUNDS (default 3) deploy+restore rounds. Last line: RESULT {json}.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DeployToolSpec, runDeployTool } from "../scripts/lib/deploy-tool.ts";
import { seedResults } from "../scripts/lib/result.ts";
import { connect } from "../scripts/lib/ssh.ts";
import { startBastionPair } from "../test/support/bastion.ts";
import { podmanAvailable, startPodmanWorld } from "../test/support/podman-target.ts";
import { DEPLOY_SH } from "../test/support/standin-target.ts";

const ROUNDS = Math.min(20, Number(process.env.BENCH_DEPLOY_ROUNDS ?? 3));
const PHASES = ["pull", "start", "health", "stop-old"];

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[Math.floor((s.length - 1) / 2)] as number) : Number.NaN;
};

if (!podmanAvailable()) {
  console.error("[bench:deploy] needs root, podman, runc, docker-registry and busybox-static");
  process.exit(1);
}

const world = await startPodmanWorld();
const pair = await startBastionPair(world.env, { root: true });
const work = mkdtempSync(join(tmpdir(), "baton-bench-deploy-"));
copyFileSync(DEPLOY_SH, join(work, "baton-deploy"));
const deployMs: number[] = [];
const restoreMs: number[] = [];
const sshMs: number[] = [];
let pulledByDigest = true;
let failures = 0;
let n = 0;

const lane = {
  id: "lane-bench",
  host: pair.target.host,
  port: pair.target.port,
  user: pair.target.user,
  host_key: pair.target.hostKeyPin,
  health_url: "http://127.0.0.1:8080/healthz",
  jump: {
    host: pair.bastion.host,
    port: pair.bastion.port,
    user: pair.bastion.user,
    host_key: pair.bastion.hostKeyPin,
  },
};

/** Runs one tool and returns its wall time (ms); counts a failure when it does not pass. */
async function tool(spec: DeployToolSpec, image: string, previous?: string): Promise<number> {
  n++;
  const dir = join(work, `run-${n}`);
  const args = join(work, `args-${n}.json`);
  seedResults(dir);
  writeFileSync(
    args,
    JSON.stringify({ lane, image, ...(previous ? { previous_image: previous } : {}) }),
  );
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (() => true) as typeof process.stdout.write; // the tools' progress lines
  const t0 = performance.now();
  let code: number;
  try {
    code = await runDeployTool(
      spec,
      [
        "--args",
        args,
        "--key",
        pair.bastion.clientKeyPath,
        "--result-dir",
        dir,
        "--operation-key",
        `bench${n}:1:${spec.subcommand}:${lane.id}`,
      ],
      { BATON_DEPLOY_SCRIPT: join(work, "baton-deploy"), BATON_HEALTH_TIMEOUT_S: "60" },
    );
  } finally {
    process.stdout.write = write;
  }
  const ms = performance.now() - t0;
  const checks = JSON.parse(readFileSync(join(dir, "checks.json"), "utf8")) as {
    name: string;
    status: string;
    image?: string;
    message?: string;
  }[];
  const health = checks.find((c) => c.name === "health");
  if (code !== 0) {
    failures++;
    console.log(`[bench:deploy] ${spec.name} failed: ${JSON.stringify(checks)}`);
  }
  if (health?.image !== image) pulledByDigest = false;
  return ms;
}

try {
  if (!pair.enforced) console.log("[bench:deploy] note: the lane is not firewalled (not root)");
  const [v1, v2] = await Promise.all([world.image("v1"), world.image("v2")]);
  await tool({ name: "attach-queue-lane", subcommand: "deploy", phases: PHASES }, v1);
  for (let i = 0; i < ROUNDS; i++) {
    deployMs.push(
      await tool({ name: "attach-queue-lane", subcommand: "deploy", phases: PHASES }, v2, v1),
    );
    restoreMs.push(
      await tool({ name: "restore-queue-lane", subcommand: "restore", phases: PHASES }, v1, v2),
    );
  }
  // What podman holds: the lane's container runs v1's manifest digest, pulled from the registry.
  const running = await world.podman([
    "ps",
    "--filter",
    "label=baton.lane=lane-bench",
    "--format",
    "{{.ImageID}} {{.Image}}",
  ]);
  if (!running.includes(v1.split("@")[1] as string) && !running.includes(v1)) {
    console.log(`[bench:deploy] podman runs: ${running}`);
    pulledByDigest = false;
  }
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    const s = await connect(
      {
        host: lane.host,
        port: lane.port,
        user: lane.user,
        hostKey: lane.host_key,
        jump: {
          host: lane.jump.host,
          port: lane.jump.port,
          user: lane.jump.user,
          hostKey: lane.jump.host_key,
        },
      },
      { privateKey: pair.bastion.clientKey, connectTimeoutMs: 20_000 },
    );
    await s.exec("true", 10_000);
    s.close();
    sshMs.push(performance.now() - t0);
  }
} finally {
  await pair.stop();
  await world.cleanup();
  rmSync(work, { recursive: true, force: true });
}

console.log(
  `[bench:deploy] ${ROUNDS} rounds via bastion (lane firewalled: ${pair.enforced}); deploy ms ${deployMs.map(Math.round).join(",")}; restore ms ${restoreMs.map(Math.round).join(",")}; failures ${failures}`,
);
if (failures > 0) process.exitCode = 1;
console.log(
  `RESULT ${JSON.stringify({
    runtime: "podman",
    pull_by_digest: pulledByDigest && failures === 0,
    deploy_p50_ms: Math.round(median(deployMs)),
    restore_p50_ms: Math.round(median(restoreMs)),
    bastion: true,
    ssh_via_bastion_p50_ms: Math.round(median(sshMs)),
  })}`,
);
