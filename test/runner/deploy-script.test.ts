// deploy.sh run by dash (`sh`) against the stand-in container CLI, locally (the SSH path is
// covered in tools.test.ts). Phases, F07, idempotency per operation key, absolute naming.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  containerName,
  DEPLOY_SH,
  image,
  makeStandinTarget,
  STANDIN_CLI,
  type StandinTarget,
} from "../support/standin-target.ts";

let t: StandinTarget;
let url: string;
beforeEach(async () => {
  t = makeStandinTarget();
  url = await t.healthUrl();
});
afterEach(() => t.cleanup());

const A = image("a");
const B = image("b");

function deploy(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync("sh", [DEPLOY_SH, ...args], {
    env: { ...process.env, ...t.env, ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
  const lines = r.stdout
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { code: r.status, lines, stderr: r.stderr };
}
const full = (
  sub: string,
  img: string,
  prev: string,
  key: string,
  extra: string[] = [],
  env: Record<string, string> = {},
) =>
  deploy(
    [
      sub,
      "--lane",
      "lane-a",
      "--image",
      img,
      "--previous-image",
      prev,
      "--health-url",
      url,
      "--operation-key",
      key,
      ...extra,
    ],
    env,
  );

/**
 * A loopback HTTP server in a child process (deploy.sh runs synchronously, so this process cannot
 * answer) on a port of its own: what a host-network container holding the lane's port answers.
 * It answers 200 with the text of `bodyFile`, read per request, where `{{instance}}` becomes the
 * instance id label of the stand-in container `name`. The test's health URL becomes its port's.
 */
async function holdPort(bodyFile: string, name = ""): Promise<ChildProcess> {
  const script = `
    const fs = require("node:fs");
    const [bodyFile, containerFile] = process.argv.slice(1);
    require("node:http").createServer((_q, res) => {
      let id = "none";
      try { id = JSON.parse(fs.readFileSync(containerFile, "utf8")).labels["baton.instance_id"]; } catch {}
      res.end(fs.readFileSync(bodyFile, "utf8").replace("{{instance}}", id));
    }).listen(0, "127.0.0.1", function () { console.log(this.address().port); });`;
  const child = spawn(
    process.execPath,
    ["-e", script, bodyFile, join(t.standinDir, "containers", `${name}.json`)],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const port = await new Promise<string>((ok, fail) => {
    child.once("exit", (code) => fail(new Error(`[test] port holder exited (${code})`)));
    child.stdout?.once("data", (d: Buffer) => ok(d.toString().trim()));
  });
  url = `http://127.0.0.1:${port}/healthz`;
  return child;
}

describe("deploy.sh", () => {
  it("gives the new container the declared environment (--env NAME=VALUE); refuses a malformed one before any phase", () => {
    t.seedRunning("lane-a", B, url);
    const env = ["--env", "BATON_SHADOW_SAFE=1", "--env", "BATON_EGRESS=restricted"];
    const r = full("deploy", A, B, "r1:1:fwd:lane-a", env);
    expect(r.code, r.stderr).toBe(0);
    const started = t
      .calls()
      .filter((c) => c[0] === "run")
      .at(-1);
    expect(started?.at(-1)).toBe(A);
    for (const kv of ["BATON_SHADOW_SAFE=1", "BATON_EGRESS=restricted"]) {
      expect(started?.[started.indexOf(kv) - 1], kv).toBe("-e");
    }
    for (const bad of ["BATON_X=a b", "PATH=/tmp", "BATON_X=$(id)", "BATON_X", "BATON_x=1"]) {
      const refused = full("deploy", A, B, "r1:2:fwd:lane-a", ["--env", bad]);
      expect(refused.code, bad).toBe(2);
      expect(refused.lines[0]).toMatchObject({ phase: "args", status: "failed" });
    }
  });

  it("runs pull, start, health, stop-old and stops the old container by its exact name", () => {
    t.seedRunning("lane-a", B, url);
    const seeded = t.calls().length;
    const r = full("deploy", A, B, "r1:1:fwd:lane-a");
    expect(r.code).toBe(0);
    expect(r.lines.map((l) => [l.phase, l.status])).toEqual([
      ["pull", "ok"],
      ["start", "ok"],
      ["health", "ok"],
      ["stop-old", "ok"],
    ]);
    for (const l of r.lines) expect(typeof l.duration_ms).toBe("number");
    expect(t.container(containerName("lane-a", A))?.running).toBe(true);
    expect(t.container(containerName("lane-a", B))?.running).toBe(false);
    // The new container got a fresh instance id, and its answer (the stand-in echoes it in a
    // Baton-Instance-Id header) is what passed.
    const id = t.container(containerName("lane-a", A))?.labels?.["baton.instance_id"];
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(r.lines[1]?.message).toContain(id);
    expect(r.lines[2]?.message).toContain(`answered with instance id ${id}`);
    const calls = t.calls().slice(seeded);
    const stops = calls.filter((c) => c[0] === "stop");
    expect(stops).toEqual([["stop", containerName("lane-a", B)]]);
    const run = calls.find((c) => c[0] === "run");
    expect(run).toContain("-d");
    expect(run?.[run.indexOf("--name") + 1]).toBe(containerName("lane-a", A));
    expect(run).toContain(`BATON_INSTANCE_ID=${id}`);
  });

  it("an old container answering on the new one's port (host networking) never passes the new one's health check; the new one is removed and a retry starts it again", async () => {
    // Whatever holds the port answers 200 with no instance id: the old container of a
    // host-network lane (the stand-in's health server cannot take the port from it).
    const body = join(t.dir, "squatter-body");
    writeFileSync(body, "ok from the old container");
    const squatter = await holdPort(body);
    t.seedRunning("lane-a", B, url);
    try {
      const r = full("deploy", A, B, "r1:1:fwd:lane-a", ["--health-timeout", "1"]);
      expect(r.code).toBe(1);
      expect(r.lines.map((l) => [l.phase, l.status])).toEqual([
        ["pull", "ok"],
        ["start", "ok"],
        ["health", "failed"],
        ["stop-old", "not_run"],
      ]);
      const health = r.lines[2]!;
      expect(String(health.message)).toMatch(
        /answered 200 without the instance id [0-9a-f]{32} of baton-lane-a-aaaaaaaaaaaa .*another container answers on this port.*its body: ok from the old container/,
      );
      expect(String(health.message)).toContain("removed baton-lane-a-aaaaaaaaaaaa");
      expect(t.container(containerName("lane-a", B))?.running).toBe(true);
      expect(t.container(containerName("lane-a", A))).toBeNull();
    } finally {
      squatter.kill();
    }
    // Same operation key again (a re-run): the start is not replayed, the container starts anew.
    const runs = t.calls().filter((c) => c[0] === "run").length;
    const again = full("deploy", A, B, "r1:1:fwd:lane-a");
    expect(again.code, JSON.stringify(again.lines)).toBe(0);
    expect(again.lines[0]?.replayed).toBe(true);
    expect(again.lines[1]?.replayed).toBeUndefined();
    expect(t.calls().filter((c) => c[0] === "run").length).toBe(runs + 1);
    expect(t.container(containerName("lane-a", B))?.running).toBe(false);
  });

  it("a health answer carrying the instance id in its body passes; one carrying another id does not", async () => {
    // The test's server holds the port and answers for the new container by reading its id.
    const idOf = () =>
      t.container(containerName("lane-a", A))?.labels?.["baton.instance_id"] ?? "none";
    const body = join(t.dir, "holder-body");
    writeFileSync(body, `{"instance": "${"f".repeat(32)}"}`);
    const server = await holdPort(body, containerName("lane-a", A));
    t.seedRunning("lane-a", B, url);
    try {
      const other = full("deploy", A, B, "k-body", ["--health-timeout", "1"]);
      expect(other.code).toBe(1);
      expect(String(other.lines[2]?.message)).toContain("without the instance id");
      writeFileSync(body, '{"instance": "{{instance}}"}');
      const ok = full("deploy", A, B, "k-body");
      expect(ok.code, JSON.stringify(ok.lines)).toBe(0);
      expect(ok.lines[2]?.message).toContain(`answered with instance id ${idOf()}`);
    } finally {
      server.kill();
    }
  });

  it("a container with no instance id (started by hand or by an earlier deploy.sh) fails health at once, naming the fix", () => {
    // A started by hand (or by a deploy.sh from before instance ids): no instance id.
    t.seedRunning("lane-a", A, url, { instanceId: false });
    const r = full("deploy", A, B, "k-legacy", ["--health-timeout", "30"]);
    expect(r.code).toBe(1);
    expect(r.lines[1]?.message).toMatch(/already running/);
    expect(String(r.lines[2]?.message)).toMatch(/has no instance id .*remove it and deploy again/);
    // Found running, not started by this step: it is left alone.
    expect(t.container(containerName("lane-a", A))?.running).toBe(true);
  });

  it("a failed `run` removes what the runtime kept of the container (podman: Created)", () => {
    t.seedRunning("lane-a", B, url);
    // A runtime that creates the container, then fails to start it (exit 127).
    const cli = join(t.dir, "docker-failing-run");
    writeFileSync(
      cli,
      `#!/bin/sh\nif [ "$1" = run ]; then ${STANDIN_CLI} "$@" >/dev/null; echo 'Error: executable file not found in $PATH' >&2; exit 127; fi\nexec ${STANDIN_CLI} "$@"\n`,
    );
    chmodSync(cli, 0o755);
    const r = full("deploy", A, B, "k-run", [], { BATON_CONTAINER_CLI: cli });
    expect(r.code).toBe(1);
    expect(r.lines.map((l) => [l.phase, l.status])).toEqual([
      ["pull", "ok"],
      ["start", "failed"],
      ["health", "not_run"],
      ["stop-old", "not_run"],
    ]);
    expect(String(r.lines[1]?.message)).toContain("executable file not found");
    expect(t.container(containerName("lane-a", A))).toBeNull();
    expect(t.calls().at(-1)).toEqual(["rm", "-f", containerName("lane-a", A)]);
    expect(t.container(containerName("lane-a", B))?.running).toBe(true);
  });

  it("BATON_HEALTH_TARGET: url is the former name of identity; anything else is refused naming the variable", () => {
    t.seedRunning("lane-a", B, url);
    expect(
      full("deploy", A, B, "k-url", [], { BATON_HEALTH_TARGET: "url" }).lines[2]?.message,
    ).toMatch(/answered with instance id/);
    const bad = full("deploy", A, B, "k-any", [], { BATON_HEALTH_TARGET: "any" });
    expect(bad.code).toBe(2);
    expect(String(bad.lines[0]?.message)).toMatch(
      /BATON_HEALTH_TARGET must be identity .* or container/,
    );
  });

  it("F07: a failed pull leaves later phases not_run and never stops the old container", () => {
    t.seedRunning("lane-a", B, url);
    t.knob("fail-pull", "aaaa");
    const seeded = t.calls().length;
    const r = full("deploy", A, B, "r1:1:fwd:lane-a");
    expect(r.code).toBe(1);
    expect(r.lines.map((l) => [l.phase, l.status])).toEqual([
      ["pull", "failed"],
      ["start", "not_run"],
      ["health", "not_run"],
      ["stop-old", "not_run"],
    ]);
    expect(r.lines[0]?.exit_code).toBe(1);
    expect(r.lines[1]?.exit_code).toBeNull();
    expect(
      t
        .calls()
        .slice(seeded)
        .map((c) => c[0]),
    ).toEqual(["pull"]);
    expect(t.container(containerName("lane-a", B))?.running).toBe(true);
  });

  it("an unhealthy new container fails health and keeps the old one running", () => {
    t.seedRunning("lane-a", B, url);
    t.knob("fail-health", "lane-a");
    const r = full("deploy", A, B, "r1:1:fwd:lane-a", ["--health-timeout", "1"]);
    expect(r.code).toBe(1);
    expect(r.lines.map((l) => l.status)).toEqual(["ok", "ok", "failed", "not_run"]);
    expect(t.container(containerName("lane-a", B))?.running).toBe(true);
  });

  it("container mode with no address for the new container fails health with a reason (no probe was made: nothing unset under set -u)", () => {
    t.seedRunning("lane-a", B, url);
    // The stand-in has no container addresses, as a runtime under host networking answers.
    const r = full("deploy", A, B, "r1:1:fwd:lane-a", ["--health-timeout", "1"], {
      BATON_HEALTH_TARGET: "container",
    });
    expect(r.stderr).not.toMatch(/parameter not set/);
    expect(r.code).toBe(1);
    const health = r.lines.find((l) => l.phase === "health")!;
    expect(health.status).toBe("failed");
    expect(String(health.message)).toMatch(/not healthy within 1s .*no address for/);
    expect(t.container(containerName("lane-a", B))?.running).toBe(true);
  });

  it("a failed health check keeps its HTTP status and a bounded, sanitised body excerpt", () => {
    t.seedRunning("lane-a", B, url);
    t.knob("fail-health", "lane-a");
    // The stand-in answers 503 with this body (control characters and a long tail included).
    t.knob("health-body", `model not loaded: CUDA OOM\u0007\n${"x".repeat(5000)}`);
    const r = full("deploy", A, B, "r1:1:fwd:lane-a", ["--health-timeout", "1"]);
    expect(r.code).toBe(1);
    const health = r.lines.find((l) => l.phase === "health")!;
    expect(health.status).toBe("failed");
    expect(health.http_status).toBe(503);
    expect(String(health.body)).toMatch(/^model not loaded: CUDA OOM x{10}/);
    expect(String(health.body).length).toBeLessThanOrEqual(2048);
    expect([...String(health.body)].some((ch) => ch.charCodeAt(0) < 0x20)).toBe(false);
    expect(String(health.message)).toContain("503: model not loaded: CUDA OOM");
  });

  it("probes a container loading its model with backoff (0.2 s doubling up to the max) and passes once it is loaded", () => {
    t.seedRunning("lane-a", B, url);
    // Containers `run` from now on answer 503 {loading: true} for 8 s (the stand-in's knob).
    t.knob("model-load-ms", "8000");
    const r = full("deploy", A, B, "r1:1:fwd:lane-a", ["--health-timeout", "20"], {
      BATON_HEALTH_INTERVAL_MAX_S: "3",
    });
    expect(r.code).toBe(0);
    const health = r.lines.find((l) => l.phase === "health")!;
    expect(health.status).toBe("ok");
    const probes = Number(/healthy after (\d+) probe/.exec(String(health.message))?.[1]);
    // Every probe first asks the runtime whether the new container runs (so does start, once).
    const asked = t
      .calls()
      .filter(
        (c) =>
          c[0] === "inspect" &&
          c[2] === "{{.State.Running}}" &&
          c[3] === containerName("lane-a", A),
      ).length;
    expect(asked).toBe(probes + 1);
    // Waits 0.2, 0.4, 0.8, 1.6, then 3 s: 7 probes cover 8 s of loading (every 0.2 s: up to 40;
    // a slow probe only makes fewer).
    expect(probes).toBeGreaterThanOrEqual(2);
    expect(probes).toBeLessThanOrEqual(8);
    // It passed on the new container's answer, and then stopped the old one.
    expect(t.container(containerName("lane-a", A))?.running).toBe(true);
    expect(t.container(containerName("lane-a", B))?.running).toBe(false);
  });

  it("refuses a health interval it cannot read, naming the knob, before touching the lane", () => {
    for (const [knob, value] of [
      ["BATON_HEALTH_INTERVAL_MAX_S", "1s"],
      ["BATON_HEALTH_INTERVAL_S", "0"],
      ["BATON_HEALTH_INTERVAL_S", "-1"],
    ] as const) {
      const r = full("deploy", A, B, "k-interval", [], { [knob]: value });
      expect(r.code).toBe(2);
      expect(r.lines).toHaveLength(1);
      expect(r.lines[0]?.phase).toBe("args");
      expect(String(r.lines[0]?.message)).toContain(`${knob} must be seconds`);
    }
    expect(t.calls()).toEqual([]);
  });

  it("is idempotent per operation key: a repeat replays the recorded phases without doing them", () => {
    expect(full("deploy", A, B, "r1:1:fwd:lane-a").code).toBe(0);
    const before = t.calls().length;
    const again = full("deploy", A, B, "r1:1:fwd:lane-a");
    expect(again.code).toBe(0);
    expect(again.lines.every((l) => l.replayed === true)).toBe(true);
    expect(t.calls().length).toBe(before);
    // A different key is a different operation; start finds the container already running (absolute).
    const other = full("deploy", A, B, "r1:1:fwd:lane-a:x");
    expect(other.lines[1]?.message).toMatch(/already running/);
    expect(t.calls().filter((c) => c[0] === "run")).toHaveLength(1);
  });

  it("does not record failed phases, so a retry with the same key retries", () => {
    t.knob("fail-pull", "aaaa");
    expect(full("deploy", A, B, "k1").code).toBe(1);
    t.knob("fail-pull", "");
    const r = full("deploy", A, B, "k1");
    expect(r.code).toBe(0);
    expect(r.lines[0]?.replayed).toBeUndefined();
  });

  it("restore puts the previous image back under its exact name and stops the new one", () => {
    t.seedRunning("lane-a", A, url);
    const r = full("restore", B, A, "r1:1:bwd:lane-a");
    expect(r.code).toBe(0);
    expect(t.container(containerName("lane-a", B))?.running).toBe(true);
    expect(t.container(containerName("lane-a", A))?.running).toBe(false);
  });

  it("runs a single phase with --phase, and smoke checks the running container", () => {
    const r = full("deploy", A, B, "k2", ["--phase", "pull"]);
    expect(r.lines.map((l) => l.phase)).toEqual(["pull"]);
    full("deploy", A, B, "k2");
    const smoke = deploy(["smoke", "--lane", "lane-a", "--image", A, "--health-url", url]);
    expect(smoke.code).toBe(0);
    expect(smoke.lines.map((l) => [l.phase, l.status])).toEqual([
      ["running", "ok"],
      ["health", "ok"],
    ]);
    const missing = deploy([
      "smoke",
      "--lane",
      "lane-b",
      "--image",
      A,
      "--health-url",
      url,
      "--health-timeout",
      "1",
    ]);
    expect(missing.lines.map((l) => l.status)).toEqual(["failed", "not_run"]);
  });

  it("inspect (rollback prerequisites) is read-only: access, image present, capacity", () => {
    const inspect = (img: string, env: Record<string, string> = {}) =>
      deploy(["inspect", "--lane", "lane-a", "--image", img], env);
    const before = t.calls().length;
    const missing = inspect(A);
    expect(missing.code).toBe(1);
    expect(missing.lines.map((l) => [l.phase, l.status])).toEqual([
      ["access", "ok"],
      ["image", "failed"],
      ["capacity", "ok"],
    ]);
    expect(String(missing.lines[1]?.message)).toContain(`image ${A} is not on this machine`);
    // It changed nothing: only ps and image inspect were asked of the runtime.
    expect(
      t
        .calls()
        .slice(before)
        .map((c) => c[0]),
    ).toEqual(["ps", "image"]);
    t.seedRunning("lane-a", A, url);
    const present = inspect(A);
    expect(present.code).toBe(0);
    expect(present.lines.map((l) => l.status)).toEqual(["ok", "ok", "ok"]);
    expect(present.lines[2]?.free_mb).toBeGreaterThan(0);
    const full = inspect(A, { BATON_MIN_FREE_MB: "999999999" });
    expect(full.code).toBe(1);
    expect(full.lines[2]).toMatchObject({ phase: "capacity", status: "failed" });
    expect(String(full.lines[2]?.message)).toContain("less than 999999999 MB");
    expect(inspect("not-pinned").code).toBe(2);
  });

  it("refuses to act when the ledger cannot be written (idempotency would be lost)", () => {
    const blocked = deploy(
      ["deploy", "--lane", "lane-a", "--image", A, "--health-url", url, "--operation-key", "k10"],
      { BATON_LEDGER: "/proc/baton-no-ledger/ledger" },
    );
    expect(blocked.code).toBe(2);
    expect(blocked.lines).toEqual([expect.objectContaining({ phase: "ledger", status: "failed" })]);
    expect(t.calls()).toEqual([]);
  });

  it.each([
    [
      [
        "deploy",
        "--lane",
        "lane-a; rm -rf /",
        "--image",
        A,
        "--health-url",
        "http://x/",
        "--operation-key",
        "k",
      ],
      /--lane/,
    ],
    [
      [
        "deploy",
        "--lane",
        "lane-a",
        "--image",
        "acme/model:latest",
        "--health-url",
        "http://x/",
        "--operation-key",
        "k",
      ],
      /digest/,
    ],
    [
      [
        "deploy",
        "--lane",
        "lane-a",
        "--image",
        A,
        "--health-url",
        "http://x/$(id)",
        "--operation-key",
        "k",
      ],
      /--health-url/,
    ],
    [["deploy", "--lane", "lane-a", "--image", A, "--health-url", "http://x/"], /--operation-key/],
    [
      [
        "deploy",
        "--lane",
        "lane-a",
        "--image",
        A,
        "--health-url",
        "http://x/",
        "--operation-key",
        "k",
        "--phase",
        "all",
      ],
      /--phase/,
    ],
    [["launch"], /subcommand/],
  ])("refuses bad arguments with exit 2 and a JSON line naming the option (%#)", (args, re) => {
    const r = deploy(args as string[]);
    expect(r.code).toBe(2);
    expect(r.lines).toHaveLength(1);
    expect(r.lines[0]?.phase).toBe("args");
    expect(String(r.lines[0]?.message)).toMatch(re);
    expect(t.calls()).toEqual([]);
  });

  // deploy.sh checks a short value with a pattern free of counted repetitions (cheaper for
  // grep) and a long one with the protocol's pattern: each length bound holds either way.
  // Accepted: the script goes on to a phase (smoke's `running`, or a pull for the key).
  it.each([
    [
      "image name of 255 characters",
      { image: `${"a".repeat(255)}@sha256:${"a".repeat(64)}` },
      true,
    ],
    [
      "image name of 256 characters",
      { image: `${"a".repeat(256)}@sha256:${"a".repeat(64)}` },
      false,
    ],
    [
      "image tag of 128 characters",
      { image: `m:${"T".repeat(128)}@sha256:${"a".repeat(64)}` },
      true,
    ],
    [
      "image tag of 129 characters",
      { image: `m:${"T".repeat(129)}@sha256:${"a".repeat(64)}` },
      false,
    ],
    ["short image with an uppercase name", { image: `Acme/m@sha256:${"a".repeat(64)}` }, false],
    ["operation key of 512 characters", { key: "k".repeat(512) }, true],
    ["operation key of 513 characters", { key: "k".repeat(513) }, false],
    ["short operation key with a space", { key: "r1 fwd" }, false],
    ["health URL of 400 characters", { url: `http://h/${"u".repeat(391)}` }, true],
    ["health URL of 401 characters", { url: `http://h/${"u".repeat(392)}` }, false],
  ])("length bounds: %s", (_name, v: { image?: string; key?: string; url?: string }, ok) => {
    const r = v.key
      ? deploy([
          "deploy",
          "--lane",
          "lane-a",
          "--image",
          A,
          "--health-url",
          url,
          "--operation-key",
          v.key,
          "--phase",
          "pull",
        ])
      : deploy([
          "smoke",
          "--lane",
          "lane-a",
          "--image",
          v.image ?? A,
          "--health-url",
          v.url ?? url,
          "--phase",
          "running",
        ]);
    expect(r.lines[0], JSON.stringify(r.lines)).toBeDefined();
    if (ok) {
      expect(r.lines[0]?.phase).toBe(v.key ? "pull" : "running");
    } else {
      expect(r.code).toBe(2);
      expect(r.lines[0]?.phase).toBe("args");
    }
  });
});
