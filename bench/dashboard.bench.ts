/**
 * Dashboard benchmark: server-side render time of one release page with 200 step runs × 3
 * attempts and 2,000 history events (through the Hono app, as a browser would ask for it),
 * and the page's size in bytes. Prints figures, then `RESULT {...}` as the last line.
 * Targets (issue 5): p50 < 50 ms, page < 300 KB.
 */
import { dashboardApp } from "../engine/src/http/dashboard/index.tsx";
import { bigRecord, fakeApi } from "../test/support/dashboard-fixtures.ts";

const WARMUP = 10;
const RUNS = 60;

const record = bigRecord(200, 3, 2_000);
const stepRuns = record.release.step_runs.length;
const attempts = record.release.step_runs.reduce((n, s) => n + s.attempts.length, 0);
const app = dashboardApp({
  api: fakeApi([record]),
  tokens: {},
  publicUrl: "http://127.0.0.1:8787",
  repository: "acme/models",
});

async function once(): Promise<{ ms: number; bytes: number }> {
  const t0 = performance.now();
  const res = await app.request(`http://127.0.0.1:8787/releases/${record.release.id}`);
  const body = new Uint8Array(await res.arrayBuffer());
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`[bench] release page answered ${res.status}`);
  return { ms, bytes: body.byteLength };
}

for (let i = 0; i < WARMUP; i++) await once();
const times: number[] = [];
let bytes = 0;
for (let i = 0; i < RUNS; i++) {
  const r = await once();
  times.push(r.ms);
  bytes = r.bytes;
}
times.sort((a, b) => a - b);
const pct = (p: number) => times[Math.min(times.length - 1, Math.floor((p / 100) * times.length))]!;
const p50 = Number(pct(50).toFixed(2));
console.log(
  `[bench] release page: ${stepRuns} step runs, ${attempts} attempts, ${record.history.length} history events`,
);
console.log(
  `[bench] render over ${RUNS} runs: p50 ${p50} ms, p90 ${pct(90).toFixed(2)} ms, max ${times.at(-1)!.toFixed(2)} ms`,
);
console.log(
  `[bench] page size ${bytes} bytes (${(bytes / 1024).toFixed(1)} KiB); targets p50 < 50 ms, < 300 KB`,
);
console.log(`RESULT ${JSON.stringify({ render_p50_ms: p50, page_bytes: bytes })}`);
