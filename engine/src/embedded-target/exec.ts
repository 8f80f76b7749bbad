/**
 * One SSH `exec` request on the embedded target: `/bin/sh -c <command>` in the sandbox, with
 * stdin, stdout and stderr streamed over the channel, then `exit-status` (normal exit) or
 * `exit-signal` (killed by a signal, failure case F08) and channel close — in that order, the
 * way OpenSSH's sshd does it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { constants } from "node:os";
import type { ServerChannel } from "ssh2";

/** Where and how commands run. */
export interface ExecEnvironment {
  /** Working directory (the sandbox folder). */
  cwd: string;
  /** Complete environment of the shell (HOME, PATH with the container stand-in first, …). */
  env: Record<string, string>;
}

/** A running command; `kill` forwards a signal to its whole process group. */
export interface RunningExec {
  child: ChildProcess;
  kill(signal: NodeJS.Signals): void;
  /** Resolves once the exit status or signal was sent and the channel closed. */
  done: Promise<void>;
}

/** Longest wait (ms) for a command's stdout/stderr to drain after it exited: a background
 * child that inherited them must not keep the channel open forever. */
const DRAIN_GRACE_MS = 1_000;

/** Starts `command` and wires it to `channel`. Never throws; a spawn failure exits 127. */
export function runExec(
  channel: ServerChannel,
  command: string,
  where: ExecEnvironment,
): RunningExec {
  // Own process group, so a signal reaches the shell and whatever it started in the foreground.
  const child = spawn("/bin/sh", ["-c", command], {
    cwd: where.cwd,
    env: where.env,
    stdio: ["pipe", "pipe", "pipe"],
    detached: true,
  });
  const kill = (signal: NodeJS.Signals) => {
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      child.kill(signal);
    }
  };
  child.stdout.pipe(channel, { end: false });
  child.stderr.pipe(channel.stderr, { end: false });
  channel.pipe(child.stdin);
  child.stdin.on("error", () => {}); // the command may exit without reading its stdin

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
    child.on("error", (err) =>
      finish(127, null, `[embedded-target] cannot start /bin/sh: ${err.message}`),
    );
    child.on("exit", (code, signal) => {
      let open = 2;
      const timer = setTimeout(() => finish(code, signal), DRAIN_GRACE_MS);
      const drained = () => {
        open -= 1;
        if (open === 0) {
          clearTimeout(timer);
          finish(code, signal);
        }
      };
      if (child.stdout.readableEnded) drained();
      else child.stdout.once("end", drained);
      if (child.stderr.readableEnded) drained();
      else child.stderr.once("end", drained);
    });
  });
  // The client went away before the command finished: hang up on it, as sshd does.
  channel.on("close", () => kill("SIGHUP"));
  return { child, kill, done };
}
