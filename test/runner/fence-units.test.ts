// The tool side of the generation fence, pure parts: the release stamp from flags or env, the
// remote command that carries it to deploy.sh, and deploy.sh's refusal turned into a check.
import { describe, expect, it } from "vitest";
import { phaseCheck, remoteCommand } from "../../scripts/lib/deploy-tool.ts";
import type { ExecResult } from "../../scripts/lib/ssh.ts";
import { parseToolCli } from "../../scripts/lib/tool-args.ts";

const base = ["--args", "a.json", "--key", "k", "--result-dir", "d", "--operation-key", "r1:2:f"];
const args = {
  lane: {
    id: "lane-a",
    host: "h",
    port: 22,
    user: "deploy",
    host_key: "x",
    health_url: "http://127.0.0.1:1/h",
  },
  image: `a/b@sha256:${"1".repeat(64)}`,
};
const exec = (stdout: string, exit_code: number | null): ExecResult => ({
  exit_code,
  signal: null,
  stdout,
  stderr: "",
  timed_out: false,
  duration_ms: 4,
});

describe("release stamp on the tool command line", () => {
  it("is absent when neither flags nor env give one (the documented command line unchanged)", () => {
    expect(parseToolCli(base, {}).release).toBeUndefined();
  });
  it("comes from env BATON_RELEASE_ID / BATON_RELEASE_GENERATION (how the action passes it)", () => {
    const env = { BATON_RELEASE_ID: "r12", BATON_RELEASE_GENERATION: "3" };
    expect(parseToolCli(base, env).release).toEqual({ id: "r12", generation: 3 });
  });
  it("flags win over env", () => {
    const env = { BATON_RELEASE_ID: "r12", BATON_RELEASE_GENERATION: "3" };
    const cli = parseToolCli([...base, "--release-id", "r13", "--generation", "0"], env);
    expect(cli.release).toEqual({ id: "r13", generation: 0 });
  });
  it.each([
    [{ BATON_RELEASE_ID: "r12" }, /--generation \(or BATON_RELEASE_GENERATION\)/],
    [{ BATON_RELEASE_GENERATION: "2" }, /--release-id \(or BATON_RELEASE_ID\)/],
    [{ BATON_RELEASE_ID: "r12", BATON_RELEASE_GENERATION: "02" }, /leading zeros/],
    [{ BATON_RELEASE_ID: "r12", BATON_RELEASE_GENERATION: "1e3" }, /whole number/],
    [{ BATON_RELEASE_ID: "r1 2", BATON_RELEASE_GENERATION: "1" }, /release id/],
  ])("refuses %j with an error naming the field", (env, re) => {
    expect(() => parseToolCli(base, env)).toThrow(re);
    expect(() => parseToolCli(base, env)).toThrow(/^\[tool\]/);
  });
});

describe("remoteCommand with a release stamp", () => {
  const stamp = { id: "r12", generation: 4 };
  it("deploy and restore pass --release and --generation to deploy.sh", () => {
    for (const sub of ["deploy", "restore"] as const) {
      const cmd = remoteCommand(
        { name: "t", subcommand: sub, phases: [] },
        "deploy.sh",
        args,
        "r12:2:bwd:lane-a",
        "start",
        undefined,
        stamp,
      );
      expect(cmd).toContain("'--release' 'r12' '--generation' '4' '--phase' 'start'");
    }
  });
  it("smoke is a read: no stamp", () => {
    const cmd = remoteCommand(
      { name: "t", subcommand: "smoke", phases: [] },
      "deploy.sh",
      args,
      "k",
      "running",
      undefined,
      stamp,
    );
    expect(cmd).not.toContain("--release");
  });
});

describe("phaseCheck of a refusal before the phase ran", () => {
  const fence =
    '{"phase":"fence","status":"refused","exit_code":3,"duration_ms":0,"message":"[deploy.sh] release r12 generation 1 is stale"}\n';
  it("a fence refusal is a failed check of class stale_generation with deploy.sh's message", () => {
    expect(phaseCheck("start", exec(fence, 3))).toMatchObject({
      name: "start",
      status: "failed",
      class: "stale_generation",
      exit_code: 3,
      remote_exit_code: 3,
      message: "[deploy.sh] release r12 generation 1 is stale",
    });
  });
  it("never passes, even with exit 0", () => {
    expect(phaseCheck("start", exec(fence, 0)).status).toBe("failed");
  });
  it("a busy lane lock is class lane_busy", () => {
    const lock =
      '{"phase":"lock","status":"failed","exit_code":1,"duration_ms":0,"message":"[deploy.sh] lane lane-a is busy"}\n';
    expect(phaseCheck("pull", exec(lock, 1))).toMatchObject({
      status: "failed",
      class: "lane_busy",
    });
  });
  it("the phase's own line wins over an earlier fence line", () => {
    const own =
      '{"phase":"start","status":"ok","exit_code":0,"duration_ms":2,"message":"started"}\n';
    expect(phaseCheck("start", exec(fence + own, 0)).status).toBe("ok");
  });
});
