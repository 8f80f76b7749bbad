/**
 * Dashboard benchmark: server-side render time of one release page with 200 step runs × 3
 * attempts and 2,000 history events (through the Hono app, as a browser would ask for it),
 * and the page's size in bytes. Then, in Chromium (when /usr/bin/chromium exists): the first
 * screen of a rolled-back release at 1280×800 (where its first-screen block ends, whether the
 * headline, actions and failed step fit, the page's height) and the widest sideways overflow
 * at 390 px over the releases list, the release page and the fleet page (`phone_overflow_px`,
 * must be 0). Last, the live stream's CPU cost: `LIVE_PAGES` open event streams on a running
 * release with 10,000 history rows, engine CPU time per page per second, store query
 * included: a real engine (createEngine) on SQLite (better-sqlite3 runs in this process, so
 * its queries count) serving its own HTTP app; each poll reads the release mark.
 * Prints figures, then `RESULT {...}` as the last line.
 * Targets: p50 < 50 ms, page < 300 KB; phone_overflow_px 0.
 */
import { existsSync } from "node:fs";
import { serve } from "@hono/node-server";
import { chromium } from "playwright-core";
import { MemoryControlPlane } from "../engine/src/adapters/memory/control-plane.ts";
import { dashboardApp } from "../engine/src/http/dashboard/index.tsx";
import {
  createRelease,
  makeHarness,
  OPERATOR,
  recipe,
} from "../test/integration/service-harness.ts";
import { bigRecord, compensatedRecord, fakeApi } from "../test/support/dashboard-fixtures.ts";

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

// ------------------------------------------------ Chromium: first screen and phone overflow
const CHROMIUM = "/usr/bin/chromium";
const LIVE_PAGES = 10;
const LIVE_WINDOW_MS = 5_000;
const rolled = compensatedRecord();
const LIVE_HISTORY = 10_000;
const cp = new MemoryControlPlane({ model: rolled.release.manifest.model });
cp.seed([
  { id: "lane-1", weight: 100, capabilities: ["chat"], advertised: true },
  { id: "lane-2", weight: 0 },
]);
const served = dashboardApp({
  api: fakeApi([rolled]),
  tokens: {},
  publicUrl: "http://127.0.0.1",
  controlPlane: cp,
});
const server = serve({ fetch: served.fetch, port: 0, hostname: "127.0.0.1" });
await new Promise((r) => server.once("listening", r));
const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

const screen: Record<string, number | boolean | null> = {
  first_screen_bottom_px: null,
  first_screen_fits: null,
  release_page_height_px: null,
  phone_overflow_px: null,
};
if (existsSync(CHROMIUM)) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
    headless: true,
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${base}/releases/${rolled.release.id}`);
    const bottom = async (sel: string) => {
      const b = await page.locator(sel).first().boundingBox();
      return b ? b.y + b.height : Number.POSITIVE_INFINITY;
    };
    const parts = await Promise.all(["#headline", "#offers", "#failed"].map(bottom));
    screen.first_screen_bottom_px = Math.round(await bottom("#first-screen"));
    screen.first_screen_fits = parts.every((b) => b <= 800);
    screen.release_page_height_px = await page.evaluate(
      () => document.documentElement.scrollHeight,
    );
    await page.setViewportSize({ width: 390, height: 844 });
    let worst = 0;
    for (const path of ["/releases", `/releases/${rolled.release.id}`, "/fleet"]) {
      await page.goto(`${base}${path}`);
      const o = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      console.log(`[bench] 390 px: ${path} overflows by ${o} px`);
      worst = Math.max(worst, o);
    }
    screen.phone_overflow_px = worst;
  } finally {
    await browser.close();
  }
} else {
  console.log(`[bench] ${CHROMIUM} missing: first-screen and phone figures are null`);
}

// ------------------------------------------------ live stream CPU per open page (store included)
server.close();
const engineH = await makeHarness({ kind: "sqlite", seed: recipe(2) });
const liveId = await createRelease(engineH, recipe(2));
const filler = bigRecord(20, 1, LIVE_HISTORY).history;
for (let i = 0; i < filler.length; i += 1_000) {
  await engineH.store.appendHistory(
    filler.slice(i, i + 1_000).map((e) => ({ ...e, release_id: liveId, step_run_id: null })),
  );
}
const liveRows = (await engineH.store.getHistory(liveId, { limit: 100_000 })).length;
const liveServer = serve({ fetch: engineH.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
await new Promise((r) => liveServer.once("listening", r));
const liveBase = `http://127.0.0.1:${(liveServer.address() as { port: number }).port}`;
const streams = await Promise.all(
  Array.from({ length: LIVE_PAGES }, async () => {
    const ac = new AbortController();
    const res = await fetch(`${liveBase}/releases/${liveId}/events?v=0`, {
      signal: ac.signal,
      headers: { authorization: `Bearer ${OPERATOR}` },
    });
    if (res.status !== 200) throw new Error(`[bench] live stream answered ${res.status}`);
    const reader = res.body!.getReader();
    void (async () => {
      try {
        for (;;) if ((await reader.read()).done) break;
      } catch {}
    })();
    return ac;
  }),
);
await new Promise((r) => setTimeout(r, 1_500)); // first poll and first event of every stream
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await new Promise((r) => setTimeout(r, LIVE_WINDOW_MS));
const cpu = process.cpuUsage(cpu0);
const wallS = (performance.now() - t0) / 1000;
for (const ac of streams) ac.abort();
liveServer.close();
await engineH.close();
const cpuMs = (cpu.user + cpu.system) / 1000;
const perPage = Number((cpuMs / LIVE_PAGES / wallS).toFixed(3));
console.log(
  `[bench] live: ${LIVE_PAGES} open streams on a release with ${liveRows} history rows (engine on SQLite, store queries included): ${cpuMs.toFixed(1)} ms CPU in ${wallS.toFixed(1)} s = ${perPage} ms CPU per page per second`,
);
console.log(
  `[bench] first screen at 1280×800: block ends at ${screen.first_screen_bottom_px} px, headline/actions/failed step fit: ${screen.first_screen_fits}; page ${screen.release_page_height_px} px tall; phone overflow ${screen.phone_overflow_px} px (must be 0)`,
);
console.log(
  `RESULT ${JSON.stringify({
    render_p50_ms: p50,
    page_bytes: bytes,
    ...screen,
    live_pages: LIVE_PAGES,
    live_history_rows: liveRows,
    live_store: "sqlite",
    live_cpu_ms_per_page_s: perPage,
  })}`,
);
process.exit(0);
