/**
 * Several engines, one database: three engine processes on one Postgres database,
 * `BATON_CHAOS_ENGINE_RELEASES` (default 100) concurrent releases of a one-lane recipe, dispatched through the GitHub stand-in to a
 * driver that plays the runners: it preflights and calls back over HTTP to RANDOM instances,
 * duplicates 10% of the callbacks (the same body to two instances at once), reorders 10%
 * (the callback is held back, then an older message — the preflight — is delivered after it),
 * and makes GitHub deliver 10% of the dispatches twice (a second run id, fenced at preflight).
 * One instance is SIGSTOPped for longer than the outbox lease, then SIGCONTed.
 * Overlapping starts (G9): in each of `OVERLAP_ROUNDS` rounds every engine receives
 * two releases at the same instant whose lanes overlap (one lane shared by all six, two-lane
 * recipes listing it first or last); exactly one may be accepted, the rest answered 409 naming
 * the owner, and the control plane must show one owner per lane: the shared lane carries only the
 * winner's model, and no write of a refused release's model reached it.
 *
 * Checked: every release `succeeded` with every step run succeeded and its lane at weight
 * 100, included and advertised; no (step run, dispatch seq) admitted two runs at preflight; no
 * operation key applied twice at the control plane; and the stale instance's writes refused
 * (conditional-update and outbox-claim conflicts counted by each instance). Dispatches sent again
 * for the same (step run, dispatch seq) — a paused engine whose send went out before its pause,
 * exactly like GitHub delivering twice — are counted and printed, and must all be fenced.
 */

import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { openStore } from "../../engine/src/adapters/store-factory.ts";
import { startEmbeddedControlPlane } from "../../engine/src/control-plane/embedded.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import { payloadDigestOf } from "../../engine/src/protocol/payload-digest.ts";
import { type EngineProcess, spawnEngineOnFreshPort } from "../support/chaos-process.ts";
import { startGitHubStandin } from "../support/github-standin.ts";
import {
  checkOverlapRound,
  interleavedHolders,
  type Lifetime,
  lifetimeOf,
  touchedByTraffic,
} from "../support/lane-lifetimes.ts";
import { type OneLaneFleet, oneLaneRecipe, oneLaneSeed } from "../support/one-lane-fleet.ts";
import type { PayloadLike } from "../support/preflight-request.ts";
import { type Row, rng } from "./table.ts";

/**
 * Concurrent one-lane releases (`BATON_CHAOS_ENGINE_RELEASES`, 10..1000, default 100).
 * @throws Error naming the variable and its range when it is anything else.
 */
function engineReleases(): number {
  const raw = process.env.BATON_CHAOS_ENGINE_RELEASES ?? "100";
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < 10 || n > 1000)
    throw new Error(
      `[chaos] BATON_CHAOS_ENGINE_RELEASES must be a whole number of releases from 10 to 1000, not ${JSON.stringify(raw)}`,
    );
  return n;
}
const ENGINES = 3;
const LEASE_MS = 3_000;
const STOP_MS = 3 * LEASE_MS;
const OVERLAP_ROUNDS = 5;

export interface EnginesOutcome {
  rows: Row[];
  duplicates: number;
  wrongTerminal: number;
  problems: string[];
  releases: number;
}

/** A release named `name` of `model` over `laneIds` (one wave at 100%). */
function overlapRecipe(name: string, model: string, laneIds: string[]): RecipeInput {
  const base = recipeFor(0) as unknown as { lanes: Record<string, unknown>[] };
  return {
    ...(base as unknown as RecipeInput),
    name,
    model,
    lanes: laneIds.map((id) => ({ ...base.lanes[0], id, queue: `q-${id}` })),
    rollout: { waves: [{ lanes: laneIds, traffic: 100 }] },
  } as unknown as RecipeInput;
}

const FLEET: OneLaneFleet = { name: "chaos", lane: "p" };

/** One round of overlapping starts: its shared lane and model, and the starts accepted. */
interface Overlap {
  round: number;
  shared: string;
  model: string;
  /** Accepted starts; `answeredAt` is when the driver read the 201 (epoch ms). */
  winners: { id: string; name: string; answeredAt: number }[];
  /** Lanes only refused releases named. */
  loserLanes: string[];
}

function recipeFor(i: number): RecipeInput {
  return oneLaneRecipe(FLEET, i);
}

async function freshDatabase(base: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `baton_chaos_${process.pid}_${Date.now() % 1e8}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(base);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Runs the scenario; `databaseUrl` is the test server (a fresh database is made on it). */
export async function manyEnginesScenario(
  root: string,
  databaseUrl: string,
  seed = Date.now() % 100_000,
): Promise<EnginesOutcome> {
  const RELEASES = engineReleases();
  const log = (s: string) => console.log(`[chaos] engines: ${s}`);
  const t0 = Date.now();
  const random = rng(seed);
  mkdirSync(root, { recursive: true });
  const db = await freshDatabase(databaseUrl);
  const { handle: cp } = await startEmbeddedControlPlane({ dataDir: join(root, "cp") });
  // The fleet before any release: each model's one lane, registered with all its traffic
  // (a start reads it as the observed baseline; a write never creates a lane).
  cp.core.seed(oneLaneSeed(FLEET, RELEASES + 1));
  const secret = randomBytes(24).toString("hex");
  const operatorToken = randomBytes(24).toString("hex");
  const token = `ghp_${randomBytes(18).toString("hex")}`;
  const engines: EngineProcess[] = [];
  const counts = {
    preflight200: 0,
    preflight409: 0,
    callbacks: 0,
    duplicated: 0,
    reordered: 0,
    redelivered: 0,
    retriedElsewhere: 0,
    server5xx: 0,
    /** Starts answered 503 (nothing written) and sent again. */
    startsAgain: 0,
  };
  const inflight = new Set<Promise<unknown>>();
  let stopped: EngineProcess | null = null;
  const pick = () => engines[Math.floor(random() * engines.length)]!;

  /** POSTs a signed body to a random instance; on no answer / 5xx, another one (bounded). */
  const post = async (path: string, body: unknown, first?: EngineProcess) => {
    const bytes = Buffer.from(JSON.stringify(body));
    let target = first ?? pick();
    for (let i = 0; i < 12; i++) {
      try {
        const res = await fetch(`${target.url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", ...signBody(secret, bytes) },
          body: bytes,
          signal: AbortSignal.timeout(2_000),
        });
        const text = await res.text();
        if (res.status < 500) return { status: res.status, text };
        counts.server5xx += 1;
      } catch {
        // hung (the stopped instance) or refused: the request may still be processed later
      }
      counts.retriedElsewhere += 1;
      await new Promise((r) => setTimeout(r, 100 * (i + 1)));
      target = pick();
    }
    return { status: 0, text: "" };
  };

  let runSeq = 1000;
  const playRun = async (p: Record<string, unknown>) => {
    const release = p.release as Record<string, unknown>;
    const runId = String(++runSeq);
    const srId = String(p.step_run_id);
    const pre = {
      step_run_id: srId,
      release_id: release.id,
      generation: release.generation,
      manifest_digest: release.manifest_digest,
      dispatch: release.dispatch,
      run_id: runId,
      run_attempt: 1,
      sha: "0000000",
      tool: p.tool,
      payload_digest: payloadDigestOf(p as unknown as PayloadLike),
    };
    const prePath = `/v1/releases/step-runs/${srId}/preflight`;
    const r = await post(prePath, pre);
    if (r.status === 409) {
      counts.preflight409 += 1;
      return;
    }
    if (r.status !== 200)
      throw new Error(`[chaos] preflight of ${srId}: HTTP ${r.status} ${r.text}`);
    counts.preflight200 += 1;
    await new Promise((res) => setTimeout(res, random() * 30));
    const cb = {
      step_run_id: srId,
      run_id: runId,
      run_attempt: 1,
      status: "succeeded",
      overall: "pass",
      checks: [{ name: String(p.tool), status: "ok" }],
      log: `chaos driver ran ${String(p.tool)}\n`,
    };
    const cbPath = `/v1/releases/step-runs/${srId}/callback`;
    const reorder = random() < 0.1;
    const duplicate = random() < 0.1;
    if (reorder) {
      counts.reordered += 1;
      await new Promise((res) => setTimeout(res, 200 + random() * 800));
    }
    const sends = [post(cbPath, cb)];
    if (duplicate) {
      counts.duplicated += 1;
      sends.push(post(cbPath, cb));
    }
    const answers = await Promise.all(sends);
    counts.callbacks += 1;
    if (!answers.some((a) => a.status === 200))
      throw new Error(
        `[chaos] callback of ${srId}: ${answers.map((a) => `${a.status} ${a.text}`).join(" | ")}`,
      );
    // An older message arriving after a newer one: the preflight again, after the callback.
    if (reorder) await post(prePath, pre);
  };

  /**
   * POST /v1/releases to `e`. A 503 wrote nothing ("start again": under load the control
   * plane's baseline read can time out), so it is sent again, at most 5 times.
   */
  const startRelease = async (e: EngineProcess, recipe: RecipeInput): Promise<Response> => {
    for (let t = 1; ; t++) {
      const res = await fetch(`${e.url}/v1/releases`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${operatorToken}` },
        body: JSON.stringify(recipe),
      });
      if (res.status !== 503 || t >= 5) return res;
      counts.startsAgain += 1;
      await res.body?.cancel();
      await new Promise((r) => setTimeout(r, 200 * t));
    }
  };

  const problems: string[] = [];
  const github = await startGitHubStandin({
    rateLimits: { perMinute: 100_000, perHour: 1_000_000, maxConcurrent: 100 },
    tokens: [token],
    onAccepted: (d) => {
      const copies = random() < 0.1 ? 2 : 1;
      if (copies === 2) counts.redelivered += 1;
      for (let c = 0; c < copies; c++) {
        const task = playRun(d.client_payload).catch((e: Error) => problems.push(e.message));
        inflight.add(task);
        void task.finally(() => inflight.delete(task));
      }
    },
  });
  try {
    for (let i = 0; i < ENGINES; i++) {
      engines.push(
        await spawnEngineOnFreshPort({
          DATABASE_URL: db.url,
          BATON_CALLBACK_SECRETS: secret,
          BATON_OPERATOR_TOKEN: operatorToken,
          BATON_ADMISSION: "off",
          BATON_CONTROL_PLANE_URL: cp.url,
          BATON_CONTROL_PLANE_TOKEN: cp.writeToken,
          GITHUB_REPOSITORY: "acme/models",
          GITHUB_TOKEN: token,
          // These scenarios test crashes and contention, not GitHub's rate limits
          // (test/integration/github-pacing.test.ts does): lift the budgets on both sides.
          BATON_GITHUB_DISPATCH_PER_MINUTE: "100000",
          BATON_GITHUB_DISPATCH_PER_HOUR: "1000000",
          CHAOS_GITHUB_API_URL: github.baseUrl,
          CHAOS_LEASE_MS: String(LEASE_MS),
          CHAOS_OWNER: `engine-${i + 1}`,
          BATON_TICK_MS: "100",
        }),
      );
    }
    log(
      `${ENGINES} engines on one Postgres database; starting ${RELEASES} releases (seed ${seed})`,
    );
    const ids: string[] = [];
    const modelOf = new Map<string, string>();
    const creators = Array.from({ length: RELEASES }, (_, i) => i);
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (creators.length > 0) {
          const i = creators.shift()!;
          const res = await startRelease(pick(), recipeFor(i));
          const body = (await res.json()) as { id?: string };
          if (res.status !== 201 || !body.id)
            throw new Error(
              `[chaos] POST /v1/releases: HTTP ${res.status} ${JSON.stringify(body)}`,
            );
          ids.push(body.id);
          modelOf.set(body.id, `chaos-model-${i}`);
        }
      }),
    );
    // Overlapping starts on every engine at the same instant: one owner per lane.
    const overlaps: Overlap[] = [];
    for (let round = 0; round < OVERLAP_ROUNDS; round++) {
      const shared = `ov${round}-shared`;
      // One model per round, as the control plane knows it (a start whose lanes disagree with
      // the observed baseline is a 422 before any claim): the shared lane serves it at 100%,
      // each engine's own lane is declared for it at weight 0.
      const model = `ov-model-${round}`;
      cp.core.seed([
        { id: shared, model, weight: 100, capabilities: ["summarize"] },
        ...engines.map((_, k) => ({
          id: `ov${round}-own-${k}`,
          model,
          weight: 0,
          capabilities: ["summarize"],
        })),
      ]);
      const asks = engines.flatMap((e, k) =>
        [0, 1].map((j) => {
          const name = `ov-${round}-${k}${j}`;
          const lanes =
            j === 0
              ? [shared]
              : k % 2
                ? [shared, `ov${round}-own-${k}`]
                : [`ov${round}-own-${k}`, shared];
          return { e, name, model, lanes };
        }),
      );
      const answers = await Promise.all(
        asks.map(async (a) => {
          const res = await startRelease(a.e, overlapRecipe(a.name, a.model, a.lanes));
          const body = (await res.json()) as {
            id?: string;
            error?: { code: string; message: string };
          };
          // When the driver saw the answer: a 201's release committed before this instant.
          return { ...a, status: res.status, body, answeredAt: Date.now() };
        }),
      );
      const won = answers.filter((a) => a.status === 201 && a.body.id);
      const lost = answers.filter((a) => a.status !== 201);
      // Several accepted starts are judged at the end, from each winner's history: they are a
      // violation only if their lifetimes overlap (checkOverlapRound).
      if (won.length === 0)
        problems.push(
          `overlap round ${round}: none of ${answers.length} overlapping starts accepted (want one at a time)`,
        );
      const winners = won.map((w) => w.body.id!);
      for (const l of lost) {
        if (
          l.status !== 409 ||
          l.body.error?.code !== "conflict" ||
          !winners.some((id) => l.body.error!.message.includes(`release ${id} `))
        )
          problems.push(
            `overlap round ${round}: ${l.name} answered ${l.status} ${JSON.stringify(l.body)} (want 409 naming ${winners.join(" or ") || "the winner"})`,
          );
      }
      for (const w of won) {
        ids.push(w.body.id!);
        modelOf.set(w.body.id!, w.model);
      }
      const winnerLanes = new Set(won.flatMap((w) => w.lanes));
      overlaps.push({
        round,
        shared,
        winners: won.map((w) => ({ id: w.body.id!, name: w.name, answeredAt: w.answeredAt })),
        model,
        // Lanes only a refused release named: no write may ever reach them.
        loserLanes: [...new Set(lost.flatMap((l) => l.lanes).filter((id) => !winnerLanes.has(id)))],
      });
    }
    const accepted = overlaps.reduce((a, o) => a + o.winners.length, 0);
    log(
      `${OVERLAP_ROUNDS} rounds of ${ENGINES * 2} overlapping starts at once: ${accepted} accepted, ${OVERLAP_ROUNDS * ENGINES * 2 - accepted} refused 409`,
    );

    // Pause one instance while it works, for longer than the lease, then let it go on stale.
    stopped = engines[2]!;
    stopped.child.kill("SIGSTOP");
    log(`engine-3 SIGSTOPped for ${STOP_MS} ms (lease ${LEASE_MS} ms)`);
    await new Promise((r) => setTimeout(r, STOP_MS));
    stopped.child.kill("SIGCONT");
    log("engine-3 SIGCONTed");

    const until = Date.now() + 180_000;
    const reader = engines[0]!;
    let states: Record<string, string> = {};
    for (let i = 0; i < 2_000 && Date.now() < until; i++) {
      const res = await fetch(`${reader.url}/v1/releases?limit=200`, {
        headers: { authorization: `Bearer ${operatorToken}` },
      }).catch(() => null);
      if (res?.status === 200) {
        const body = (await res.json()) as { releases: { id: string; state: string }[] };
        states = Object.fromEntries(body.releases.map((r) => [r.id, r.state]));
        const ended = ids.filter((id) =>
          ["succeeded", "rolled_back", "aborted", "needs_operator", "paused"].includes(
            states[id] ?? "",
          ),
        );
        if (ended.length === ids.length && inflight.size === 0) break;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    if (Object.keys(states).length === 0) problems.push("could not list the releases");
    const stats = await Promise.all(
      engines.map(async (e) => {
        const res = await fetch(`${e.url}/chaos/stats`).catch(() => null);
        return (res ? await res.json() : {}) as Record<string, number>;
      }),
    );
    for (const e of engines) await e.stop();

    // Verdict from the store, the stand-in and the control plane.
    const store = await openStore({ databaseUrl: db.url, dataDir: root });
    let wrongTerminal = 0;
    let doubleRuns = 0;
    let cp409 = 0;
    try {
      for (const id of ids) {
        const r = await store.getRelease(id);
        if (!r) {
          wrongTerminal += 1;
          problems.push(`release ${id} is missing`);
          continue;
        }
        const bad = r.step_runs.filter((s) => s.state !== "succeeded");
        // The release's lanes carry all of its model's traffic, included and advertised; a lane
        // of the model it does not name (an overlap round's other lanes) stays at weight 0.
        const named = new Set(r.manifest.lanes.map((l) => l.id));
        const all = cp.core.lanes(modelOf.get(id));
        const lanes = all.filter((l) => named.has(l.id));
        const lane = lanes.length === 1 ? lanes[0] : lanes;
        const laneOk =
          lanes.length === r.manifest.lanes.length &&
          lanes.reduce((a, l) => a + l.weight, 0) === 100 &&
          all.every((l) => named.has(l.id) || l.weight === 0) &&
          lanes.every((l) => !l.excluded && l.advertised);
        if (r.state !== "succeeded" || bad.length > 0 || !laneOk) {
          wrongTerminal += 1;
          problems.push(
            `release ${id} ended ${r.state} (${r.reason ?? ""}); ${bad.map((s) => `${s.id}=${s.state}`).join(" ")}; lane ${JSON.stringify(lane ?? null)}`,
          );
        }
        for (const e of await store.getHistory(id, { limit: 10_000 })) {
          if (e.kind === "applied" && /HTTP 409/.test(e.message)) cp409 += 1;
        }
        for (const sr of r.step_runs) {
          const byDispatch = new Map<number, Set<string>>();
          for (const a of sr.attempts) {
            byDispatch.set(a.dispatch, (byDispatch.get(a.dispatch) ?? new Set()).add(a.run_id));
          }
          for (const [d, runs] of byDispatch) {
            if (runs.size > 1) {
              doubleRuns += runs.size - 1;
              problems.push(`step run ${sr.id} dispatch ${d} admitted ${runs.size} runs`);
            }
          }
        }
      }
      // Two starts of one round accepted: only if the first had ended before the second began.
      for (const o of overlaps) {
        if (o.winners.length < 2) continue;
        const lives: Lifetime[] = [];
        for (const w of o.winners) {
          const r = await store.getRelease(w.id);
          const history = r ? await store.getHistory(w.id, { limit: 10_000 }) : [];
          lives.push(lifetimeOf(w, r, history));
        }
        const verdict = checkOverlapRound(o, lives, t0);
        if (verdict.problem) problems.push(verdict.problem);
        else log(verdict.note);
      }
      // A refused start wrote nothing: the database holds exactly the accepted releases.
      const stored = await store.listReleases({ limit: 1000 });
      if (stored.length !== ids.length)
        problems.push(
          `${stored.length} releases stored, ${ids.length} accepted (a refused start was half-written)`,
        );
    } finally {
      await store.close();
    }
    // One owner per lane, read from the control plane: the shared lane serves the round's
    // model only, only the round's accepted releases wrote it, and no write for a refused
    // release's model ever reached it.
    let laneOwners = 0;
    const cpHistory = cp.core.history({ limit: 1_000_000 });
    for (const o of overlaps) {
      const lane = cp.core.lanes().find((l) => l.id === o.shared);
      if (o.winners.length === 0 || lane?.model !== o.model)
        problems.push(
          `lane ${o.shared}: control plane says model ${lane?.model ?? "none"}, want ${o.model} (release ${o.winners.map((w) => w.id).join(", ") || "none"})`,
        );
      const writers = new Set(
        cpHistory
          .filter((c) => c.lane === o.shared || touchedByTraffic(c).includes(o.shared))
          .map((c) => c.release_id),
      );
      const strangers = [...writers].filter((id) => !o.winners.some((w) => w.id === id));
      if (writers.size === 0 || strangers.length > 0)
        problems.push(
          `lane ${o.shared}: written by ${[...writers].join(", ") || "nobody"} (want only ${o.winners.map((w) => w.id).join(", ")})`,
        );
      else laneOwners += 1;
      for (const id of o.loserLanes) {
        const wrote = cpHistory.some(
          (c) =>
            c.lane === id ||
            (c.kind === "set_traffic" && new RegExp(`"${id}":[1-9]`).test(JSON.stringify(c.after))),
        );
        if (wrote) problems.push(`lane ${id}, named only by refused releases, was written`);
      }
    }
    // No two releases held one lane at once: each lane's writers, in the control plane's
    // order, never interleave (A, B, A).
    const held = interleavedHolders(cpHistory);
    problems.push(...held.problems);
    log(
      `one owner per lane at the control plane: ${laneOwners} of ${overlaps.length} shared lanes; ${held.lanes} lanes written, ${held.handovers} handed from one release to another, ${held.problems.length} held by two releases at once`,
    );
    const sent = new Map<string, number>();
    for (const d of github.accepted) {
      const p = d.client_payload as { step_run_id: string; release: { dispatch: number } };
      const k = `${p.step_run_id}#${p.release.dispatch}`;
      sent.set(k, (sent.get(k) ?? 0) + 1);
    }
    // A dispatch sent again for the same (step run, dispatch seq) is what GitHub itself may do
    // (deliver twice); it is fenced at preflight. What must never happen is a second admitted run.
    let redundantDispatches = 0;
    for (const n of sent.values()) redundantDispatches += n - 1;
    let cpTwice = 0;
    let cpApplied = 0;
    for (const [key, n] of Object.entries(cp.core.applicationCounts())) {
      cpApplied += n;
      if (n > 1) {
        cpTwice += n - 1;
        problems.push(`control plane applied ${key} ${n} times`);
      }
    }
    const sum = (k: string) => stats.reduce((a, s) => a + (s[k] ?? 0), 0);
    log(
      `${ids.length} releases in ${((Date.now() - t0) / 1000).toFixed(1)} s; ${github.accepted.length} dispatches, ${counts.preflight200} runs admitted, ${counts.preflight409} refused at preflight (${counts.redelivered} GitHub redeliveries), ${counts.callbacks} callbacks (${counts.duplicated} duplicated, ${counts.reordered} reordered), ${counts.retriedElsewhere} requests retried at another instance, ${counts.startsAgain} starts answered 503 and sent again`,
    );
    log(
      `refused writes per instance: ${stats.map((s, i) => `engine-${i + 1} resource_version ${s.resource_version ?? 0}, outbox_claim ${s.outbox_claim ?? 0}`).join("; ")}`,
    );
    log(
      `stale instance engine-3: ${stats[2]?.outbox_claim ?? 0} outcomes refused (claim lost), ${stats[2]?.resource_version ?? 0} conditional updates lost; total conflicts ${sum("resource_version")} + ${sum("outbox_claim")}; control-plane writes refused 409 (stale generation): ${cp409}`,
    );
    log(
      `engine-sent dispatches repeated for the same (step run, dispatch seq): ${redundantDispatches} (all fenced at preflight: ${doubleRuns} second runs admitted)`,
    );
    const duplicates = doubleRuns + cpTwice;
    return {
      rows: [
        {
          scenario: `${ENGINES} engines, 1 Postgres, SIGSTOP`,
          tried: github.accepted.length + counts.callbacks,
          releases: ids.length,
          effects: cpApplied,
          duplicates,
          wrong: wrongTerminal,
        },
      ],
      duplicates,
      wrongTerminal,
      problems,
      releases: ids.length,
    };
  } finally {
    stopped?.child.kill("SIGCONT");
    for (const e of engines) await e.kill();
    await github.close();
    await cp.close();
    await db.drop().catch(() => {});
  }
}
