/**
 * A `baton` command that succeeded exits even when something it (or a library) opened is still
 * open: engine/src/cli/main.ts waits a moment, names the kinds of handles left open on stderr and
 * exits with the command's code (CI saw `baton demo` succeed, write its record, and stay up).
 * The lingering handle here is a listening server opened by a preloaded module.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../engine/src/demo/fleet.ts";
import { cliBundle } from "./run-baton.ts";

const dir = mkdtempSync(join(tmpdir(), "baton-linger-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI's bundle (engine/src/cli/main.ts, test/support/bundles.ts) after `preload`. */
async function baton(preload: string | null, args: string[]) {
  const bundle = await cliBundle();
  return new Promise<{ code: number | null; signal: string | null; err: string }>((ok) => {
    const child = spawn(
      process.execPath,
      [...(preload ? ["--import", pathToFileURL(preload).href] : []), bundle, ...args],
      { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "pipe"] },
    );
    let err = "";
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    // Bound: a process that never exits is killed, and the test then fails on its signal.
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      ok({ code, signal, err });
    });
  });
}

describe("baton exits once its command ended", () => {
  it("a handle left open after a successful command does not keep the process up", async () => {
    const preload = join(dir, "linger.mjs");
    writeFileSync(
      preload,
      'import net from "node:net";\nnet.createServer().listen(0, "127.0.0.1");\n',
    );
    const recipe = join(REPO_ROOT, "recipes/example.yaml");
    const r = await baton(preload, ["check", recipe]);
    expect(r.signal).toBeNull();
    expect(r.code).toBe(0);
    expect(r.err).toMatch(
      /the command ended but \d+ handle\(s\) stayed open \(.*TCPServerWrap.*\); exiting with 0/,
    );
  }, 90_000);

  it("a clean successful command exits without the notice", async () => {
    const r = await baton(null, ["check", join(REPO_ROOT, "recipes/example.yaml")]);
    expect(r.code).toBe(0);
    expect(r.err).not.toMatch(/stayed open/);
  }, 90_000);
});
