/**
 * Child processes started from a worker thread (what the local runner and the embedded SSH
 * target use so that starting many jobs does not stall the engine's event loop): output in
 * order, exit codes and signals as `spawn` reports them, stdin, a start that fails, and a
 * signal to the whole process group.
 */
import { tmpdir } from "node:os";
import { describe, expect, it } from "vitest";
import { spawnOffThread } from "../../engine/src/node/spawn-off-thread.ts";

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };

function collect(cmd: string, args: string[], stdin?: string) {
  const child = spawnOffThread(cmd, args, { cwd: tmpdir(), env, detached: true });
  let out = "";
  let err = "";
  child.onStdout = (d) => {
    out += d.toString("utf8");
  };
  child.onStderr = (d) => {
    err += d.toString("utf8");
  };
  if (stdin !== undefined) {
    child.writeStdin(stdin);
    child.endStdin();
  }
  return { child, result: child.closed.then((e) => ({ ...e, out: () => out, err: () => err })) };
}

describe("spawnOffThread", () => {
  it("streams stdout and stderr in order and reports the exit code after them", async () => {
    const { result } = collect("/bin/sh", [
      "-c",
      "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done; exit 3",
    ]);
    const r = await result;
    expect(r.code).toBe(3);
    expect(r.signal).toBeNull();
    expect(r.out()).toBe("out1\nout2\nout3\nout4\nout5\n");
    expect(r.err()).toBe("err1\nerr2\nerr3\nerr4\nerr5\n");
  }, 60_000);

  it("passes stdin, cwd and only the environment it is given", async () => {
    const child = spawnOffThread("/bin/sh", ["-c", 'cat; echo "[$PWD] [$HOME]"'], {
      cwd: tmpdir(),
      env,
    });
    let out = "";
    child.onStdout = (d) => {
      out += d.toString("utf8");
    };
    child.writeStdin("hello ");
    child.writeStdin(Buffer.from("world\n"));
    child.endStdin();
    expect((await child.closed).code).toBe(0);
    expect(out).toBe(`hello world\n[${tmpdir()}] []\n`);
  }, 60_000);

  it("a command that cannot start ends with 127 and says why", async () => {
    const child = spawnOffThread("/nonexistent/baton-no-such-binary", [], { cwd: tmpdir(), env });
    const e = await child.closed;
    expect(e.code).toBe(127);
    expect(e.error).toMatch(/ENOENT/);
    expect(await child.pid).toBeUndefined();
  }, 60_000);

  it("signals the whole process group, and the signal is what it died of", async () => {
    // The shell starts a child in the foreground; both must stop.
    const child = spawnOffThread("/bin/sh", ["-c", "sleep 30 & echo started; wait"], {
      cwd: tmpdir(),
      env,
      detached: true,
    });
    let started = false;
    child.onStdout = () => {
      started = true;
    };
    expect(await child.pid).toBeGreaterThan(1);
    // Wait (bounded) for the shell to have started its child.
    const until = Date.now() + 20_000;
    while (!started && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(child.kill("SIGTERM", true)).toBe(true);
    const r = await child.closed;
    expect(r.signal).toBe("SIGTERM");
    expect(child.kill("SIGTERM", true)).toBe(false);
  }, 60_000);
});
