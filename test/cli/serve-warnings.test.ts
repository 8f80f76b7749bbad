/**
 * `baton serve` with the local dispatcher (the default) and no BATON_SSH_KEY_FILE: the runner's
 * steps cannot reach a machine, so start-up says so in one warning line naming what will fail
 * and what to set. With a key file (or the github dispatcher) there is no such line.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { serveBin } from "./run-baton.ts";

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Starts `baton serve` with `extra` env; resolves with its output once it listens (bounded: 60 s), then stops it. */
async function startOutput(
  extra: Record<string, string>,
): Promise<{ stderr: string; output: string }> {
  const data = mkdtempSync(path.join(tmpdir(), "baton-warn-"));
  dirs.push(data);
  const s = await serveBin(
    {
      BATON_DATA_DIR: data,
      BATON_CALLBACK_SECRETS: "warn-test-secret-0123456789",
      BATON_OPERATOR_TOKEN: "warn-operator-token-0123",
      BATON_ADMISSION: "off",
      ...extra,
    },
    { cwd: data },
  );
  children.push(s.child);
  s.child.kill("SIGTERM");
  await s.exited;
  return { stderr: s.stderr(), output: s.output() };
}

it("local dispatcher without BATON_SSH_KEY_FILE: one warning line naming what fails and what to set", async () => {
  const keyDir = mkdtempSync(path.join(tmpdir(), "baton-warn-key-"));
  dirs.push(keyDir);
  const keyFile = path.join(keyDir, "id_ed25519");
  writeFileSync(
    keyFile,
    "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-used\n-----END OPENSSH PRIVATE KEY-----\n",
    {
      mode: 0o600,
    },
  );
  const [bare, withKey, github] = await Promise.all([
    startOutput({}),
    startOutput({ BATON_SSH_KEY_FILE: keyFile }),
    startOutput({
      BATON_DISPATCHER: "github",
      GITHUB_REPOSITORY: "acme/models",
      GITHUB_TOKEN: "not-used-in-this-test",
    }),
  ]);
  const lines = bare.stderr.split("\n").filter((l) => l.includes("BATON_SSH_KEY_FILE"));
  expect(lines, bare.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^\[engine\] warning: /);
  expect(lines[0]).toMatch(/local dispatcher/);
  expect(lines[0]).toMatch(/runner step.*will fail/);
  expect(lines[0]).toMatch(/set BATON_SSH_KEY_FILE to the SSH private key/);
  expect(lines[0]).toMatch(/BATON_DISPATCHER=github/);
  expect(withKey.output).not.toMatch(/BATON_SSH_KEY_FILE/);
  expect(github.output).not.toMatch(/BATON_SSH_KEY_FILE/);
}, 120_000);
