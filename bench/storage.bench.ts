/**
 * Storage benchmark (`npm run bench:storage`): bytes per finished release before and after
 * retention, and whether reads stay as fast with 10,000 releases as with 10.
 *
 * 1. One real release (4 lanes) is driven to `succeeded` through the engine on SQLite with the
 *    in-memory doubles (test/integration/service-harness.ts); its stored rows are the template.
 * 2. A fresh SQLite store (the embedded default) gets 10,000 copies through the store port:
 *    `createRelease` (release document, manifest, accepted history, deadline rows left
 *    pending) and one `commit` with the attempt results, each carrying an 8 KB runner log and
 *    the raw callback, plus 5 refused history rows (late or forged requests) per release.
 * 3. The release list (`listReleases`, first page of 50) and a release page (the release, its
 *    history, attempt results and gate evidence) are timed (median of 50) at 10 and at 10,000
 *    releases; `list_and_page_as_fast` says each stayed within 2× (or 1 ms) of its time at 10. Then `compactFinished` runs in batches of 500 until nothing is left,
 *    the file is checkpointed and vacuumed, and the size is read again.
 * Last line: `RESULT {"releases":10000,"db_bytes_per_release":X,...}`; goal ≤ 50,000 bytes.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { openSqliteStore } from "../engine/src/adapters/sqlite/sqlite-store.ts";
import type { HistoryEntry, Release } from "../engine/src/domain/types.ts";
import type { AttemptResult } from "../engine/src/ports/store.ts";
import { createRelease, drive, makeHarness, recipe } from "../test/integration/service-harness.ts";

const RELEASES = Number(process.env.BENCH_RELEASES ?? 10_000);
const LOG_BYTES = 8_192;

// 1. the template
// The control plane knows the recipe's 4 lanes (a start reads them as the observed baseline).
const h = await makeHarness({ kind: "sqlite", seed: recipe(4) });
const firstId = await createRelease(h, recipe(4));
await drive(h);
const template = await h.store.getRelease(firstId);
const templateHistory = await h.store.getHistory(firstId);
const templateAttempts = await h.store.listAttemptResults(firstId);
await h.close();
if (!template || template.state !== "succeeded") {
  throw new Error(`[bench] template release ended ${template?.state}, not succeeded`);
}
const log = Array.from(
  { length: Math.ceil(LOG_BYTES / 64) },
  (_, i) => `[deploy] ${String(i).padStart(4, "0")} pulling layer sha256:${"ab".repeat(20)} ok\n`,
)
  .join("")
  .slice(0, LOG_BYTES);

// 2. 10,000 copies
const dir = mkdtempSync(path.join(tmpdir(), "baton-storage-bench-"));
const file = path.join(dir, "engine.db");
const store = await openSqliteStore(file);
await store.migrate();

function copy(n: number): { release: Release; history: HistoryEntry[]; attempts: AttemptResult[] } {
  const id = `r${n}`;
  const ren = (s: string) =>
    s.replaceAll(`${firstId}`, id).replaceAll(`sr_${firstId.slice(1)}_`, `sr_${n}_`);
  const release = JSON.parse(ren(JSON.stringify(template))) as Release;
  release.created_at = template!.created_at + n;
  release.updated_at = template!.updated_at + n;
  const history = templateHistory.map((e) => JSON.parse(ren(JSON.stringify(e))) as HistoryEntry);
  for (let i = 0; i < 5; i++) {
    history.push({
      release_id: id,
      at: release.updated_at,
      kind: "callback",
      step_run_id: `sr_${n}_1_f`,
      outcome: "refused",
      message: `[engine] callback for sr_${n}_1_f refused: bad credential (${i + 1} requests this minute)`,
      data: { count: i + 1 },
    });
  }
  const attempts = templateAttempts.map((a) => ({
    ...(JSON.parse(ren(JSON.stringify(a))) as AttemptResult),
    log,
    raw_callback: JSON.stringify({ status: a.status, overall: a.overall, checks: a.checks, log }),
  }));
  return { release, history, attempts };
}

const deadlines = template.step_runs
  .filter((s) => s.kind === "runner")
  .map((s) => ({
    type: "deadline" as const,
    step_run_id: s.id,
    kind: "callback" as const,
    dispatch: 1,
    attempt: 1,
    at: template.updated_at + 600_000,
  }));

async function insert(n: number): Promise<void> {
  const c = copy(n);
  const created = { ...c.release, resource_version: c.release.resource_version - 1 };
  await store.createRelease(
    created,
    c.history,
    deadlines.map((d) => ({ ...d, step_run_id: d.step_run_id.replace(/^sr_\d+_/, `sr_${n}_`) })),
    created.updated_at,
  );
  const r = await store.commit({
    release: c.release,
    expected_version: created.resource_version,
    history: [],
    effects: [],
    now: c.release.updated_at,
    attempt_results: c.attempts,
  });
  if (!r.ok) throw new Error(`[bench] commit of r${n} failed: ${r.conflict}`);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return Number((s[Math.floor(s.length / 2)] ?? 0).toFixed(3));
}

/**
 * Medians (ms, of 50) of the two reads a person waits on: the release list (first page of 50,
 * as `GET /v1/releases` and the dashboard's list read it) and one release page (what
 * `GET /v1/releases/:id` and the dashboard's release page read: the release, its history, its
 * attempt results and its gate evidence).
 */
async function readTimes(): Promise<{ list_ms: number; page_ms: number }> {
  const list: number[] = [];
  const page: number[] = [];
  for (let i = 0; i < 50; i++) {
    let t0 = performance.now();
    const rows = await store.listReleases({ limit: 50 });
    list.push(performance.now() - t0);
    const id = rows[i % rows.length]?.id ?? "r1";
    t0 = performance.now();
    await Promise.all([
      store.getRelease(id),
      store.getHistory(id),
      store.listAttemptResults(id),
      store.listEvidence(id),
    ]);
    page.push(performance.now() - t0);
  }
  return { list_ms: median(list), page_ms: median(page) };
}

/**
 * "As fast at N as at 10": each read's median at N releases is within twice its median at 10,
 * or within 1 ms of it (sub-millisecond medians vary more than that between runs).
 */
function asFast(at10: number, atN: number): boolean {
  return atN <= Math.max(2 * at10, at10 + 1);
}

function dbBytes(): number {
  store.database.pragma("wal_checkpoint(TRUNCATE)");
  let total = 0;
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    try {
      total += statSync(f).size;
    } catch {
      // absent
    }
  }
  return total;
}

const t0 = performance.now();
for (let n = 1; n <= 10; n++) await insert(n);
const at10 = await readTimes();
for (let n = 11; n <= RELEASES; n++) await insert(n);
const insertMs = performance.now() - t0;
const atN = await readTimes();
store.database.exec("VACUUM");
const before = dbBytes();

// 3. retention
const t1 = performance.now();
let compacted = 0;
for (let pass = 0; pass < RELEASES; pass++) {
  const r = await store.compactFinished({
    before: Number.MAX_SAFE_INTEGER,
    now: Date.now(),
    limit: 500,
    logTailChars: 4096,
  });
  compacted += r.releases;
  if (r.releases === 0) break;
}
const compactMs = performance.now() - t1;
store.database.exec("VACUUM");
const after = dbBytes();
const afterReads = await readTimes();
const check = await store.getRelease(`r${RELEASES}`);
if (
  !check ||
  check.state !== "succeeded" ||
  check.manifest.steps.length !== template.manifest.steps.length
) {
  throw new Error("[bench] a compacted release does not read back whole");
}
await store.close();
if (!process.env.BENCH_KEEP) rmSync(dir, { recursive: true, force: true });
else console.log(`[bench] kept ${file}`);

const result = {
  releases: RELEASES,
  db_bytes_per_release: Math.round(after / RELEASES),
  db_bytes_per_release_before: Math.round(before / RELEASES),
  goal_bytes_per_release: 50_000,
  compacted,
  compact_ms_per_release: Number((compactMs / Math.max(1, compacted)).toFixed(3)),
  insert_ms_per_release: Number((insertMs / RELEASES).toFixed(3)),
  list_ms_10: at10.list_ms,
  [`list_ms_${RELEASES}`]: atN.list_ms,
  [`list_ms_${RELEASES}_compacted`]: afterReads.list_ms,
  page_ms_10: at10.page_ms,
  [`page_ms_${RELEASES}`]: atN.page_ms,
  [`page_ms_${RELEASES}_compacted`]: afterReads.page_ms,
  list_and_page_as_fast:
    asFast(at10.list_ms, atN.list_ms) &&
    asFast(at10.list_ms, afterReads.list_ms) &&
    asFast(at10.page_ms, atN.page_ms) &&
    asFast(at10.page_ms, afterReads.page_ms),
};
console.log(
  `[bench] ${RELEASES} finished releases on SQLite: ${result.db_bytes_per_release_before} bytes each before retention, ${result.db_bytes_per_release} after (goal ≤ 50,000); list and page as fast at ${RELEASES} as at 10: ${result.list_and_page_as_fast}`,
);
console.log(`RESULT ${JSON.stringify(result)}`);
