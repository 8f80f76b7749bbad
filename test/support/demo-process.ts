/**
 * `npm run demo` as a child process for the e2e tests: started in its own process group (so a
 * test can signal the demo and everything it started, and check the group empty at the end),
 * its stdout + stderr collected, and the lines the tests read from it parsed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { REPO_ROOT } from "../../engine/src/demo/fleet.ts";
import { bundledNodeArgs } from "./bundles.ts";

/** True while a process (or, with a negative id, a process group) exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Polls `cond` every `everyMs` (default 200), at most `ms`; resolves with its last value. */
export async function within(
  ms: number,
  cond: () => boolean | Promise<boolean>,
  everyMs = 200,
): Promise<boolean> {
  for (let i = 0; i < ms / everyMs; i++) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return cond();
}

/** A running `baton demo`. */
export interface DemoProcess {
  child: ChildProcess;
  /** The process group's id (the demo's pid). */
  pgid: number;
  /** stdout + stderr so far. */
  output(): string;
  exited: Promise<{ code: number | null; signal: string | null }>;
  /** Resolves true once the demo printed its release's first step line (at most `ms`). */
  started(ms: number): Promise<boolean>;
  /** The engine URL and operator token the demo printed ("" when not printed yet). */
  engine(): { url: string; token: string };
  /** `exited`, or null after `ms`. */
  exit(ms: number): Promise<{ code: number | null; signal: string | null } | null>;
  /** SIGKILLs the process group if anything of it is left. */
  kill(): void;
}

/**
 * Starts `baton demo <args>` (engine/src/cli/main.ts, bundled: test/support/bundles.ts) in its
 * own process group; with `npm: true` as a user does, `npm run demo -- <args>` (npm, its shell
 * and the demo in the group; `exited` is then npm's exit).
 */
export async function spawnDemo(
  args: string[],
  opts: { npm?: boolean } = {},
): Promise<DemoProcess> {
  const [cmd, argv] = opts.npm
    ? ["npm", ["run", "-s", "demo", "--", ...args]]
    : [
        process.execPath,
        await bundledNodeArgs("engine/src/cli/main.ts", { args: ["demo", ...args] }),
      ];
  const child = spawn(cmd, argv, {
    cwd: REPO_ROOT,
    env: { ...process.env, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // its own process group, checked empty at the end
  });
  if (child.pid === undefined) throw new Error("[demo] the demo process did not start");
  const pgid = child.pid;
  let out = "";
  const exited = new Promise<{ code: number | null; signal: string | null }>((ok) =>
    child.on("exit", (code, signal) => ok({ code, signal })),
  );
  child.stdout?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  return {
    child,
    pgid,
    output: () => out,
    exited,
    // The release has started once the first step line is printed.
    started: (ms) => within(ms, () => /^\s+\d+\s+\S+\s+fwd\s+attempt \d+/m.test(out)),
    engine: () => ({
      url: /\[demo\] engine\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1] ?? "",
      token: /with the operator token (\S+)/.exec(out)?.[1] ?? "",
    }),
    exit: (ms) => Promise.race([exited, new Promise<null>((r) => setTimeout(() => r(null), ms))]),
    kill: () => {
      if (alive(-pgid)) process.kill(-pgid, "SIGKILL");
    },
  };
}

/**
 * Runs `baton demo <args>` to its end (at most `ms`; then its process group is SIGKILLed and
 * `code` is null); resolves with its exit code and stdout + stderr.
 */
export async function demoToEnd(
  args: string[],
  ms: number,
): Promise<{ code: number | null; out: string }> {
  const d = await spawnDemo(args);
  const end = await d.exit(ms);
  if (end === null) {
    d.kill();
    await d.exited;
  }
  return { code: end?.code ?? null, out: d.output() };
}
