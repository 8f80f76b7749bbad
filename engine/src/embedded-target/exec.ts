/**
 * One SSH `exec` request on the embedded target: `/bin/sh -c <command>` in the sandbox, with
 * stdin, stdout and stderr streamed over the channel, then `exit-status` (normal exit) or
 * `exit-signal` (killed by a signal, failure case F08) and channel close — in that order, the
 * way OpenSSH's sshd does it.
 */
import { constants } from "node:os";
import type { ServerChannel } from "ssh2";
import { type OffThreadChild, spawnOffThread } from "../node/spawn-off-thread.ts";

/** Where and how commands run. */
export interface ExecEnvironment {
  /** Working directory (the sandbox folder). */
  cwd: string;
  /** Complete environment of the shell (HOME, PATH with the container stand-in first, …). */
  env: Record<string, string>;
}

/** A running command; `kill` forwards a signal to its whole process group. */
export interface RunningExec {
  child: OffThreadChild;
  kill(signal: NodeJS.Signals): void;
  /** Resolves once the exit status or signal was sent and the channel closed. */
  done: Promise<void>;
}

/**
 * Longest wait (ms) for a command's stdout/stderr to drain after it exited: a background child
 * that inherited them must not keep the channel open forever, but output still on its way must
 * arrive first. The shell runs off-thread, so on a loaded machine its last lines can reach this
 * thread seconds after the exit (at load 38, 1 s lost deploy.sh's result line: "printed no
 * result for pull", exit 0). OpenSSH's sshd waits for the end of output without any bound.
 */
const DRAIN_GRACE_MS = 15_000;

/**
 * Starts `command` and wires it to `channel`. Never throws; a spawn failure exits 127.
 * The shell is started from a worker thread (node/spawn-off-thread.ts): twenty lanes' commands
 * at once must not stall the event loop of the process that hosts the target (the demo's engine).
 */
export function runExec(
  channel: ServerChannel,
  command: string,
  where: ExecEnvironment,
): RunningExec {
  // Own process group, so a signal reaches the shell and whatever it started in the foreground.
  const child = spawnOffThread("/bin/sh", ["-c", command], {
    cwd: where.cwd,
    env: where.env,
    detached: true,
  });
  let exited = false;
  const kill = (signal: NodeJS.Signals) => {
    if (!exited) child.kill(signal, true);
  };
  child.onStdout = (d) => channel.write(d);
  child.onStderr = (d) => channel.stderr.write(d);
  channel.on("data", (d: Buffer) => child.writeStdin(d));
  channel.on("end", () => child.endStdin());

  const done = new Promise<void>((resolve) => {
    let finished = false;
    const finish = (code: number | null, signal: NodeJS.Signals | null, message?: string) => {
      if (finished) return;
      finished = true;
      try {
        if (message) channel.stderr.write(`${message}\n`);
        if (signal) channel.exit(signal.replace(/^SIG/, ""), false, "");
        else channel.exit(code ?? 255);
      } catch {
        // ssh2 refuses signal names outside RFC 4254's list; report 128 + n like a shell does.
        channel.exit(128 + (signal ? (constants.signals[signal] ?? 0) : 0));
      }
      channel.end();
      resolve();
    };
    void child.exited.then((e) => {
      exited = true;
      if (e.error) {
        finish(127, null, `[embedded-target] cannot start /bin/sh: ${e.error}`);
        return;
      }
      // Output still draining: wait for it, bounded.
      const timer = setTimeout(() => finish(e.code, e.signal), DRAIN_GRACE_MS);
      void child.closed.then((c) => {
        clearTimeout(timer);
        finish(c.code, c.signal);
      });
    });
  });
  // The client went away before the command finished: hang up on it, as sshd does.
  channel.on("close", () => kill("SIGHUP"));
  return { child, kill, done };
}
