// The stand-in container CLI answers its most frequent calls (inspect -f of the running state or
// the image, pull) in sh, without a node start: those answers, files and ledger lines must equal
// standin.cjs's own for the same state.
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { freePort } from "../support/sshd.ts";
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
  for (const tool of ["date", "dirname"]) {
    const found = spawnSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).stdout.trim();
    symlinkSync(found, join(noNode, tool));
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

describe("stand-in docker: calls answered in sh", () => {
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
