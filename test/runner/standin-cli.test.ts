// The stand-in container CLI answers every call a deploy makes (inspect -f of the running state or
// the image, pull, run -d, stop) in sh, without a node start: those answers, files and ledger
// lines must equal standin.cjs's own for the same state. One health server per state dir answers
// every running container's health port.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
// These tests start the stand-in's own health server on ports it is told (its lazy start and
// one-process-per-state-dir behaviour are what they check); it binds a port when a container
// registers on it and tries a taken port again at its next scan.
import { proposePort as freePort } from "../support/ports.ts";
import {
  containerName,
  image,
  makeStandinTarget,
  REPO,
  STANDIN_CLI,
  type StandinTarget,
} from "../support/standin-target.ts";

const STANDIN_JS = join(REPO, "scripts/target/standin/standin.cjs");
let t: StandinTarget;
let noNode: string;
beforeEach(() => {
  t = makeStandinTarget();
  // A PATH with the tools the sh path uses and no node: a call that needs node fails (127).
  noNode = join(t.dir, "bin-without-node");
  mkdirSync(noNode);
  for (const tool of ["date", "dirname", "od", "tr", "mv", "sleep", "setsid"]) {
    const found = spawnSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).stdout.trim();
    if (found) symlinkSync(found, join(noNode, tool));
  }
});
afterEach(() => t.cleanup());

interface Answer {
  code: number | null;
  stdout: string;
  stderr: string;
  ledger: unknown;
}

/** One call through `docker` (sh first) or straight to standin.cjs, and the ledger line it added. */
function call(how: "sh" | "js", args: string[], env: Record<string, string> = {}): Answer {
  const before = t.calls().length;
  const r =
    how === "sh"
      ? spawnSync(STANDIN_CLI, args, {
          env: { ...t.env, PATH: noNode, ...env },
          encoding: "utf8",
          timeout: 30_000,
        })
      : spawnSync(process.execPath, [STANDIN_JS, ...args], {
          env: { ...process.env, ...t.env, ...env },
          encoding: "utf8",
          timeout: 30_000,
        });
  const lines = t.calls().length;
  if (lines === before) return { code: r.status, stdout: r.stdout, stderr: r.stderr, ledger: null };
  expect(lines).toBe(before + 1);
  const last = readFileSync(join(t.standinDir, "calls.jsonl"), "utf8").trim().split("\n").at(-1);
  const { at, pid, ...rest } = JSON.parse(last ?? "{}");
  expect(typeof at).toBe("number");
  expect(Math.abs(at - Date.now())).toBeLessThan(60_000);
  expect(typeof pid).toBe("number");
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, ledger: rest };
}

// A loaded machine (load 30-40 on 2 cores) stretches each node start to seconds.
describe("stand-in docker: calls answered in sh", { timeout: 240_000 }, () => {
  it("inspect -f of the running state and the image: running, stopped, missing", async () => {
    const url = `http://127.0.0.1:${await freePort()}/healthz`;
    const A = image("a");
    const name = containerName("lane-a", A);
    t.seedRunning("lane-a", A, url);
    for (const fmt of ["{{.State.Running}}", "{{.Config.Image}}"]) {
      for (const n of [name, "baton-lane-z-000000000000"]) {
        const sh = call("sh", ["inspect", "-f", fmt, n]);
        expect(sh).toEqual(call("js", ["inspect", "-f", fmt, n]));
        expect(sh.code).toBe(n === name ? 0 : 1);
      }
    }
    expect(call("sh", ["inspect", "-f", "{{.State.Running}}", name]).stdout).toBe("true\n");
    expect(call("sh", ["inspect", "-f", "{{.Config.Image}}", name]).stdout).toBe(`${A}\n`);
    expect(call("js", ["stop", name]).code).toBe(0);
    const stopped = call("sh", ["inspect", "-f", "{{.State.Running}}", name]);
    expect(stopped).toEqual(call("js", ["inspect", "-f", "{{.State.Running}}", name]));
    expect(stopped.stdout).toBe("false\n");
  });

  it("inspect -f of a label (the instance id deploy.sh checks): present, absent, missing container", async () => {
    const url = `http://127.0.0.1:${await freePort()}/healthz`;
    const A = image("a");
    const name = containerName("lane-a", A);
    call("js", ["pull", A]);
    const id = "0123456789abcdef0123456789abcdef";
    expect(
      call("js", [
        "run",
        "-d",
        "--name",
        name,
        "--label",
        "baton.lane=lane-a",
        "--label",
        `baton.instance_id=${id}`,
        "-e",
        `BATON_HEALTH_URL=${url}`,
        A,
      ]).code,
    ).toBe(0);
    const fmt = (key: string) => `{{index .Config.Labels "${key}"}}`;
    for (const [key, n] of [
      ["baton.instance_id", name],
      ["baton.lane", name],
      ["instance_id", name],
      ["baton.instance_id", "baton-lane-z-000000000000"],
    ] as const) {
      const sh = call("sh", ["inspect", "-f", fmt(key), n]);
      expect(sh, `${key} ${n}`).toEqual(call("js", ["inspect", "-f", fmt(key), n]));
    }
    expect(call("sh", ["inspect", "-f", fmt("baton.instance_id"), name]).stdout).toBe(`${id}\n`);
    expect(call("sh", ["inspect", "-f", fmt("instance_id"), name]).stdout).toBe("");
    // The health server echoes it.
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    expect(res.headers.get("baton-instance-id")).toBe(id);
  });

  it("pull: the same image file, output and ledger line", () => {
    call("js", ["ps"]); // creates the state dir, as any first call does
    for (const ref of [image("b"), image("c", "reg.example:5000/acme/m:v1"), "plain-name"]) {
      const sh = call("sh", ["pull", ref]);
      const images = readdirSync(join(t.standinDir, "images"));
      expect(sh.code).toBe(0);
      expect(images).toContain(encodeURIComponent(ref));
      expect(
        Number(readFileSync(join(t.standinDir, "images", encodeURIComponent(ref)), "utf8")),
      ).toBeGreaterThan(0);
      expect(sh).toEqual(call("js", ["pull", ref]));
      expect(readdirSync(join(t.standinDir, "images"))).toEqual(images);
    }
  });

  it("goes to standin.cjs for a knob, an unusual argument or a first call", () => {
    // No state dir yet: standin.cjs creates it (node is needed, so PATH without node fails).
    expect(call("sh", ["pull", image("d")]).code).toBe(127);
    call("js", ["pull", image("d")]);
    expect(call("sh", ["pull", image("d")]).code).toBe(0);
    // The knobs that act on these calls are standin.cjs's.
    expect(call("sh", ["pull", image("d")], { BATON_STANDIN_FAIL_PULL: "zzz" }).code).toBe(127);
    // Other formats, names or references that need encoding or escaping, other commands.
    for (const args of [
      ["inspect", "-f", "{{.State.ExitCode}}", "x"],
      ["inspect", "x"],
      ["inspect", "-f", "{{.State.Running}}", "a b"],
      ["inspect", "-f", "{{.State.Running}}", 'x"y'],
      ["pull", "reg.example/a b"],
      ["stop", "x"],
      ["ps"],
    ])
      expect(call("sh", args).code, args.join(" ")).toBe(127);
    expect(call("sh", ["inspect", "-f", "{{.State.Running}}", "x"]).code).toBe(1);
    t.knob("hang", "ps");
    expect(call("sh", ["inspect", "-f", "{{.State.Running}}", "x"]).code).toBe(127);
  });
});

/** The health server's answer on `port`, or the connection error's code. */
async function health(port: number): Promise<{ status: number; body: unknown } | string> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/healthz`, {
      signal: AbortSignal.timeout(5000),
    });
    return { status: r.status, body: await r.json() };
  } catch (e) {
    return String((e as { cause?: { code?: string } }).cause?.code ?? e);
  }
}

/** Polls `check` every 50 ms until it holds, at most `ms`. */
async function until(check: () => boolean | Promise<boolean>, ms = 10_000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

const pidOf = (name: string) => {
  const f = join(t.standinDir, "servers", `${name}.pid`);
  return existsSync(f) ? readFileSync(f, "utf8") : null;
};

describe("stand-in docker: run -d and stop in sh, one health server per state dir", {
  timeout: 240_000,
}, () => {
  it("run -d: the same container file, id, ledger line; every port served by one process", async () => {
    const A = image("a");
    const [p1, p2] = [await freePort(), await freePort()];
    const runArgs = (lane: string, port: number) => [
      "run",
      "-d",
      "--name",
      containerName(lane, A),
      "--label",
      `baton.lane=${lane}`,
      "--label",
      "baton.operation_key=r1:3:fwd:lane-a=x+y",
      "-e",
      `BATON_HEALTH_URL=http://127.0.0.1:${port}/healthz`,
      "--gpus",
      "all",
      A,
    ];
    call("js", ["pull", A]);
    // standin.cjs starts the state dir's health server; the sh run (no node on PATH) uses it.
    const js = call("js", runArgs("lane-j", p1));
    const sh = call("sh", runArgs("lane-s", p2));
    for (const [r, lane] of [
      [js, "lane-j"],
      [sh, "lane-s"],
    ] as const) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(
        `${Buffer.from(containerName(lane, A)).toString("hex").padEnd(64, "0").slice(0, 64)}\n`,
      );
    }
    // Same ledger line and file but for the lane, its name, its port and the time.
    const swap = (x: unknown) =>
      JSON.parse(JSON.stringify(x).replaceAll("lane-j", "lane-s").replaceAll(`:${p1}/`, `:${p2}/`));
    expect(sh.ledger).toEqual(swap(js.ledger));
    const file = (lane: string) =>
      readFileSync(
        join(t.standinDir, "containers", `${containerName(lane, A)}.json`),
        "utf8",
      ).replace(/"started_at":\d+/, '"started_at":0');
    expect(file("lane-s")).toBe(
      file("lane-j")
        .replaceAll("lane-j", "lane-s")
        .replace(`"port":${p1}`, `"port":${p2}`)
        .replace(`:${p1}/`, `:${p2}/`),
    );
    // Both ports answer, from one process: the state dir's health server.
    expect(await health(p1)).toEqual({
      status: 200,
      body: { container: containerName("lane-j", A), image: A, lane: "lane-j", healthy: true },
    });
    expect(await health(p2)).toEqual({
      status: 200,
      body: { container: containerName("lane-s", A), image: A, lane: "lane-s", healthy: true },
    });
    const daemon = pidOf("daemon");
    expect(daemon).toMatch(/^\d+$/);
    expect([pidOf(String(p1)), pidOf(String(p2))]).toEqual([daemon, daemon]);
    // The fail-health file still acts per request.
    t.knob("fail-health", "lane-s");
    expect(await health(p2)).toMatchObject({ status: 503, body: { healthy: false } });
    expect(await health(p1)).toMatchObject({ status: 200 });

    // stop: same output, ledger line and file (but the time); the port closes, then the server
    // exits once no container runs.
    const jsStop = call("js", ["stop", containerName("lane-j", A)]);
    const shStop = call("sh", ["stop", containerName("lane-s", A)]);
    expect(shStop.code).toBe(0);
    expect(shStop.stdout).toBe(`${containerName("lane-s", A)}\n`);
    expect(shStop.ledger).toEqual(swap(jsStop.ledger));
    const stopped = (lane: string) => file(lane).replace(/"stopped_at":\d+/, '"stopped_at":0');
    expect(stopped("lane-s")).toBe(
      stopped("lane-j")
        .replaceAll("lane-j", "lane-s")
        .replace(`"port":${p1}`, `"port":${p2}`)
        .replace(`:${p1}/`, `:${p2}/`),
    );
    expect(JSON.parse(file("lane-s"))).toMatchObject({ running: false });
    expect(await until(async () => typeof (await health(p2)) === "string")).toBe(true);
    expect(await until(() => pidOf("daemon") === null)).toBe(true);
    expect(await until(() => !existsSync(`/proc/${daemon}`))).toBe(true);
  });

  it("model-load-ms: a container run from then on answers 503 loading, then 200 (sh and js)", async () => {
    const L = image("e");
    const [p1, p2] = [await freePort(), await freePort()];
    call("js", ["pull", L]);
    t.knob("model-load-ms", "1500\n");
    const args = (lane: string, port: number) => [
      "run",
      "-d",
      "--name",
      containerName(lane, L),
      "--label",
      `baton.lane=${lane}`,
      "-e",
      `BATON_HEALTH_URL=http://127.0.0.1:${port}/healthz`,
      L,
    ];
    expect(call("js", args("lane-j", p1)).code).toBe(0);
    expect(call("sh", args("lane-s", p2)).code).toBe(0);
    for (const [lane, port] of [
      ["lane-j", p1],
      ["lane-s", p2],
    ] as const) {
      const c = t.container(containerName(lane, L)) as unknown as Record<string, number>;
      expect((c.ready_at ?? 0) - (c.started_at ?? 0)).toBe(1500);
      expect(Object.keys(c)).toEqual([
        "name",
        "image",
        "lane",
        "labels",
        "health_url",
        "port",
        "running",
        "started_at",
        "ready_at",
        "fail_health",
      ]);
      // Loading (unless this loaded machine took 1.5 s to get here), then healthy.
      const ready = c.ready_at ?? 0;
      const first = await health(port);
      if (Date.now() < ready - 200)
        expect(first).toMatchObject({ status: 503, body: { healthy: false, loading: true } });
      expect(
        await until(async () => ((await health(port)) as { status: number }).status === 200),
      ).toBe(true);
      expect(Date.now()).toBeGreaterThanOrEqual(ready);
    }
  });

  it("a second health server start while one serves the state dir leaves at once", async () => {
    const B = image("b");
    const port = await freePort();
    t.seedRunning("lane-b", B, `http://127.0.0.1:${port}/healthz`);
    expect(await health(port)).toMatchObject({ status: 200 });
    const daemon = pidOf("daemon");
    // Another start while it lives: it leaves, the first keeps serving.
    const again = spawnSync(
      process.execPath,
      [join(REPO, "scripts/target/standin/health-server.cjs"), t.standinDir],
      { timeout: 30_000 },
    );
    expect(again.status).toBe(0);
    expect(pidOf("daemon")).toBe(daemon);
    expect(await health(port)).toMatchObject({ status: 200 });
  });

  it("goes to standin.cjs for what it does not answer itself", () => {
    const C = image("c");
    call("js", ["pull", C]);
    const url = "BATON_HEALTH_URL=http://127.0.0.1:1/healthz";
    for (const [args, env] of [
      [["run", "--name", "n1", "--label", "baton.lane=l", "-e", url, C], {}], // attached
      [["run", "-d", "--label", "baton.lane=l", "-e", url, C], {}], // no name
      [["run", "-d", "--name", "n2", "-e", url, C], {}], // no lane label
      [["run", "-d", "--name", "n3", "--label", "baton.lane=l", "-e", url, image("d")], {}], // not pulled
      [
        [
          "run",
          "-d",
          "--name",
          "n4",
          "--label",
          "baton.lane=l",
          "--label",
          "baton.lane=m",
          "-e",
          url,
          C,
        ],
        {},
      ],
      [
        [
          "run",
          "-d",
          "--name",
          "n5",
          "--label",
          "baton.lane=l",
          "-e",
          "BATON_HEALTH_URL=unix:/x",
          C,
        ],
        {},
      ],
      [
        ["run", "-d", "--name", "n6", "--label", "baton.lane=l", "-e", url, C],
        { BATON_STANDIN_FAIL_HEALTH: "l" },
      ],
      [["stop", "missing"], {}],
      [["stop", "-t", "1", "x"], {}],
    ] as [string[], Record<string, string>][])
      expect(call("sh", args, env).code, args.join(" ")).toBe(127);
  });
});
