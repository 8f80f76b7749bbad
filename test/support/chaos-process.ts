/**
 * Engine processes for the chaos harness: spawn `test/support/chaos-engine.ts` with an
 * environment, wait until `/healthz` answers, SIGKILL / SIGSTOP / SIGCONT / SIGTERM it, and
 * know how it ended (a fault point's SIGKILL shows as `signal: "SIGKILL"`).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { pathToFileURL } from "node:url";
import { REPO_ROOT } from "../../engine/src/demo/fleet.ts";
import { bundled } from "./bundles.ts";
import { onFreshPort, PortTaken, saysPortTaken } from "./ports.ts";

/** One engine process. */
export interface EngineProcess {
  child: ChildProcess;
  url: string;
  /** stdout + stderr so far (last 64 KB). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  alive(): boolean;
  /** SIGKILLs it (if alive) and waits for the exit. */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs` (default 5000). */
  stop(graceMs?: number): Promise<void>;
}

/**
 * The chaos engine's bundle (test/support/bundles.ts: built once per run and shared, packages
 * included): a restart loads one file instead of resolving the engine's packages, so a harness
 * can afford a restart per kill point. Resolves with the bundle's path.
 */
export function bundleChaosEngine(): Promise<string> {
  return bundled("test/support/chaos-engine.ts");
}

/**
 * Starts an engine process on `port`. Resolves once `/healthz` answers 200 (or when a fault point
 * SIGKILLed it during start: check `alive()`); rejects with the process output when it exits
 * otherwise or does not answer within `timeoutMs` (default 120 s: a start costs CPU for the
 * bundle's import and the store's opening, which a machine loaded 20 deep on 2 cores stretches
 * past 30 s when several engines start at once). `nodeArgs` go to Node before the
 * script (e.g. `--cpu-prof`, which NODE_OPTIONS does not allow).
 */
export async function spawnEngine(
  port: number,
  env: Record<string, string>,
  timeoutMs = 120_000,
  nodeArgs: string[] = [],
): Promise<EngineProcess> {
  // The port is the engine's fixed address (runs call back to it across restarts): when
  // another process holds it (EADDRINUSE), the start is tried again, bounded by `timeoutMs`.
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await spawnEngineOnce(port, env, until, timeoutMs, nodeArgs);
    } catch (e) {
      if (!(e instanceof PortTaken) || Date.now() > until) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/**
 * `spawnEngine` on a port of its own: proposed, and another proposed when a process took it
 * first (ports.ts). For an engine that is never restarted on the same address.
 */
export function spawnEngineOnFreshPort(
  env: Record<string, string>,
  timeoutMs = 120_000,
  nodeArgs: string[] = [],
): Promise<EngineProcess> {
  return onFreshPort("engine process", (port) =>
    spawnEngineOnce(port, env, Date.now() + timeoutMs, timeoutMs, nodeArgs),
  );
}

async function spawnEngineOnce(
  port: number,
  env: Record<string, string>,
  until: number,
  timeoutMs: number,
  nodeArgs: string[],
): Promise<EngineProcess> {
  const url = `http://127.0.0.1:${port}`;
  // Imported from `-e` and started through its export (a bundled module's "am I the main
  // file?" check is never true: bundles.ts).
  const bundle = await bundleChaosEngine();
  // Each phase of the start says when it ended (ms since the spawn), so a start that does not
  // answer in time shows where it stood: node's boot, the bundle's import, or the engine's own
  // start (store, migrations, listen).
  const t0 = Date.now();
  const code = `const t0 = ${t0}; const say = (w) => console.error("[chaos] engine pid " + process.pid + ": " + w + " at +" + (Date.now() - t0) + " ms"); say("node booted"); const m = await import(${JSON.stringify(pathToFileURL(bundle).href)}); say("engine imported"); await m.startChaosEngine(); say("started");`;
  const child = spawn(process.execPath, [...nodeArgs, "--input-type=module", "-e", code], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: process.env.HOME ?? "/tmp",
      PORT: String(port),
      BATON_PUBLIC_URL: url,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let listening = false;
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-65_536);
    listening ||= out.includes("[engine] listening on");
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let gone = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) =>
    child.once("exit", (code, signal) => {
      gone = true;
      ok({ code, signal });
    }),
  );
  const proc: EngineProcess = {
    child,
    url,
    output: () => out,
    exited,
    alive: () => !gone,
    async kill() {
      if (!gone) child.kill("SIGKILL");
      await exited;
    },
    async stop(graceMs = 5_000) {
      if (gone) return;
      child.kill("SIGCONT");
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(t);
    },
  };
  while (Date.now() < until) {
    if (gone) {
      // A fault point may fire in the first reconciler pass: that is a kill, not a start failure.
      if ((await exited).signal === "SIGKILL") return proc;
      if (saysPortTaken(out)) throw new PortTaken(port, out.slice(-400));
      throw new Error(`[chaos] the engine process exited at start:\n${out.slice(-4000)}`);
    }
    // This engine listens (it says so once bound), so the answer below is its own.
    if (!listening) {
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1_000) });
      if (res.status === 200) return proc;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await proc.kill();
  throw new Error(`[chaos] the engine process did not answer /healthz in ${timeoutMs} ms:\n${out}`);
}
