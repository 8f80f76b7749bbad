// F09 (key formats) and F10 (pasted key text) through the bundled action, plus the other two
// tools (run-smoke, restore-queue-lane) end to end over SSH.

import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { payloadDigestOf } from "../../engine/src/protocol/payload-digest.ts";
import { callbacksOf, type Fixture, startFixture } from "../support/action-fixture.ts";
import { generateKey, sharedTempDir } from "../support/sshd.ts";
import { containerName, DEPLOY_SH, REPO } from "../support/standin-target.ts";

let f: Fixture;
let keys: string;
beforeAll(async () => {
  f = await startFixture();
  keys = sharedTempDir("baton-action-keys-");
});
afterAll(async () => {
  await f?.close();
  if (keys) rmSync(keys, { recursive: true, force: true });
});
afterEach(() => {
  expect(f.keyDirs()).toEqual([]);
});

type Checks = { name: string; status: string; class?: string }[];

/** A step run for run-smoke against a lane already running its image. */
async function smokeRun() {
  const s = await f.stepRun({ tool: "run-smoke" });
  f.target.seedRunning(s.lane, s.img, s.healthUrl);
  return s;
}

const inputs = (key: string, extra: Record<string, string> = {}) => ({
  "engine-url": f.engine.url,
  "callback-secret": f.engine.secret,
  "ssh-key": key,
  ...extra,
});

describe("F09: private key formats through the action", () => {
  it("(b) ed25519 OpenSSH without passphrase and (c) RSA PEM connect; an encrypted key with its passphrase connects", async () => {
    const [ed, edPub] = generateKey(keys, "ed_b");
    const [rsa, rsaPub] = generateKey(keys, "rsa_c", "rsa", { pem: true });
    const [enc, encPub] = generateKey(keys, "ed_pw", "ed25519", {
      passphrase: "s3cret-passphrase",
    });
    for (const p of [edPub, rsaPub, encPub]) f.sshd.authorize(p);
    for (const [path, extra] of [
      [ed, {}],
      [rsa, {}],
      [enc, { "ssh-passphrase": "s3cret-passphrase" }],
    ] as const) {
      const { payload } = await smokeRun();
      const r = await f.run(payload, { inputs: inputs(readFileSync(path, "utf8"), extra) });
      expect(r.main.code, r.main.stdout).toBe(0);
      expect(r.outputs.overall).toBe("pass");
      if ("ssh-passphrase" in extra) {
        expect(r.main.stdout).toContain("::add-mask::s3cret-passphrase");
        expect(r.main.stdout.replace(/::add-mask::.*\n/g, "")).not.toContain("s3cret-passphrase");
      }
    }
  });

  it("(a) encrypted ed25519 without passphrase: class key_encrypted_no_passphrase before any connection, callback sent, key removed", async () => {
    const [enc, encPub] = generateKey(keys, "ed_a", "ed25519", {
      passphrase: "another-passphrase",
    });
    f.sshd.authorize(encPub);
    const { payload } = await smokeRun();
    const logBefore = readFileSync(f.sshd.logFile, "utf8").length;
    const key = readFileSync(enc, "utf8");
    const r = await f.run(payload, { inputs: inputs(key) });
    expect(r.main.code).toBe(1);
    const body = callbacksOf(f.engine, payload.step_run_id)[0]?.body as Record<string, unknown>;
    expect(body).toMatchObject({ status: "failed", overall: "fail" });
    expect((body.checks as Checks)[0]).toMatchObject({
      name: "ssh-key",
      status: "failed",
      class: "key_encrypted_no_passphrase",
    });
    expect(readFileSync(f.sshd.logFile, "utf8").slice(logBefore)).not.toMatch(/Connection from/);
    // No line of the key appears anywhere but in the mask commands, nor in the callback.
    const visible = `${r.main.stdout.replace(/::add-mask::.*\n/g, "")}${r.post?.stdout}${JSON.stringify(body)}`;
    for (const line of key.split("\n").filter((l) => l.length > 20))
      expect(visible).not.toContain(line);
  });
});

describe("F10: pasted key text", () => {
  const variants: [string, (k: string) => string][] = [
    ["CRLF line endings", (k) => k.replace(/\n/g, "\r\n")],
    ["no trailing newline", (k) => k.trimEnd()],
    ["surrounding spaces and blank lines", (k) => `\n   ${k.trimEnd()}   \n\n`],
  ];
  it.each(variants)(
    "%s: the key file is LF, one trailing newline, 0600; it connects; every line masked",
    async (_n, mangle) => {
      const original = f.sshd.clientKey;
      const pasted = mangle(original);
      // A tool that records the key file it was given, then runs nothing.
      const ws = f.workspaceWithTool(
        [
          "#!/bin/sh",
          'while [ $# -gt 0 ]; do case "$1" in --key) k="$2";; --result-dir) d="$2";; esac; shift 2; done',
          'stat -c %a "$k" > "$d/../key-mode"; cp "$k" "$d/../key-copy"',
          'echo succeeded > "$d/status"; echo pass > "$d/overall"',
        ].join("\n"),
      );
      const { payload } = await f.stepRun();
      const r = await f.run(payload, {
        workspace: ws,
        inputs: inputs(pasted, { allowlist: "allowlist.json" }),
      });
      expect(r.main.code).toBe(0);
      const attemptDir = `${JSON.parse(r.state.callback as string).result_dir}/..`;
      expect(readFileSync(`${attemptDir}/key-mode`, "utf8").trim()).toBe("600");
      const written = readFileSync(`${attemptDir}/key-copy`, "utf8");
      expect(written).toBe(original);
      expect(written).not.toContain("\r");
      expect(written.endsWith("\n") && !written.endsWith("\n\n")).toBe(true);
      for (const line of original.split("\n").filter(Boolean))
        expect(r.main.stdout).toContain(`::add-mask::${line}`);
      // And the same pasted text really connects.
      const smoke = await smokeRun();
      const ok = await f.run(smoke.payload, { inputs: inputs(pasted) });
      expect(ok.main.code, ok.main.stdout).toBe(0);
      expect(statSync(attemptDir).isDirectory()).toBe(true);
    },
  );
});

describe("the other tools end to end", () => {
  it("run-smoke fails when the lane's container is not running", async () => {
    const { payload } = await f.stepRun({ tool: "run-smoke" });
    const r = await f.run(payload);
    expect(r.main.code).toBe(1);
    const checks = callbacksOf(f.engine, payload.step_run_id)[0]?.body.checks as Checks;
    expect(checks.map((c) => [c.name, c.status])).toEqual([
      ["connect", "ok"],
      ["running", "failed"],
      ["health", "not_run"],
    ]);
  });

  it("restore-queue-lane puts the previous image back and stops the new one by exact name", async () => {
    const s = await f.stepRun({ tool: "restore-queue-lane" });
    // The forward step left `img` running; the backward step's args name the image to restore.
    f.target.seedRunning(s.lane, s.img, s.healthUrl);
    const args = s.payload.args as { image: string; previous_image: string };
    args.image = s.prev;
    args.previous_image = s.img;
    f.engine.setPayloadDigest(s.payload.step_run_id, payloadDigestOf(s.payload));
    const r = await f.run(s.payload);
    expect(r.main.code, r.main.stdout).toBe(0);
    expect(f.target.container(containerName(s.lane, s.prev))?.running).toBe(true);
    expect(f.target.container(containerName(s.lane, s.img))?.running).toBe(false);
  });

  it("a bundled tool copied away from the repo (no node_modules anywhere above it) still runs", async () => {
    const s = await smokeRun();
    const d = sharedTempDir("baton-nomods-");
    try {
      const tool = join(d, "run-smoke.mjs");
      copyFileSync(join(REPO, "scripts/release/dist/run-smoke.mjs"), tool);
      chmodSync(tool, 0o755);
      writeFileSync(join(d, "args.json"), JSON.stringify(s.payload.args));
      writeFileSync(join(d, "key"), f.sshd.clientKey, { mode: 0o600 });
      const r = spawnSync(
        tool,
        [
          "--args",
          join(d, "args.json"),
          "--key",
          join(d, "key"),
          "--result-dir",
          d,
          "--operation-key",
          "k1",
        ],
        {
          cwd: d,
          env: { PATH: process.env.PATH, BATON_DEPLOY_SCRIPT: DEPLOY_SH },
          encoding: "utf8",
          timeout: 60_000,
        },
      );
      expect(r.status, r.stderr).toBe(0);
      expect(readFileSync(join(d, "overall"), "utf8").trim()).toBe("pass");
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });
});
