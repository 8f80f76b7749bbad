/**
 * Hostile load benchmark: the engine's peak memory while ten clients each
 * send a 100 MB body at once, to the sign-in form, the recipe route, a callback and an abort,
 * half announced with Content-Length (refused before reading) and half streamed chunked (read
 * up to the route's limit, then refused). Every one must get 413; /healthz must answer during.
 * The engine runs as its own process (bench/support/hostile-engine.ts) and its peak resident
 * memory is read from /proc/<pid>/status (VmHWM). Prints figures, then `RESULT {...}` last.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { Readable } from "node:stream";

const BODIES = 10;
const BODY_BYTES = 100 * 1024 * 1024;
const CHUNK = Buffer.alloc(256 * 1024, 0x78);
const ROUTES = [
  "/login",
  "/v1/releases",
  "/v1/releases/step-runs/sr_1_1_f/callback",
  "/v1/releases/r1/abort",
  "/releases/r1/abort",
];

function startEngine(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/support/hostile-engine.ts"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error("[bench] engine did not start in 60 s")),
      60_000,
    );
    let out = "";
    child.stdout?.on("data", (d) => {
      out += String(d);
      const m = /PORT (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]) });
      }
    });
    child.once("exit", (code) => reject(new Error(`[bench] engine exited ${code}`)));
  });
}

/** VmRSS and VmHWM (peak) of `pid`, in MiB. */
function memory(pid: number): { rss: number; peak: number } {
  const s = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1] ?? 0);
  return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

/** A 100 MB body, generated as it is sent (the client holds one chunk). */
function body(): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= BODY_BYTES) return this.push(null);
      sent += CHUNK.length;
      this.push(CHUNK);
    },
  });
}

function send(port: number, path: string, chunked: boolean): Promise<number> {
  return new Promise((resolve) => {
    const req = request({
      host: "127.0.0.1",
      port,
      path,
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        ...(chunked ? {} : { "content-length": String(BODY_BYTES) }),
      },
    });
    const timer = setTimeout(() => {
      req.destroy();
      resolve(0);
    }, 120_000);
    req.on("response", (res) => {
      res.resume();
      clearTimeout(timer);
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    req.on("error", (e: Error & { code?: string }) => {
      clearTimeout(timer);
      // What the client saw instead of an answer: the line says which body and why.
      console.error(
        `[bench] ${path} (${chunked ? "chunked" : "Content-Length"}): no answer, ${e.code ?? e.message}`,
      );
      resolve(-1);
    });
    body().pipe(req);
  });
}

const { child, port } = await startEngine();
const pid = child.pid ?? 0;
try {
  const before = memory(pid);
  const t0 = performance.now();
  let healthy = 0;
  let polls = 0;
  const inFlight: Promise<void>[] = [];
  // Every 20 ms while the bodies are sent, and once when the first is on its way: a flood
  // refused faster than one poll interval still counts polls (CI once showed 0/0).
  const poll = () => {
    polls++;
    inFlight.push(
      fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => {
          if (r.status === 200) healthy++;
        },
        () => {},
      ),
    );
  };
  const poller = setInterval(poll, 20);
  const sending = Promise.all(
    Array.from({ length: BODIES }, (_, i) =>
      send(port, ROUTES[i % ROUTES.length] ?? "/login", i % 2 === 1),
    ),
  );
  poll();
  const statuses = await sending;
  clearInterval(poller);
  await Promise.all(inFlight);
  const ms = performance.now() - t0;
  const after = memory(pid);
  const counts: Record<string, number> = {};
  for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
  console.log(
    `[bench] ${BODIES} bodies of ${BODY_BYTES / 1048576} MB (${BODIES / 2} with Content-Length, ${BODIES / 2} chunked) to ${ROUTES.join(", ")}`,
  );
  console.log(`[bench] statuses ${JSON.stringify(counts)} in ${Math.round(ms)} ms`);
  console.log(
    `[bench] engine RSS before ${before.rss.toFixed(1)} MiB, peak ${after.peak.toFixed(1)} MiB (VmHWM); /healthz ${healthy}/${polls} answered 200 meanwhile`,
  );
  if (counts["413"] !== BODIES) {
    console.error(`[bench] expected ${BODIES} answers of 413, got ${JSON.stringify(counts)}`);
    process.exitCode = 1;
  }
  console.log(
    `RESULT ${JSON.stringify({
      bodies: BODIES,
      body_mb: BODY_BYTES / 1048576,
      statuses: counts,
      engine_rss_before_mb: Number(before.rss.toFixed(1)),
      engine_rss_peak_mb: Number(after.peak.toFixed(1)),
      healthz_ok: healthy,
      healthz_polls: polls,
      ms: Math.round(ms),
    })}`,
  );
} finally {
  child.kill("SIGTERM");
}
