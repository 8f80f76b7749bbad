// The deploy tools on a REAL container runtime: podman (rootful, runc) on the target, reached
// through a real sshd, pulling images BY DIGEST from a real registry (Debian docker-registry on
// 127.0.0.1). Asserts on what the runtime runs and what the containers serve, not only on the
// tool's own checks. CI installs podman, runc, docker-registry and busybox-static (.ci/run);
// elsewhere the suite is skipped unless CI is set (then a missing runtime fails it).
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DeployToolSpec, runDeployTool } from "../../scripts/lib/deploy-tool.ts";
import { seedResults } from "../../scripts/lib/result.ts";
import { type PodmanWorld, podmanAvailable, startPodmanWorld } from "../support/podman-target.ts";
import { proposePort as freePort } from "../support/ports.ts";
import { type Sshd, startSshd } from "../support/sshd.ts";
import { containerName, DEPLOY_SH } from "../support/standin-target.ts";

const PHASES = ["pull", "start", "health", "stop-old"] as const;
const DEPLOY: DeployToolSpec = { name: "attach-queue-lane", subcommand: "deploy", phases: PHASES };
const RESTORE: DeployToolSpec = {
  name: "restore-queue-lane",
  subcommand: "restore",
  phases: PHASES,
};
const HEALTH_URL = "http://127.0.0.1:8080/healthz";

const enabled = podmanAvailable() || Boolean(process.env.CI);

describe.skipIf(!enabled)("deploy tools on podman + registry through sshd", () => {
  let world: PodmanWorld;
  let sshd: Sshd;
  let work: string;
  let v1: string;
  let v2: string;
  let seq = 0;

  beforeAll(async () => {
    expect(podmanAvailable(), "podman, runc, docker-registry, busybox-static and root").toBe(true);
    world = await startPodmanWorld();
    // deploy.sh is installed on the target like a real machine would have it (a root-owned copy).
    work = mkdtempSync(join(tmpdir(), "baton-podman-run-"));
    copyFileSync(DEPLOY_SH, join(work, "baton-deploy"));
    // Other machine configurations: deploy.sh as installed, started with other settings (sshd's
    // SetEnv wins over what a client sends, so a wrapper sets them).
    //   baton-deploy-host: host networking (docs/runner.md's advice for model servers), the
    //   default health target (unset: what an operator gets without choosing one).
    //   baton-deploy-badrun: a `run` that fails (an entrypoint the image does not have).
    wrapper(
      "baton-deploy-host",
      `env -u BATON_HEALTH_TARGET BATON_RUN_ARGS='--network host -e BIND=127.0.0.1' ${join(work, "baton-deploy")} "$@"`,
    );
    wrapper(
      "baton-deploy-badrun",
      `BATON_RUN_ARGS='--entrypoint /nonexistent' exec ${join(work, "baton-deploy")} "$@"`,
    );
    sshd = await startSshd(world.env, { root: true });
    [v1, v2] = await Promise.all([world.image("v1"), world.image("v2")]);
  }, 240_000);
  afterAll(async () => {
    await sshd?.stop();
    await world?.cleanup();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 60_000);

  function wrapper(name: string, line: string) {
    writeFileSync(join(work, name), `#!/bin/sh\n${line}\n`);
    chmodSync(join(work, name), 0o755);
  }

  /** Runs one tool through sshd; returns its exit code and checks.json. */
  async function tool(
    spec: DeployToolSpec,
    lane: string,
    image: string,
    previous?: string,
    env: Record<string, string> = {},
    healthUrl = HEALTH_URL,
  ) {
    const n = ++seq;
    const dir = join(work, `run-${n}`);
    const args = join(work, `args-${n}.json`);
    seedResults(dir);
    writeFileSync(
      args,
      JSON.stringify({
        lane: {
          id: lane,
          host: sshd.host,
          port: sshd.port,
          user: sshd.user,
          host_key: sshd.hostKeyPin,
          health_url: healthUrl,
        },
        image,
        ...(previous ? { previous_image: previous } : {}),
      }),
    );
    const code = await runDeployTool(
      spec,
      [
        "--args",
        args,
        "--key",
        sshd.clientKeyPath,
        "--result-dir",
        dir,
        "--operation-key",
        `r${n}:1:${spec.subcommand}:${lane}`,
      ],
      { BATON_DEPLOY_SCRIPT: join(work, "baton-deploy"), ...env },
    );
    const checks = JSON.parse(readFileSync(join(dir, "checks.json"), "utf8")) as {
      name: string;
      status: string;
      message?: string;
      image?: string;
    }[];
    return { code, checks, byName: (p: string) => checks.find((c) => c.name === p) };
  }

  const running = async (name: string) =>
    (await world.podman(["inspect", "-f", "{{.State.Running}}", name]).catch(() => "")) === "true";
  const runningImage = (name: string) =>
    world.podman(["inspect", "-f", "{{.ImageDigest}}", name]).catch(() => "");

  it("pulls by digest, starts detached, health-checks the new container, stops the old one, restores", async () => {
    const lane = "lane-a";
    const first = await tool(DEPLOY, lane, v1);
    expect(first.code, JSON.stringify(first.checks)).toBe(0);
    expect(first.byName("health")?.image).toBe(v1);
    expect(await world.probe(containerName(lane, v1))).toBe("v1");

    const second = await tool(DEPLOY, lane, v2, v1);
    expect(second.code, JSON.stringify(second.checks)).toBe(0);
    expect(second.checks.map((c) => [c.name, c.status])).toEqual([
      ["connect", "ok"],
      ["pull", "ok"],
      ["start", "ok"],
      ["health", "ok"],
      ["stop-old", "ok"],
    ]);
    // The running digest, as the tool reports it and as the runtime holds it.
    expect(second.byName("health")?.image).toBe(v2);
    expect(`${world.registry}/baton/app@${await runningImage(containerName(lane, v2))}`).toBe(v2);
    expect(await world.probe(containerName(lane, v2))).toBe("v2");
    expect(await running(containerName(lane, v1))).toBe(false);

    // Restore: the previous digest runs again under its exact name, the new one is stopped.
    const back = await tool(RESTORE, lane, v1, v2);
    expect(back.code, JSON.stringify(back.checks)).toBe(0);
    expect(back.byName("health")?.image).toBe(v1);
    expect(await world.probe(containerName(lane, v1))).toBe("v1");
    expect(await running(containerName(lane, v2))).toBe(false);
  }, 180_000);

  it("a digest the registry does not have fails pull; the old container keeps serving", async () => {
    const lane = "lane-b";
    expect((await tool(DEPLOY, lane, v1)).code).toBe(0);
    const missing = `${world.registry}/baton/app@sha256:${"0".repeat(64)}`;
    const r = await tool(DEPLOY, lane, missing, v1);
    expect(r.code).toBe(1);
    expect(r.byName("pull")?.status).toBe("failed");
    expect(r.byName("pull")?.message).toMatch(/manifest unknown/);
    expect(r.checks.filter((c) => c.status === "not_run").map((c) => c.name)).toEqual([
      "start",
      "health",
      "stop-old",
    ]);
    expect(await world.probe(containerName(lane, v1))).toBe("v1");
  }, 120_000);

  it("a container that exits at once fails health at once with its exit code and log; old keeps serving", async () => {
    const lane = "lane-c";
    const crash = await world.image("crash", "exits");
    expect((await tool(DEPLOY, lane, v1)).code).toBe(0);
    // A long health deadline: the failure must come from the exit, not from the deadline.
    const r = await tool(DEPLOY, lane, crash, v1, { BATON_HEALTH_TIMEOUT_S: "120" });
    expect(r.code).toBe(1);
    const health = r.byName("health");
    expect(health?.status).toBe("failed");
    expect(health?.message).toMatch(/is not running.*exit code 3.*configuration missing/);
    expect(r.byName("stop-old")?.status).toBe("not_run");
    expect(await running(containerName(lane, v1))).toBe(true);
    expect(await world.probe(containerName(lane, v1))).toBe("v1");
  }, 120_000);

  it("a health endpoint that never answers fails at the deadline; old keeps serving", async () => {
    const lane = "lane-d";
    const silent = await world.image("silent", "silent");
    expect((await tool(DEPLOY, lane, v1)).code).toBe(0);
    const r = await tool(DEPLOY, lane, silent, v1, { BATON_HEALTH_TIMEOUT_S: "3" });
    expect(r.code).toBe(1);
    expect(r.byName("health")?.status).toBe("failed");
    expect(r.byName("health")?.message).toMatch(/not healthy within 3s/);
    expect(r.byName("stop-old")?.status).toBe("not_run");
    expect(await world.probe(containerName(lane, v1))).toBe("v1");
    // The step that started the unhealthy container stopped and removed it.
    expect(await world.containers()).not.toContain(containerName(lane, silent));
  }, 120_000);

  /** The tool environment of a host-network lane (the wrapper written in beforeAll). */
  const host = () => ({ BATON_DEPLOY_SCRIPT: join(work, "baton-deploy-host") });

  /**
   * Deploys `image` as the first image of a host-network lane on a free loopback port; returns
   * the lane's health URL. Another process may take the port between the pick and the
   * container's bind: then the container exits (EADDRINUSE) and another port is tried.
   */
  async function hostLane(lane: string, image: string): Promise<string> {
    let last = "";
    for (let tries = 0; tries < 3; tries++) {
      const url = `http://127.0.0.1:${await freePort()}/healthz`;
      const r = await tool(DEPLOY, lane, image, undefined, host(), url);
      if (r.code === 0) return url;
      last = JSON.stringify(r.checks);
      if (!/is not running/.test(r.byName("health")?.message ?? "")) break;
    }
    throw new Error(`[test] could not deploy ${image} on a host-network port: ${last}`);
  }

  it("host networking: a new container that never answers fails health although the old one answers on its port; the old one keeps serving, the new one is removed", async () => {
    const lane = "lane-h1";
    const silent = await world.image("h-silent", "silent");
    const url = await hostLane(lane, v1);
    const old = containerName(lane, v1);
    const oldAnswer = await world.get(url);
    const r = await tool(DEPLOY, lane, silent, v1, { ...host(), BATON_HEALTH_TIMEOUT_S: "3" }, url);
    // The old container answered every probe on the shared port: that is not the new one.
    expect(r.code, JSON.stringify(r.checks)).toBe(1);
    expect(r.byName("health")?.status).toBe("failed");
    expect(r.byName("health")?.message).toMatch(/without the instance id/);
    expect(r.byName("stop-old")?.status).toBe("not_run");
    // The old container still runs and its URL answers with the old image's identity.
    expect(await running(old)).toBe(true);
    const oldId = await world.instanceId(old);
    expect(oldId).toMatch(/^[0-9a-f]{32}$/);
    expect(oldAnswer).toBe(`v1 ${oldId}`);
    expect(await world.get(url)).toBe(`v1 ${oldId}`);
    // No Created or exited leftover of the new container.
    expect(await world.containers()).not.toContain(containerName(lane, silent));
  }, 180_000);

  it("host networking: a new container that answers with its own instance id passes while the old one shares the port; the old one is stopped", async () => {
    const lane = "lane-h2";
    const [r1, r2] = await Promise.all([
      world.image("r1", "reuseport"),
      world.image("r2", "reuseport"),
    ]);
    const url = await hostLane(lane, r1);
    const r = await tool(DEPLOY, lane, r2, r1, host(), url);
    expect(r.code, JSON.stringify(r.checks)).toBe(0);
    expect(r.checks.map((c) => [c.name, c.status])).toEqual([
      ["connect", "ok"],
      ["pull", "ok"],
      ["start", "ok"],
      ["health", "ok"],
      ["stop-old", "ok"],
    ]);
    expect(r.byName("health")?.image).toBe(r2);
    const newId = await world.instanceId(containerName(lane, r2));
    expect(newId).toMatch(/^[0-9a-f]{32}$/);
    expect(r.byName("health")?.message).toContain(newId);
    expect(await running(containerName(lane, r1))).toBe(false);
    expect(await world.get(url)).toBe(`r2 ${newId}`);
  }, 180_000);

  it("a failed `run` leaves no Created container behind; the old one keeps serving and a retry starts cleanly", async () => {
    const lane = "lane-f";
    expect((await tool(DEPLOY, lane, v1)).code).toBe(0);
    const bad = { BATON_DEPLOY_SCRIPT: join(work, "baton-deploy-badrun") };
    const r = await tool(DEPLOY, lane, v2, v1, bad);
    expect(r.code).toBe(1);
    expect(r.byName("start")?.status).toBe("failed");
    expect(r.byName("start")?.message).toMatch(/nonexistent/);
    expect(await world.containers()).not.toContain(containerName(lane, v2));
    expect(await world.probe(containerName(lane, v1))).toBe("v1");
    const retry = await tool(DEPLOY, lane, v2, v1);
    expect(retry.code, JSON.stringify(retry.checks)).toBe(0);
    expect(await world.probe(containerName(lane, v2))).toBe("v2");
  }, 180_000);
});
