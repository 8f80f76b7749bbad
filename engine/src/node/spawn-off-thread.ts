/**
 * Starts child processes from a worker thread instead of the caller's event loop.
 *
 * `child_process.spawn` blocks the calling thread until the child has called `exec`: on a
 * loaded machine that is the child's wait for a CPU, measured at 70–170 ms per start with a
 * load average of 20 on 2 cores. The embedded default starts every runner job (the action's
 * main and post steps) and every command on the embedded SSH target from the engine's
 * process, so a wave of 20 lanes stalled the engine's event loop for seconds (HTTP answers,
 * claim renewals, control-plane writes). Here one worker thread per process performs the
 * starts; the caller's loop only exchanges messages with it. Output arrives as chunks, in
 * order, before `exit`/`close`; signals are sent from the caller's thread by process id.
 */
import { Worker } from "node:worker_threads";

/** How the child ended (`error` when it could not be started at all: then code is 127). */
export interface OffThreadExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: string;
}

/** Options of a start, like `spawn`'s (stdio is always three pipes). */
export interface OffThreadSpawnOptions {
  cwd: string;
  env: Record<string, string>;
  /** Own process group (so `kill(signal, true)` reaches its children too). */
  detached?: boolean;
}

/** A child started off the caller's thread. */
export interface OffThreadChild {
  /** Resolves once the child runs (undefined when it could not start). */
  pid: Promise<number | undefined>;
  /** Chunks of the child's stdout / stderr, in order. Set before output can arrive. */
  onStdout: (chunk: Buffer) => void;
  onStderr: (chunk: Buffer) => void;
  /** Writes to the child's stdin; ignored once it ended. */
  writeStdin(chunk: Buffer | string): void;
  endStdin(): void;
  /** Sends `signal` to the child (its whole process group with `group`). False if gone. */
  kill(signal: NodeJS.Signals, group?: boolean): boolean;
  /** Settles when the process exited (its output may still be draining). */
  exited: Promise<OffThreadExit>;
  /** Settles when the process exited and its stdout and stderr closed. */
  closed: Promise<OffThreadExit>;
}

interface EndMessage {
  t: "exit" | "close";
  id: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: string;
}
type FromWorker =
  | { t: "pid"; id: number; pid: number | undefined }
  | { t: "out" | "err"; id: number; d: Uint8Array }
  | EndMessage;

/** The worker (plain CommonJS, evaluated: no loader or build step needed). */
const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads");
const { spawn } = require("node:child_process");
const children = new Map();
parentPort.on("message", (m) => {
  if (m.t === "spawn") {
    let child;
    try {
      child = spawn(m.cmd, m.args, { cwd: m.cwd, env: m.env, stdio: ["pipe", "pipe", "pipe"], detached: m.detached });
    } catch (e) {
      parentPort.postMessage({ t: "pid", id: m.id, pid: undefined });
      const end = { id: m.id, code: 127, signal: null, error: String(e && e.message || e) };
      parentPort.postMessage({ t: "exit", ...end });
      parentPort.postMessage({ t: "close", ...end });
      return;
    }
    children.set(m.id, child);
    parentPort.postMessage({ t: "pid", id: m.id, pid: child.pid });
    let failed;
    child.stdout.on("data", (d) => parentPort.postMessage({ t: "out", id: m.id, d }));
    child.stderr.on("data", (d) => parentPort.postMessage({ t: "err", id: m.id, d }));
    child.stdin.on("error", () => {});
    child.on("error", (e) => {
      failed = String(e && e.message || e);
      if (child.pid === undefined) {
        children.delete(m.id);
        const end = { id: m.id, code: 127, signal: null, error: failed };
        parentPort.postMessage({ t: "exit", ...end });
        parentPort.postMessage({ t: "close", ...end });
      }
    });
    child.on("exit", (code, signal) => parentPort.postMessage({ t: "exit", id: m.id, code, signal }));
    child.on("close", (code, signal) => {
      children.delete(m.id);
      parentPort.postMessage({ t: "close", id: m.id, code, signal, error: failed });
    });
  } else if (m.t === "stdin") {
    const c = children.get(m.id);
    if (c && c.stdin.writable) c.stdin.write(Buffer.from(m.d));
  } else if (m.t === "stdinEnd") {
    const c = children.get(m.id);
    if (c && c.stdin.writable) c.stdin.end();
  }
});
`;

interface Pending {
  child: OffThreadChild;
  setPid(pid: number | undefined): void;
  exit(e: OffThreadExit): void;
  close(e: OffThreadExit): void;
  pid?: number;
  ended: boolean;
  exitSeen: boolean;
}

let worker: Worker | null = null;
let nextId = 1;
/** Children started and not yet exited (the worker keeps the process alive while above 0). */
let running = 0;
const pending = new Map<number, Pending>();

function theWorker(): Worker {
  if (worker) return worker;
  const w = new Worker(WORKER_SOURCE, { eval: true });
  w.on("message", (m: FromWorker) => {
    const p = pending.get(m.id);
    if (!p) return;
    if (m.t === "pid") {
      p.pid = m.pid;
      p.setPid(m.pid);
    } else if (m.t === "out" || m.t === "err") {
      const chunk = Buffer.from(m.d.buffer, m.d.byteOffset, m.d.length);
      if (m.t === "out") p.child.onStdout(chunk);
      else p.child.onStderr(chunk);
    } else {
      const e = m as EndMessage;
      const end = { code: e.code, signal: e.signal, ...(e.error ? { error: e.error } : {}) };
      p.ended = true;
      if (!p.exitSeen) {
        p.exitSeen = true;
        running -= 1;
        // Like a ChildProcess handle: keep the process alive while a child runs, not after.
        if (running === 0) w.unref();
      }
      p.exit(end);
      if (e.t === "exit") return;
      pending.delete(m.id);
      p.close(end);
    }
  });
  w.on("error", (e) => {
    // The worker itself failed (not a child): every child still tracked is reported as lost.
    worker = null;
    running = 0;
    for (const [id, p] of pending) {
      pending.delete(id);
      const end = { code: 127, signal: null, error: `[spawn] worker failed: ${e.message}` };
      p.setPid(p.pid);
      p.exit(end);
      p.close(end);
    }
  });
  w.unref();
  worker = w;
  return w;
}

/**
 * Starts `cmd args` from the worker thread. Never throws: a child that cannot start ends with
 * code 127 and `error` (e.g. ENOENT), like a shell reports it.
 */
export function spawnOffThread(
  cmd: string,
  args: readonly string[],
  o: OffThreadSpawnOptions,
): OffThreadChild {
  const w = theWorker();
  const id = nextId++;
  let setPid!: (pid: number | undefined) => void;
  let exit!: (e: OffThreadExit) => void;
  let close!: (e: OffThreadExit) => void;
  const pid = new Promise<number | undefined>((ok) => {
    setPid = ok;
  });
  const exited = new Promise<OffThreadExit>((ok) => {
    exit = ok;
  });
  const closed = new Promise<OffThreadExit>((ok) => {
    close = ok;
  });
  const p: Pending = {
    setPid,
    exit,
    close,
    ended: false,
    exitSeen: false,
    child: {
      pid,
      exited,
      closed,
      onStdout: () => {},
      onStderr: () => {},
      writeStdin(chunk) {
        if (!p.ended) w.postMessage({ t: "stdin", id, d: Buffer.from(chunk) });
      },
      endStdin() {
        if (!p.ended) w.postMessage({ t: "stdinEnd", id });
      },
      kill(signal, group = false) {
        if (p.ended) return false;
        if (p.pid === undefined) {
          // Not started yet: signal it as soon as it runs.
          void pid.then(() => p.child.kill(signal, group));
          return true;
        }
        try {
          process.kill(group ? -p.pid : p.pid, signal);
          return true;
        } catch {
          try {
            process.kill(p.pid, signal);
            return true;
          } catch {
            return false;
          }
        }
      },
    },
  };
  pending.set(id, p);
  running += 1;
  w.ref();
  w.postMessage({
    t: "spawn",
    id,
    cmd,
    args: [...args],
    cwd: o.cwd,
    env: o.env,
    detached: o.detached ?? false,
  });
  return p.child;
}
