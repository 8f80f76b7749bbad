/**
 * The standalone entry (`engine/src/control-plane/main.ts`): starts on the port and file given,
 * and its state survives a SIGKILL of the process (WAL on its own SQLite file).
 * The server runs as `node <bundle of main.ts>` (test/support/bundles.ts), so the pid we SIGKILL
 * is the server itself (a `tsx` wrapper would die and leave its server child running).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { bundled } from "../support/bundles.ts";

const root = join(import.meta.dirname, "..", "..");
const mainTs = join(root, "engine/src/control-plane/main.ts");
const children = new Set<ChildProcess>();
const CP_TOKEN = "main-test-write-token-0123456789";

/** Starts main.ts and resolves with its URL once it prints "listening on"; bounded to 20 s. */
async function start(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [await bundled(mainTs), ...args], {
    cwd: root,
    env: { ...process.env, BATON_CP_TOKEN: CP_TOKEN, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(
      () => reject(new Error(`control plane did not start: ${out}`)),
      20_000,
    );
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1]! });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`control plane exited with ${code}: ${out}`));
    });
  });
}

/** True while a process with this pid exists (signal 0 only checks). */
function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** True when nothing accepts a connection at `url` any more. */
async function refuses(url: string): Promise<boolean> {
  try {
    await fetch(`${url}/v1/models/default/traffic`, { signal: AbortSignal.timeout(2_000) });
    return false;
  } catch {
    return true;
  }
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
  });
}

describe("control-plane standalone entry", () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-cp-main-"));
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    await Promise.all([...children].map((c) => exited(c)));
    // No server is left behind: every pid this file started is gone.
    for (const c of children) expect(alive(c.pid)).toBe(false);
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves on the given port and file, and keeps its state across a SIGKILL", async () => {
    const data = join(dir, "nested", "cp.sqlite");
    const first = await start(["--port", "0", "--data", data]);
    // The lanes are declared first: a write never creates one.
    for (const lane of ["old", "new"]) {
      const declared = await fetch(`${first.url}/v1/lanes/${lane}`, {
        method: "PUT",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${CP_TOKEN}`,
          "Idempotency-Key": `declare:${lane}`,
          "Baton-Release-Id": "setup",
          "Baton-Generation": "1",
        },
        body: JSON.stringify({ model: "default" }),
      });
      expect(declared.status).toBe(200);
    }
    const put = await fetch(`${first.url}/v1/models/default/traffic`, {
      method: "PUT",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${CP_TOKEN}`,
        "Idempotency-Key": "r17:6:fwd:traffic=10",
        "Baton-Release-Id": "r17",
        "Baton-Generation": "1",
      },
      body: JSON.stringify({ weights: { old: 90, new: 10 } }),
    });
    expect(put.status).toBe(200);
    first.child.kill("SIGKILL");
    await exited(first.child);
    // The killed pid was the server: its process is gone and its port refuses.
    expect(first.child.signalCode).toBe("SIGKILL");
    expect(alive(first.child.pid)).toBe(false);
    expect(await refuses(first.url)).toBe(true);

    const second = await start(["--data", data], { BATON_CP_PORT: "0" });
    const traffic = await fetch(`${second.url}/v1/models/default/traffic`);
    expect(await traffic.json()).toMatchObject({ weights: { old: 90, new: 10 } });
    const faults = await fetch(`${second.url}/v1/admin/faults`);
    expect(faults.status).toBe(404);
    second.child.kill("SIGTERM");
    expect(await exited(second.child)).toBe(0);
    expect(alive(second.child.pid)).toBe(false);
    expect(await refuses(second.url)).toBe(true);
  });

  it("refuses a bad port with a clear message and exit code 2", async () => {
    const child = spawn(process.execPath, [await bundled(mainTs), "--port", "http"], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.add(child);
    let err = "";
    child.stderr!.on("data", (d: Buffer) => {
      err += d.toString();
    });
    expect(await exited(child)).toBe(2);
    expect(err).toMatch(/\[control-plane\] --port must be an integer 0–65535, got "http"/);
  });

  it("refuses to start without BATON_CP_TOKEN (exit 2, names the variable and the engine's side)", async () => {
    const env = { ...process.env };
    delete env.BATON_CP_TOKEN;
    const child = spawn(process.execPath, [await bundled(mainTs), "--port", "0"], {
      cwd: root,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.add(child);
    let err = "";
    child.stderr!.on("data", (d: Buffer) => {
      err += d.toString();
    });
    expect(await exited(child)).toBe(2);
    expect(err).toMatch(/BATON_CP_TOKEN is not set; fix: .*BATON_CONTROL_PLANE_TOKEN/);
  });
});
