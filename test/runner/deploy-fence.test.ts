// deploy.sh's generation fence (docs/state-machine.md rule 7), run by dash (`sh`) against the stand-in
// container CLI: a runner that outlived its callback deadline must not land its forward deploy
// after the compensating restore (newer generation) of the same lane. Also the lane lock that
// makes "ledger, fence, phase" one step with respect to other writers on the lane.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  containerName,
  DEPLOY_SH,
  image,
  makeStandinTarget,
  type StandinTarget,
} from "../support/standin-target.ts";

let t: StandinTarget;
let url: string;
beforeEach(async () => {
  t = makeStandinTarget();
  url = await t.healthUrl();
});
afterEach(() => t.cleanup());

const NEW = image("a");
const OLD = image("b");

type Line = Record<string, unknown>;
function sh(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync("sh", [DEPLOY_SH, ...args], {
    env: { ...process.env, ...t.env, ...env },
    encoding: "utf8",
    // Generous: each call starts containers and probes health; a loaded machine is slow.
    timeout: 120_000,
  });
  const lines = r.stdout
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line);
  return { code: r.status, lines, stderr: r.stderr };
}

/** deploy/restore on `lane` as release `rel` at `gen` (forward: NEW over OLD; restore: OLD over NEW). */
function op(
  sub: "deploy" | "restore",
  o: {
    gen: number | string;
    key: string;
    lane?: string;
    rel?: string;
    extra?: string[];
    url?: string;
  },
  env: Record<string, string> = {},
) {
  const [img, prev] = sub === "deploy" ? [NEW, OLD] : [OLD, NEW];
  return sh(
    [
      sub,
      "--lane",
      o.lane ?? "lane-a",
      "--image",
      img,
      "--previous-image",
      prev,
      "--health-url",
      o.url ?? url,
      "--operation-key",
      o.key,
      "--release",
      o.rel ?? "r7",
      "--generation",
      String(o.gen),
      ...(o.extra ?? []),
    ],
    env,
  );
}

const ledger = () => (existsSync(t.ledger) ? readFileSync(t.ledger, "utf8") : "");
const running = (lane: string, img: string) => t.container(containerName(lane, img))?.running;

describe("deploy.sh generation fence", { timeout: 300_000 }, () => {
  it("refuses a generation-1 deploy after the generation-2 restore: lane keeps the restored image, ledger unchanged", () => {
    t.seedRunning("lane-a", NEW, url); // the forward deploy had landed before the runner went silent
    const restore = op("restore", { gen: 2, key: "r7:3:bwd:lane-a" });
    expect(restore.code).toBe(0);
    expect(running("lane-a", OLD)).toBe(true);
    expect(running("lane-a", NEW)).toBe(false);
    const ledgerBefore = ledger();
    const callsBefore = t.calls().length;

    const late = op("deploy", { gen: 1, key: "r7:3:fwd:lane-a" });
    expect(late.code).toBe(3);
    expect(late.lines).toHaveLength(1);
    expect(late.lines[0]).toMatchObject({ phase: "fence", status: "refused", exit_code: 3 });
    const msg = String(late.lines[0]?.message);
    expect(msg).toMatch(/^\[deploy\.sh\] release r7 generation 1 is stale/);
    expect(msg).toMatch(/generation 2/);
    expect(msg).toMatch(/Do not retry/);
    expect(t.calls().length).toBe(callsBefore); // not even a pull
    expect(ledger()).toBe(ledgerBefore);
    expect(running("lane-a", OLD)).toBe(true);
    expect(running("lane-a", NEW)).toBe(false);
    expect(readFileSync(`${t.ledger}.gen-lane-a`, "utf8")).toBe("r7\t2\n");
  });

  it("refuses each single --phase call of the stale writer, also after it did some phases before the restore", () => {
    // The late runner pulled (gen 1) before compensation began; its next phase comes after.
    expect(op("deploy", { gen: 1, key: "r7:3:fwd:lane-a", extra: ["--phase", "pull"] }).code).toBe(
      0,
    );
    expect(op("restore", { gen: 2, key: "r7:3:bwd:lane-a" }).code).toBe(0);
    const ledgerBefore = ledger();
    for (const phase of ["start", "health", "stop-old"]) {
      const r = op("deploy", { gen: 1, key: "r7:3:fwd:lane-a", extra: ["--phase", phase] });
      expect(r.code).toBe(3);
      expect(r.lines.map((l) => [l.phase, l.status])).toEqual([["fence", "refused"]]);
    }
    // A whole-run repeat of the key is refused too: start..stop-old would be new effects.
    expect(op("deploy", { gen: 1, key: "r7:3:fwd:lane-a" }).lines[0]?.phase).toBe("fence");
    expect(ledger()).toBe(ledgerBefore);
    expect(t.calls().filter((c) => c[0] === "run")).toHaveLength(1); // the restore's only
    expect(running("lane-a", OLD)).toBe(true);
    // ...but the phase it did complete before is still answered from the ledger (a replay).
    const pull = op("deploy", { gen: 1, key: "r7:3:fwd:lane-a", extra: ["--phase", "pull"] });
    expect(pull.code).toBe(0);
    expect(pull.lines).toEqual([expect.objectContaining({ phase: "pull", replayed: true })]);
  });

  it("ledger first, then fence: a replay of an applied key from the older generation gets its recorded result", () => {
    const first = op("deploy", { gen: 1, key: "r7:3:fwd:lane-a" });
    expect(first.code).toBe(0);
    expect(op("restore", { gen: 2, key: "r7:3:bwd:lane-a" }).code).toBe(0);
    const calls = t.calls().length;
    const ledgerBefore = ledger();
    const replay = op("deploy", { gen: 1, key: "r7:3:fwd:lane-a" });
    expect(replay.code).toBe(0);
    expect(replay.lines.map((l) => [l.phase, l.status, l.replayed])).toEqual([
      ["pull", "ok", true],
      ["start", "ok", true],
      ["health", "ok", true],
      ["stop-old", "ok", true],
    ]);
    expect(t.calls().length).toBe(calls); // nothing done again
    expect(ledger()).toBe(ledgerBefore);
    expect(running("lane-a", OLD)).toBe(true); // the restore stands
    expect(running("lane-a", NEW)).toBe(false);
  });

  it("accepts the same or a newer generation, and keeps the highest one seen", () => {
    expect(op("deploy", { gen: 2, key: "k-a" }).code).toBe(0);
    expect(op("restore", { gen: 2, key: "k-b" }).code).toBe(0); // same generation: not stale
    expect(op("deploy", { gen: 5, key: "k-c" }).code).toBe(0);
    expect(op("restore", { gen: 4, key: "k-d" }).lines[0]).toMatchObject({
      phase: "fence",
      status: "refused",
    });
    expect(readFileSync(`${t.ledger}.gen-lane-a`, "utf8")).toBe("r7\t5\n");
  });

  it("other releases and other lanes are unaffected", async () => {
    expect(op("restore", { gen: 9, key: "r7:3:bwd:lane-a" }).code).toBe(0);
    // Another release on the same lane starts from generation 0.
    const other = op("deploy", { gen: 0, key: "r8:3:fwd:lane-a", rel: "r8" });
    expect(other.code).toBe(0);
    expect(other.lines.map((l) => l.phase)).toEqual(["pull", "start", "health", "stop-old"]);
    // The same release on another lane has its own record. (Its own port too: one port answers
    // for one container, and the health check would rightly refuse lane-b's answer for lane-a.)
    const urlB = await t.healthUrl();
    const b = op("deploy", { gen: 1, key: "r7:3:fwd:lane-b", lane: "lane-b", url: urlB });
    expect(b.code).toBe(0);
    expect(readFileSync(`${t.ledger}.gen-lane-a`, "utf8")).toBe("r7\t9\nr8\t0\n");
    expect(readFileSync(`${t.ledger}.gen-lane-b`, "utf8")).toBe("r7\t1\n");
    // Without --release/--generation (a manual run) there is no fence.
    const manual = sh([
      "deploy",
      "--lane",
      "lane-a",
      "--image",
      NEW,
      "--health-url",
      url,
      "--operation-key",
      "manual-1",
    ]);
    expect(manual.code).toBe(0);
  });

  it.each([
    [["--release", "r7"], /--generation/],
    [["--generation", "2"], /--release/],
    [["--release", "r7", "--generation", "02"], /--generation/],
    [["--release", "r7", "--generation", "-1"], /--generation/],
    [["--release", "r7;id", "--generation", "1"], /--release/],
  ])("refuses a half or malformed stamp %j with exit 2 before touching anything", (extra, re) => {
    const r = sh([
      "deploy",
      "--lane",
      "lane-a",
      "--image",
      NEW,
      "--health-url",
      url,
      "--operation-key",
      "k",
      ...extra,
    ]);
    expect(r.code).toBe(2);
    expect(r.lines).toEqual([expect.objectContaining({ phase: "args", status: "failed" })]);
    expect(String(r.lines[0]?.message)).toMatch(re);
    expect(t.calls()).toEqual([]);
    expect(existsSync(`${t.ledger}.gen-lane-a`)).toBe(false);
  });

  it("fails closed when the generation record is not a readable file (the fence would be lost)", () => {
    // A directory where the record file should be (`mv` would move the new record into it).
    mkdirSync(`${t.ledger}.gen-lane-a/x`, { recursive: true });
    const r = op("deploy", { gen: 1, key: "k" });
    expect(r.code).toBe(2);
    expect(r.lines).toEqual([expect.objectContaining({ phase: "fence", status: "failed" })]);
    expect(String(r.lines[0]?.message)).toMatch(/cannot read .*\.gen-lane-a/);
    expect(t.calls()).toEqual([]);
    expect(ledger()).toBe("");
    expect(existsSync(`${t.ledger}.lock-lane-a`)).toBe(false);
  });
});

describe("deploy.sh lane lock", { timeout: 300_000 }, () => {
  it("a restore waits for a deploy phase in progress on the same lane, then the stale rest is refused", async () => {
    // The late forward's start hangs (docker run not back yet) while compensation begins.
    t.knob("hang", "run");
    const started = spawn(
      "sh",
      [
        DEPLOY_SH,
        "deploy",
        "--lane",
        "lane-a",
        "--image",
        NEW,
        "--previous-image",
        OLD,
        "--health-url",
        url,
        "--operation-key",
        "r7:3:fwd:lane-a",
        "--release",
        "r7",
        "--generation",
        "1",
        "--phase",
        "start",
      ],
      { env: { ...process.env, ...t.env, BATON_STANDIN_HANG_S: "3" }, stdio: "ignore" },
    );
    try {
      await waitFor(() => t.calls().some((c) => c[0] === "run"));
      t.knob("hang", "");
      const restore = op("restore", { gen: 2, key: "r7:3:bwd:lane-a" });
      expect(restore.code).toBe(0);
      expect(await exitOf(started)).toBe(0);
      // The stand-in records `run` when it is called and again when it returns: the restore's
      // first effect came only after the forward start had returned (the lane lock was held).
      const order = t.calls().map((c) => `${c[0]}:${c.at(-1)}`);
      const fwdRunReturned = order.lastIndexOf(`run:${NEW}`);
      expect(order.indexOf(`run:${NEW}`)).toBeLessThan(fwdRunReturned);
      expect(order.indexOf(`pull:${OLD}`)).toBeGreaterThan(fwdRunReturned);
      expect(running("lane-a", NEW)).not.toBe(true);
      expect(running("lane-a", OLD)).toBe(true);
      const late = op("deploy", { gen: 1, key: "r7:3:fwd:lane-a", extra: ["--phase", "health"] });
      expect(late.lines[0]?.phase).toBe("fence");
    } finally {
      started.kill("SIGKILL");
    }
  });

  it("a lock left by a killed deploy (dead pid) is broken; a live owner past the wait is reported busy", () => {
    writeFileSync(`${t.ledger}.lock-lane-a`, "999999999\n");
    expect(op("deploy", { gen: 1, key: "k1" }).code).toBe(0);
    expect(existsSync(`${t.ledger}.lock-lane-a`)).toBe(false); // released at exit
    writeFileSync(`${t.ledger}.lock-lane-a`, `${process.pid}\n`);
    const busy = op("deploy", { gen: 1, key: "k2" }, { BATON_LANE_LOCK_WAIT_S: "1" });
    expect(busy.code).toBe(1);
    expect(busy.lines).toEqual([expect.objectContaining({ phase: "lock", status: "failed" })]);
    expect(String(busy.lines[0]?.message)).toMatch(/lane lane-a is busy.*pid \d+/);
  });
});

it("deploy.sh says so at once when the lane lock cannot be created with ln (no hard links)", () => {
  const bin = `${t.dir}/fakebin`;
  mkdirSync(bin);
  writeFileSync(`${bin}/ln`, "#!/bin/sh\nexit 1\n", { mode: 0o755 });
  const r = op("deploy", { gen: 1, key: "k" }, { PATH: `${bin}:${process.env.PATH}` });
  expect(r.code).toBe(2);
  expect(r.lines).toEqual([expect.objectContaining({ phase: "lock", status: "failed" })]);
  expect(String(r.lines[0]?.message)).toMatch(/hard links/);
  expect(t.calls()).toEqual([]);
});

async function waitFor(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("condition not met within 10 s");
}

function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((r) => child.on("exit", (code) => r(code)));
}
