/**
 * A workerd runtime that is already up, into which Worker scripts are loaded one at a time:
 * how an isolate's cold start is measured apart from the runtime's own boot. workerd (the binary
 * miniflare runs) serves one small "loader" Worker; each request names an isolate, and the
 * loader's Worker Loader binding (workerd's dynamic Worker loading, behind `--experimental`)
 * creates it on first use from the bundle's text: a fresh V8 isolate that compiles and evaluates
 * the bundle, then serves the request. Later requests naming the same isolate reach it warm.
 * Listens on 127.0.0.1, on a port workerd picks (reported over its control fd).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A running workerd with the loader Worker. */
export interface WorkerdLoader {
  /** ms from spawning workerd to its socket listening (the runtime's boot, no Worker loaded). */
  bootMs: number;
  /**
   * Sends `path` to isolate `isolate` (loaded from the bundle on first use) and times it, ms on
   * this process's clock from sending to the whole answer read. With `bare`, an isolate created
   * by this call gets only `BATON_PUBLIC_URL` as its env (no database: the bundle's settings
   * check answers 503 before any store work); with `empty`, an isolate created by this call
   * runs a one-line Worker answering 200 instead of the bundle (what an isolate costs with
   * nothing to compile). An isolate keeps what it was created with. `cpuMs` is the CPU time
   * workerd's threads spent meanwhile (Linux's per-thread schedstat, ns resolution; null where
   * there is none): less swayed than `ms` by other work on a shared machine.
   */
  request(
    isolate: string,
    path: string,
    o?: { bare?: boolean; empty?: boolean },
  ): Promise<{ status: number; body: string; ms: number; cpuMs: number | null }>;
  close(): Promise<void>;
}

/**
 * CPU time, ns, every thread of process `pid` has run (the first field of Linux's
 * /proc/<pid>/task/<tid>/schedstat); null off Linux or once the process is gone.
 */
function cpuNs(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    }
    return ns;
  } catch {
    return null;
  }
}

/** The workerd binary miniflare runs (its `workerd` dependency). */
function workerdBinary(): string {
  const fromMiniflare = createRequire(createRequire(import.meta.url).resolve("miniflare"));
  return (fromMiniflare("workerd") as { default: string }).default;
}

const LOADER = `import bundle from "worker.txt";
import envText from "env.txt";
const childEnv = JSON.parse(envText);
const EMPTY = 'export default { fetch() { return new Response("ok"); } }';
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const id = u.searchParams.get("isolate");
    const bare = u.searchParams.has("bare");
    const empty = u.searchParams.has("empty");
    const worker = env.LOADER.get(id, () => ({
      compatibilityDate: "2024-09-23",
      compatibilityFlags: ["nodejs_compat"],
      mainModule: "worker.mjs",
      modules: { "worker.mjs": empty ? EMPTY : bundle },
      env: bare ? { BATON_PUBLIC_URL: childEnv.BATON_PUBLIC_URL } : childEnv,
    }));
    return worker.getEntrypoint().fetch(new Request(new URL(u.searchParams.get("path"), childEnv.BATON_PUBLIC_URL), { method: req.method, headers: req.headers }));
  },
};
`;

// Private and loopback addresses allowed (the world is on 127.0.0.1), as miniflare allows them.
const CONFIG = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .loader),
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [ (name = "http", address = "127.0.0.1:0", http = (), service = "main") ],
);
const loader :Workerd.Worker = (
  modules = [
    (name = "loader.js", esModule = embed "loader.js"),
    (name = "worker.txt", text = embed "worker.mjs"),
    (name = "env.txt", text = embed "env.json"),
  ],
  compatibilityDate = "2024-09-23",
  compatibilityFlags = ["nodejs_compat"],
  bindings = [ (name = "LOADER", workerLoader = ()) ],
);
`;

/**
 * Starts workerd with the loader; resolves once it listens. `env` are the loaded Worker's
 * bindings (text), `BATON_PUBLIC_URL` among them (requests are addressed to it).
 * @throws Error when workerd exits or does not listen within 30 s.
 */
export async function startWorkerdLoader(
  bundle: string,
  env: Record<string, string>,
): Promise<WorkerdLoader> {
  const dir = mkdtempSync(join(tmpdir(), "baton-workerd-loader-"));
  writeFileSync(join(dir, "worker.mjs"), bundle);
  writeFileSync(join(dir, "env.json"), JSON.stringify(env));
  writeFileSync(join(dir, "loader.js"), LOADER);
  writeFileSync(join(dir, "config.capnp"), CONFIG);
  const t0 = performance.now();
  const child: ChildProcess = spawn(
    workerdBinary(),
    ["serve", join(dir, "config.capnp"), "--experimental", "--control-fd=3"],
    { stdio: ["ignore", "ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr?.on("data", (b: Buffer) => {
    stderr = (stderr + b.toString()).slice(-4000);
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await gone;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error("[workerd] did not listen within 30 s")),
        30_000,
      );
      let lines = "";
      (child.stdio[3] as NodeJS.ReadableStream).on("data", (b: Buffer) => {
        lines += b.toString();
        const m = /"event":"listen","socket":"http","port":(\d+)/.exec(lines);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`[workerd] exited ${code} before listening: ${stderr}`));
      });
    });
  } catch (err) {
    await stop();
    throw err;
  }
  const bootMs = performance.now() - t0;
  return {
    bootMs,
    async request(isolate, path, o = {}) {
      const url = `http://127.0.0.1:${port}/?isolate=${encodeURIComponent(isolate)}&path=${encodeURIComponent(path)}${o.bare ? "&bare" : ""}${o.empty ? "&empty" : ""}`;
      const cpu0 = cpuNs(child.pid);
      const t = performance.now();
      const res = await fetch(url);
      const body = await res.text();
      const ms = performance.now() - t;
      const cpu1 = cpuNs(child.pid);
      const cpuMs = cpu0 === null || cpu1 === null ? null : (cpu1 - cpu0) / 1e6;
      return { status: res.status, body, ms, cpuMs };
    },
    close: stop,
  };
}
