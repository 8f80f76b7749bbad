/**
 * Serverless benchmark (`npm run bench:serverless`), on real parts on 127.0.0.1 (Postgres, the
 * GitHub stand-in, the reference control plane):
 * - the Workers bundle (scripts/build-worker.mjs): its size, and workerd's cold start (workerd
 *   process start through miniflare 3 to the first 200 on `/healthz`, migrations included);
 * - the Lambda bundle (scripts/build-lambda.mjs): cold start of a fresh `node` process that
 *   loads it and invokes the handler with an API Gateway v2 `/healthz` event, to its first 200;
 * - one release driven to `succeeded` in workerd only by requests and Cron Trigger events.
 * Postgres: BATON_TEST_DATABASE_URL, or a throwaway cluster from scripts/ci/pg-start.sh.
 * Bounded: 240 s, then it fails. Last line:
 * `RESULT {"workerd_cold_start_ms":X,"worker_bundle_bytes":N,"lambda_cold_start_ms":Y,"release_succeeded":true}`.
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

const dir = mkdtempSync(join(tmpdir(), "baton-bench-serverless-"));
const PUBLIC_URL = "https://baton.example.workers.dev";
let result: Record<string, unknown> | null = null;
const world = await startServerlessWorld(PUBLIC_URL);
try {
  // Build both bundles with the project's scripts (run as the CLI would).
  const workerOut = join(dir, "worker.mjs");
  const lambdaOut = join(dir, "lambda", "index.mjs");
  const built = JSON.parse(
    execFileSync(process.execPath, ["scripts/build-worker.mjs", workerOut], { encoding: "utf8" }),
  ) as { bytes: number };
  execFileSync(process.execPath, ["scripts/build-lambda.mjs", lambdaOut], { encoding: "utf8" });

  // workerd: process start → first /healthz 200 (migrations run on this first event).
  const w = await startWorkerd(readFileSync(workerOut, "utf8"), world.env, PUBLIC_URL);
  const release = await driveRelease(world, w.send, w.tick);
  await w.dispose();

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
  };
} finally {
  await world.close();
  rmSync(dir, { recursive: true, force: true });
  if (pgDir) execFileSync("scripts/ci/pg-stop.sh", [pgDir]);
}
console.log(`RESULT ${JSON.stringify(result)}`);
process.exit(result?.release_succeeded === true ? 0 : 1);
