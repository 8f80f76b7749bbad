/**
 * Serverless benchmark (`npm run bench:serverless`), on real parts on 127.0.0.1 (Postgres, the
 * GitHub stand-in, the reference control plane):
 * - the engine Worker's bundle (scripts/build-worker.mjs): its size, all modules as uploaded
 *   (`worker_bundle_bytes`, and gzipped), where the bytes come from, and a failure when it is
 *   over its budget (WORKER_BUNDLE_BUDGET_BYTES); the dashboard Worker's
 *   (`dashboard_worker_bundle_bytes`) against DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES;
 * - workerd's boot (`runtime_boot_ms`): workerd process start through miniflare 3 to the first
 *   200 on `/healthz`, the store's migrations included (`workerd_cold_start_ms` is the same
 *   figure under its earlier name);
 * - an isolate's cold start (`isolate_cold_start_ms`): in a workerd already up (its boot is not
 *   counted), the bundle loaded into a new V8 isolate by workerd's Worker Loader
 *   (test/support/workerd-loader.ts), timed by this process from sending the request that
 *   creates the isolate to the whole `/healthz` 200 read: the hop through the loader Worker,
 *   compiling and evaluating the bundle, the first event's store work (a Postgres connection
 *   over loopback TCP and the per-isolate migration check, one read on the already migrated
 *   database) and the answer. Median of ISOLATES fresh isolates. Its parts, same clock:
 *   `isolate_warm_request_ms`: the same request again on each loaded isolate (the hop, a new
 *   connection and pool as every event opens, no migration check);
 *   `isolate_load_ms`: the first request to a fresh isolate with no database settings
 *   (compile, evaluate, the settings check's 503; no store work);
 *   `isolate_empty_ms`: the first request to a fresh isolate of a one-line Worker (the hop
 *   and the isolate itself, nothing to compile);
 *   `isolate_cold_start_cpu_ms`, `isolate_load_cpu_ms`, `isolate_empty_cpu_ms`: the CPU time
 *   workerd's threads spent during those same requests (Linux schedstat; null elsewhere),
 *   medians: wall-clock figures on a shared machine grow with its load, CPU time much less;
 * - the Lambda bundle (scripts/build-lambda.mjs): cold start of a fresh `node` process that
 *   loads it and invokes the handler with an API Gateway v2 `/healthz` event, to its first 200;
 * - one release driven to `succeeded` in workerd only by requests and Cron Trigger events.
 * Postgres: BATON_TEST_DATABASE_URL, or a throwaway cluster from scripts/ci/pg-start.sh.
 * Bounded: 240 s, then it fails. Exits 1 when the release does not succeed or the bundle is
 * over budget. Last line:
 * `RESULT {"workerd_cold_start_ms":X,"worker_bundle_bytes":N,"lambda_cold_start_ms":Y,
 * "release_succeeded":true,"runtime_boot_ms":X,"isolate_cold_start_ms":I,
 * "isolate_warm_request_ms":W,"isolate_load_ms":L,"isolate_empty_ms":E,
 * "worker_bundle_gzip_bytes":G,"worker_bundle_budget_bytes":B,"isolate_cold_start_cpu_ms":C,
 * "isolate_load_cpu_ms":LC,"isolate_empty_cpu_ms":EC,"dashboard_worker_bundle_bytes":D,
 * "dashboard_worker_bundle_budget_bytes":DB}`.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const LIMIT_MS = 240_000;
const limit = setTimeout(() => {
  console.error(`[bench] serverless: over ${LIMIT_MS / 1000} s, giving up`);
  process.exit(1);
}, LIMIT_MS);
limit.unref();

let pgDir: string | null = null;
if (!process.env.BATON_TEST_DATABASE_URL) {
  const out = execFileSync("scripts/ci/pg-start.sh", ["55441"], { encoding: "utf8" });
  process.env.BATON_TEST_DATABASE_URL = /BATON_TEST_DATABASE_URL=(\S+)/.exec(out)?.[1];
  pgDir = /BATON_PG_DIR=(\S+)/.exec(out)?.[1] ?? null;
}
// After the variable is set: the world's database helper reads it when loaded.
const { driveRelease, startServerlessWorld, startWorkerd } = await import(
  "../test/support/serverless-world.ts"
);
const { startWorkerdLoader } = await import("../test/support/workerd-loader.ts");
const {
  breakdown,
  buildWorker,
  DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES,
  WORKER_BUNDLE_BUDGET_BYTES,
  WORKER_ENTRIES,
} = await import("../scripts/build-worker.mjs");

/** Fresh isolates whose first request is timed (median reported). */
const ISOLATES = 5;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const dir = mkdtempSync(join(tmpdir(), "baton-bench-serverless-"));
const PUBLIC_URL = "https://baton.example.workers.dev";
let result: Record<string, unknown> | null = null;
const world = await startServerlessWorld(PUBLIC_URL);
try {
  // Build both bundles with the project's scripts.
  const workerOut = join(dir, "worker.mjs");
  const lambdaOut = join(dir, "lambda", "index.mjs");
  const built = await buildWorker(workerOut);
  console.log(
    `[bench] serverless: engine Worker bundle ${built.bytes} bytes (gzip ${built.gzipBytes}; budget ${WORKER_BUNDLE_BUDGET_BYTES}); largest parts:`,
  );
  for (const { name, bytes } of breakdown(built.metafile).slice(0, 12)) {
    console.log(`${String(bytes).padStart(9)}  ${name}`);
  }
  const dashboardBuilt = await buildWorker(join(dir, "dashboard.mjs"), {
    entry: WORKER_ENTRIES.dashboard,
  });
  console.log(
    `[bench] serverless: dashboard Worker bundle ${dashboardBuilt.bytes} bytes (gzip ${dashboardBuilt.gzipBytes}; budget ${DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES})`,
  );
  execFileSync(process.execPath, ["scripts/build-lambda.mjs", lambdaOut], { encoding: "utf8" });
  const bundle = readFileSync(workerOut, "utf8");

  // workerd: process start → first /healthz 200 (migrations run on this first event).
  const w = await startWorkerd(bundle, world.env, PUBLIC_URL);
  const release = await driveRelease(world, w.send, w.tick);
  await w.dispose();

  // An isolate in a runtime already up: load → first /healthz 200, then once more warm; and a
  // bare isolate (no database settings) whose first answer is the settings check's 503.
  const loader = await startWorkerdLoader(bundle, world.env);
  const cold: number[] = [];
  const warm: number[] = [];
  const bare: number[] = [];
  const empty: number[] = [];
  // workerd's CPU time during the same requests (ms), by the samples' wall-clock array.
  const cpu = new Map<number[], number[]>([cold, warm, bare, empty].map((xs) => [xs, []]));
  try {
    for (let i = 0; i < ISOLATES; i++) {
      for (const [samples, isolate, what, want] of [
        [cold, `isolate-${i}`, "first", 200],
        [warm, `isolate-${i}`, "warm", 200],
        [bare, `bare-${i}`, "bare first", 503],
        [empty, `empty-${i}`, "empty first", 200],
      ] as const) {
        const r = await loader.request(isolate, "/healthz", {
          bare: samples === bare,
          empty: samples === empty,
        });
        if (r.status !== want) {
          throw new Error(`[bench] ${isolate} ${what} /healthz answered ${r.status}: ${r.body}`);
        }
        samples.push(r.ms);
        if (r.cpuMs !== null) cpu.get(samples)?.push(r.cpuMs);
      }
    }
  } finally {
    await loader.close();
  }
  const ms = (xs: number[]) => xs.map((x) => x.toFixed(1)).join(", ");
  const cpuMedian = (xs: number[]) => {
    const c = cpu.get(xs) ?? [];
    return c.length === xs.length ? Math.round(median(c) * 10) / 10 : null;
  };
  console.log(
    `[bench] serverless: workerd's CPU (ms) for a new isolate's first /healthz 200: ${ms(cpu.get(cold) ?? [])}; bare → 503: ${ms(cpu.get(bare) ?? [])}; empty → 200: ${ms(cpu.get(empty) ?? [])}`,
  );
  console.log(
    `[bench] serverless: workerd loader up in ${Math.round(loader.bootMs)} ms; new isolate → first /healthz 200 (ms): ${ms(cold)}; warm: ${ms(warm)}; bare isolate → 503: ${ms(bare)}; empty Worker's isolate → 200: ${ms(empty)}`,
  );

  // Lambda: a fresh node process loads the bundle and serves one API Gateway v2 event.
  const probe = join(dir, "lambda", "probe.mjs");
  writeFileSync(
    probe,
    `const { handler } = await import("./index.mjs");
const r = await handler({ version: "2.0", routeKey: "$default", rawPath: "/healthz", rawQueryString: "",
  headers: { host: "abc.execute-api.eu-west-1.amazonaws.com" },
  requestContext: { domainName: "abc.execute-api.eu-west-1.amazonaws.com", requestId: "1", routeKey: "$default", stage: "$default",
    http: { method: "GET", path: "/healthz", protocol: "HTTP/1.1", sourceIp: "192.0.2.1", userAgent: "bench" }, timeEpoch: Date.now() },
  isBase64Encoded: false });
console.log("STATUS " + r.statusCode);
`,
  );
  const t0 = performance.now();
  const lambdaCold = await new Promise<number>((resolve, reject) => {
    const child = spawn(process.execPath, [probe], {
      env: { ...process.env, ...world.env },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => {
      out += b.toString();
      if (/STATUS 200/.test(out)) resolve(performance.now() - t0);
    });
    child.on("exit", (code) => {
      if (!/STATUS 200/.test(out)) reject(new Error(`[bench] lambda probe exited ${code}: ${out}`));
    });
  });

  console.log(
    `[bench] serverless: release ${release.id} ${release.state} after ${release.ticks} scheduled ticks, ${release.answered.length} runner step runs`,
  );
  result = {
    workerd_cold_start_ms: Math.round(w.coldStartMs),
    worker_bundle_bytes: built.bytes,
    lambda_cold_start_ms: Math.round(lambdaCold),
    release_succeeded: release.state === "succeeded",
    runtime_boot_ms: Math.round(w.coldStartMs),
    isolate_cold_start_ms: Math.round(median(cold) * 10) / 10,
    isolate_warm_request_ms: Math.round(median(warm) * 10) / 10,
    isolate_load_ms: Math.round(median(bare) * 10) / 10,
    isolate_empty_ms: Math.round(median(empty) * 10) / 10,
    worker_bundle_gzip_bytes: built.gzipBytes,
    worker_bundle_budget_bytes: WORKER_BUNDLE_BUDGET_BYTES,
    dashboard_worker_bundle_bytes: dashboardBuilt.bytes,
    dashboard_worker_bundle_budget_bytes: DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES,
    isolate_cold_start_cpu_ms: cpuMedian(cold),
    isolate_load_cpu_ms: cpuMedian(bare),
    isolate_empty_cpu_ms: cpuMedian(empty),
  };
} finally {
  await world.close();
  rmSync(dir, { recursive: true, force: true });
  if (pgDir) execFileSync("scripts/ci/pg-stop.sh", [pgDir]);
}
console.log(`RESULT ${JSON.stringify(result)}`);
const overBudget =
  (
    [
      ["engine", "worker_bundle_bytes", WORKER_BUNDLE_BUDGET_BYTES, ""],
      [
        "dashboard",
        "dashboard_worker_bundle_bytes",
        DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES,
        " --dashboard",
      ],
    ] as const
  ).filter(([name, key, budget, flag]) => {
    const bytes = result?.[key];
    if (typeof bytes !== "number" || bytes <= budget) return false;
    console.error(
      `[bench] serverless: the ${name} Worker's bundle is ${bytes} bytes, over its budget of ${budget} (node scripts/build-worker.mjs${flag} --analyze shows what grew)`,
    );
    return true;
  }).length > 0;
process.exit(result?.release_succeeded === true && !overBudget ? 0 : 1);
