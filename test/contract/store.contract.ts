/**
 * The store contract (engine/src/ports/store.ts), one suite run against every adapter:
 * `test/integration/store.sqlite.test.ts` and `test/integration/store.postgres.test.ts`.
 * Each test gets an empty database from the factory, plus a way to open a second store on
 * the same database (another connection / Pool) for the concurrency tests.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { GateEvidence } from "../../engine/src/domain/gate/evidence.ts";
import type { SourceMark } from "../../engine/src/domain/source-order.ts";
import type { Effect, HistoryEntry, Json, Release } from "../../engine/src/domain/types.ts";
import {
  type AttemptResult,
  LanesClaimed,
  SourceMarkMoved,
  type Store,
} from "../../engine/src/ports/store.ts";

export interface StoreHarness {
  /** A migrated store on an empty database. */
  store: Store;
  /** Opens (and migrates) another store on the same database. Closed by `dispose`. */
  openPeer(): Promise<Store>;
  /**
   * Opens a store on the same (migrated) database that refuses every write, the way a full
   * disk or a read-only database does (SQLite opened read-only; Postgres with
   * default_transaction_read_only). Closed by `dispose`.
   */
  openReadOnlyPeer(): Promise<Store>;
  /** Closes every store and removes the database. */
  dispose(): Promise<void>;
}

export type StoreFactory = () => Promise<StoreHarness>;

const T0 = 1_700_000_000_000;

/** A small but complete release: one control-plane step, one step run. */
export function makeRelease(n: number, patch: Partial<Release> = {}): Release {
  const id = `r${n}`;
  return {
    id,
    state: "running",
    generation: 1,
    resource_version: 1,
    manifest_digest: `sha256:${"ab".repeat(32)}`,
    manifest: {
      v: 1,
      recipe_name: "llama-canary",
      model: "llama-3-8b",
      image: `ghcr.io/acme/serve@sha256:${"cd".repeat(32)}`,
      previous_image: `ghcr.io/acme/serve@sha256:${"ef".repeat(32)}`,
      tool_revision: null,
      lanes: [],
      waves: [{ lanes: ["a"], traffic: 10 }],
      steps: [
        {
          index: 0,
          name: "set_traffic",
          kind: "control_plane",
          lane: null,
          wave: 0,
          forward: {
            kind: "control_plane",
            name: "set_traffic",
            target: "model",
            request: { op: "set_traffic", weights: { a: 10, b: 90 }, percent: 10 },
          },
          backward: null,
          retries: 2,
          on_failure: "compensate",
          start_deadline_ms: 60_000,
          callback_deadline_ms: 600_000,
        },
      ],
    },
    high_water_mark: -1,
    cursor: 0,
    step_runs: [
      {
        id: `sr_${n}_0_f`,
        step_index: 0,
        direction: "fwd",
        kind: "control_plane",
        state: "planned",
        operation_key: `${id}/0/fwd/model`,
        dispatch: 0,
        bound_run_id: null,
        attempts: [],
        tries: 0,
        retries_used: 0,
        created_at: T0,
        started_at: null,
        finished_at: null,
        last_error: null,
      },
    ],
    reason: null,
    created_at: T0 + n,
    updated_at: T0 + n,
    ...patch,
  };
}

function note(releaseId: string, message: string, data: Json = null): HistoryEntry {
  return {
    release_id: releaseId,
    at: T0,
    kind: "transition",
    step_run_id: null,
    outcome: "accepted",
    message,
    data,
  };
}

function deadline(stepRunId: string, at: number): Effect {
  return { type: "deadline", step_run_id: stepRunId, kind: "start", dispatch: 1, attempt: 0, at };
}

function apply(stepRunId: string, notBefore: number | null = null): Effect {
  return {
    type: "control_plane",
    step_run_id: stepRunId,
    operation_key: `${stepRunId}/key`,
    mode: "apply",
    request: { op: "set_traffic", weights: { a: 10, b: 90 }, percent: 10 },
    generation: 1,
    not_before: notBefore,
  };
}

/** `checks.json` text with keys out of order, which jsonb would reorder. */
/** checks.json of a passing attempt as retention judges it (an array of records, none failed). */
const PASSING_CHECKS = [{ name: "health", status: "ok" }];

const CHECKS_TEXT =
  '{"zeta":{"ok":true,"ms":12.5},"alpha":[3,1,2],"Ünïcode ✓":"ß","b":null,"aa":{"y":1,"x":2}}';

function attemptResult(stepRunId: string, attempt: number, patch: Partial<AttemptResult> = {}) {
  return {
    step_run_id: stepRunId,
    attempt,
    release_id: "r1",
    received_at: T0 + attempt,
    status: "completed",
    overall: "pass",
    checks: JSON.parse(CHECKS_TEXT) as Json,
    log: "line 1\nline 2 ✓\n",
    log_truncated: false,
    raw_callback: ' {"status": "completed",  "overall":"pass"}\n',
    preflight: { run_id: "991", run_attempt: 1 },
    ...patch,
  } satisfies AttemptResult;
}

/** The release as the next transition would write it. */
function next(r: Release, patch: Partial<Release> = {}): Release {
  return { ...r, resource_version: r.resource_version + 1, updated_at: r.updated_at + 1, ...patch };
}

export function storeContract(name: string, factory: StoreFactory): void {
  describe(`store contract: ${name}`, () => {
    let h: StoreHarness;
    let store: Store;

    beforeEach(async () => {
      h = await factory();
      store = h.store;
    });
    afterEach(async () => {
      await h.dispose();
    });

    async function created(n = 1, effects: Effect[] = []): Promise<Release> {
      const r = makeRelease(n);
      await store.createRelease(r, [note(r.id, "[engine] release created")], effects, T0);
      return r;
    }

    it("migrate is idempotent", async () => {
      await store.migrate();
      await created();
      await store.migrate();
      expect(await store.getRelease("r1")).not.toBeNull();
    });

    it("stores and lists a release in every state, abandoned included", async () => {
      const states = ["pending", "paused", "needs_operator", "abandoned"] as const;
      for (const [i, state] of states.entries()) {
        await store.createRelease(makeRelease(i + 1, { state }), [], [], T0 + i);
      }
      expect((await store.getRelease("r4"))?.state).toBe("abandoned");
      const listed = await store.listReleases({ state: "abandoned", limit: 10 });
      expect(listed.map((r) => r.id)).toEqual(["r4"]);
    });

    it("nextReleaseNumber is increasing and unique across concurrent callers and stores", async () => {
      const peer = await h.openPeer();
      const first = await store.nextReleaseNumber();
      const all = await Promise.all(
        Array.from({ length: 40 }, (_, i) => (i % 2 ? peer : store).nextReleaseNumber()),
      );
      expect(new Set(all).size).toBe(40);
      expect(Math.min(...all)).toBeGreaterThan(first);
    });

    it("createRelease stores the whole release, its history and its effects", async () => {
      const r = makeRelease(7);
      const effects = [
        apply("sr_7_0_f"),
        apply("sr_7_0_f", T0 + 500),
        deadline("sr_7_0_f", T0 + 900),
      ];
      await store.createRelease(r, [note(r.id, "created", { a: [1, "x"] })], effects, T0);
      expect(await store.getRelease("r7")).toEqual(r);
      expect(await store.getRelease("r8")).toBeNull();
      expect(await store.getHistory("r7")).toEqual([note(r.id, "created", { a: [1, "x"] })]);
      const pending = await store.pendingOutbox("r7");
      expect(pending.map((p) => p.effect)).toEqual(effects);
      // due_at = effect.not_before ?? effect.at ?? now
      expect(pending.map((p) => p.due_at)).toEqual([T0, T0 + 500, T0 + 900]);
      expect(pending.every((p) => p.claim_token === null && p.claims === 0)).toBe(true);
    });

    it("createRelease of an existing id fails with a [store] error and writes nothing", async () => {
      await created(1);
      const dup = makeRelease(1, { state: "paused" });
      await expect(
        store.createRelease(dup, [note("r1", "again")], [apply("sr_1_0_f")], T0),
      ).rejects.toThrow(/^\[store\] creating release r1 failed and was rolled back/);
      expect((await store.getRelease("r1"))?.state).toBe("running");
      expect(await store.getHistory("r1")).toHaveLength(1);
      expect(await store.pendingOutbox("r1")).toHaveLength(0);
    });

    it("createRelease raises the model's admission mark, never lowers it, and rolls back with the release", async () => {
      expect(await store.getAdmissionMark("llama-3-8b")).toBeNull();
      const mark = (n: number, issued_at: number) => ({
        model: "llama-3-8b",
        issued_at,
        manifest_digest: String(n).repeat(64).slice(0, 64),
        release_id: `r${n}`,
      });
      await store.createRelease(makeRelease(1), [], [], T0, { admissionMark: mark(1, T0) });
      expect(await store.getAdmissionMark("llama-3-8b")).toEqual(mark(1, T0));
      // An older manifest (an explicit rollback) leaves the mark where it was.
      await store.createRelease(makeRelease(2), [], [], T0, { admissionMark: mark(2, T0 - 1) });
      expect(await store.getAdmissionMark("llama-3-8b")).toEqual(mark(1, T0));
      await store.createRelease(makeRelease(3), [], [], T0, { admissionMark: mark(3, T0 + 1) });
      expect(await store.getAdmissionMark("llama-3-8b")).toEqual(mark(3, T0 + 1));
      // A failed create (duplicate id) does not move the mark.
      await expect(
        store.createRelease(makeRelease(3), [], [], T0, { admissionMark: mark(4, T0 + 9) }),
      ).rejects.toThrow(/^\[store\]/);
      expect(await store.getAdmissionMark("llama-3-8b")).toEqual(mark(3, T0 + 1));
      expect(await store.getAdmissionMark("another-model")).toBeNull();
    });

    it("gate evidence: the first write of a (release, generation, wave, seq) stands; listed in order, per release", async () => {
      await created(1);
      const ev = (patch: Partial<GateEvidence>): GateEvidence => ({
        release_id: "r1",
        generation: 1,
        manifest_digest: "d".repeat(64),
        wave: 0,
        seq: 1,
        at: T0,
        phase: "gate",
        decision: "wait",
        reason: "baking: 10 s of 60 s — ok ✓",
        alpha: 0.05,
        elapsed_ms: 10_000,
        arms: { candidate: 120, control: 480 },
        srm: {
          planned: [0.2, 0.8],
          observed: [120, 480],
          log_bayes_factor: -2.5,
          p_value: 1,
          mismatch: false,
        },
        metrics: [
          {
            name: "error-rate",
            required: true,
            verdict: "undecided",
            missing: null,
            candidate: { x: 1, n: 120 },
            control: { x: 5, n: 480 },
            estimate: 0.002,
            lower: -0.03,
            upper: 0.03,
            margin: 0.01,
            slo: null,
          },
        ],
        ...patch,
      });
      expect(await store.listEvidence("r1")).toEqual([]);
      expect(await store.appendEvidence(ev({ seq: 2, decision: "pass", at: T0 + 2 }))).toBe(true);
      expect(await store.appendEvidence(ev({}))).toBe(true);
      expect(await store.appendEvidence(ev({ wave: 1, seq: 1, decision: "fail" }))).toBe(true);
      expect(await store.appendEvidence(ev({ generation: 2, seq: 1 }))).toBe(true);
      // A repeat of a key (a retried write after a crash) changes nothing.
      expect(await store.appendEvidence(ev({ decision: "fail", reason: "other" }))).toBe(false);
      expect(await store.appendEvidence(ev({ release_id: "r9", seq: 1 }))).toBe(true);
      const listed = await store.listEvidence("r1");
      expect(listed.map((e) => [e.generation, e.wave, e.seq, e.decision])).toEqual([
        [1, 0, 1, "wait"],
        [1, 0, 2, "pass"],
        [1, 1, 1, "fail"],
        [2, 0, 1, "wait"],
      ]);
      expect(listed[0]).toEqual(ev({}));
      expect(await store.listEvidence("r9")).toHaveLength(1);
    });

    it("commit writes the release, history and outbox rows together", async () => {
      const r = await created();
      const r2 = next(r, { state: "paused", high_water_mark: 0, cursor: 1, reason: "why" });
      const history = [
        note("r1", "one", { n: [1, "x"] }),
        note("r1", "two", "text"),
        note("r1", "three"),
      ];
      const res = await store.commit({
        release: r2,
        expected_version: 1,
        history,
        effects: [deadline("sr_1_0_f", T0 + 5), apply("sr_1_0_f")],
        now: T0,
      });
      expect(res).toEqual({ ok: true });
      expect(await store.getRelease("r1")).toEqual(r2);
      expect((await store.getHistory("r1")).slice(1)).toEqual(history);
      const pending = await store.pendingOutbox("r1");
      expect(pending.map((p) => [p.due_at, p.effect])).toEqual([
        [T0, apply("sr_1_0_f")],
        [T0 + 5, deadline("sr_1_0_f", T0 + 5)],
      ]);
      const [summary] = await store.listReleases({ limit: 10 });
      expect(summary).toMatchObject({ id: "r1", state: "paused", high_water_mark: 0, cursor: 1 });
      expect(summary?.step_count).toBe(1);
      expect(summary?.updated_at).toBe(r2.updated_at);
    });

    it("commit on a stale resource_version is a conflict and writes nothing", async () => {
      const r = await created();
      const ok = await store.commit({
        release: next(r),
        expected_version: 1,
        history: [],
        effects: [],
        now: T0,
      });
      expect(ok.ok).toBe(true);
      const stale = await store.commit({
        release: next(r, { state: "aborted" }),
        expected_version: 1,
        history: [note("r1", "stale")],
        effects: [apply("sr_1_0_f")],
        now: T0,
        attempt_results: [attemptResult("sr_1_0_f", 1)],
      });
      expect(stale).toEqual({ ok: false, conflict: "resource_version" });
      expect((await store.getRelease("r1"))?.state).toBe("running");
      expect((await store.getRelease("r1"))?.resource_version).toBe(2);
      expect(await store.getHistory("r1")).toHaveLength(1);
      expect(await store.pendingOutbox("r1")).toHaveLength(0);
      expect(await store.getAttemptResult("sr_1_0_f", 1)).toBeNull();
    });

    it("getReleaseIfChanged: unchanged at the stored version, the release after another write, null when absent", async () => {
      const r = await created();
      expect(await store.getReleaseIfChanged("r1", 1)).toBe("unchanged");
      const r2 = next(r, { state: "paused", reason: "another engine" });
      expect(
        await store.commit({ release: r2, expected_version: 1, history: [], effects: [], now: T0 }),
      ).toEqual({ ok: true });
      expect(await store.getReleaseIfChanged("r1", 1)).toEqual(r2);
      expect(await store.getReleaseIfChanged("r1", 2)).toBe("unchanged");
      expect(await store.getReleaseIfChanged("r99", 1)).toBeNull();
    });

    it("commit on an unknown release is a resource_version conflict", async () => {
      const res = await store.commit({
        release: next(makeRelease(9)),
        expected_version: 1,
        history: [note("r9", "x")],
        effects: [],
        now: T0,
      });
      expect(res).toEqual({ ok: false, conflict: "resource_version" });
      expect(await store.getHistory("r9")).toHaveLength(0);
    });

    it("commit refuses a release whose version is not expected + 1", async () => {
      const r = await created();
      await expect(
        store.commit({ release: r, expected_version: 1, history: [], effects: [], now: T0 }),
      ).rejects.toThrow(/\[store\] commit of release r1: release.resource_version must be/);
    });

    it("two writers from the same version: exactly one wins", async () => {
      const r = await created();
      const peer = await h.openPeer();
      const results = await Promise.all(
        [store, peer, store, peer].map((s, i) =>
          s.commit({
            release: next(r, { reason: `writer ${i}` }),
            expected_version: 1,
            history: [note("r1", `writer ${i}`)],
            effects: [apply("sr_1_0_f")],
            now: T0,
          }),
        ),
      );
      expect(results.filter((x) => x.ok)).toHaveLength(1);
      const winner = results.findIndex((x) => x.ok);
      expect((await store.getRelease("r1"))?.reason).toBe(`writer ${winner}`);
      expect((await store.getHistory("r1")).map((e) => e.message)).toEqual([
        "[engine] release created",
        `writer ${winner}`,
      ]);
      expect(await store.pendingOutbox("r1")).toHaveLength(1);
    });

    it("a commit failing mid-transaction leaves no release change, history or outbox rows", async () => {
      const r = await created();
      // status is NOT NULL: the attempt insert fails after the update and the inserts ran.
      const bad = attemptResult("sr_1_0_f", 1, { status: null as unknown as string });
      await expect(
        store.commit({
          release: next(r, { state: "paused" }),
          expected_version: 1,
          history: [note("r1", "half")],
          effects: [apply("sr_1_0_f")],
          now: T0,
          attempt_results: [attemptResult("sr_1_0_f", 2), bad],
        }),
      ).rejects.toThrow(/^\[store\] commit of release r1 failed and was rolled back; nothing/);
      expect(await store.getRelease("r1")).toEqual(r);
      expect(await store.getHistory("r1")).toHaveLength(1);
      expect(await store.pendingOutbox()).toHaveLength(0);
      expect(await store.listAttemptResults("r1")).toEqual([]);
    });

    it("attempt results round-trip verbatim and upsert by (step run, attempt)", async () => {
      const r = await created();
      const a1 = attemptResult("sr_1_0_f", 1, { log_truncated: true });
      const res = await store.commit({
        release: next(r),
        expected_version: 1,
        history: [],
        effects: [],
        now: T0,
        attempt_results: [a1, attemptResult("sr_1_0_f", 2)],
      });
      expect(res.ok).toBe(true);
      const got = await store.getAttemptResult("sr_1_0_f", 1);
      expect(got).toEqual(a1);
      // Byte for byte: key order and unicode as received.
      expect(JSON.stringify(got?.checks)).toBe(CHECKS_TEXT);
      expect(got?.raw_callback).toBe(a1.raw_callback);
      expect(await store.getAttemptResult("sr_1_0_f", 3)).toBeNull();

      const replaced = attemptResult("sr_1_0_f", 1, {
        overall: "fail",
        checks: [1, { z: 0, a: 1 }],
      });
      await store.commit({
        release: next(next(r)),
        expected_version: 2,
        history: [],
        effects: [],
        now: T0,
        attempt_results: [replaced],
      });
      const list = await store.listAttemptResults("r1");
      expect(list.map((a) => [a.attempt, a.overall])).toEqual([
        [1, "fail"],
        [2, "pass"],
      ]);
      expect(JSON.stringify(list[0]?.checks)).toBe('[1,{"z":0,"a":1}]');
      expect(await store.listAttemptResults("r2")).toEqual([]);
    });

    it("appendHistory appends without touching the release; getHistory pages oldest first", async () => {
      const r = await created();
      await store.appendHistory([]);
      await store.appendHistory(
        Array.from({ length: 5 }, (_, i) => ({
          ...note("r1", `refused ${i}`),
          outcome: "refused" as const,
          step_run_id: "sr_1_0_f",
        })),
      );
      expect(await store.getRelease("r1")).toEqual(r);
      const all = await store.getHistory("r1");
      expect(all.map((e) => e.message)).toEqual([
        "[engine] release created",
        ...[0, 1, 2, 3, 4].map((i) => `refused ${i}`),
      ]);
      expect(all[1]).toMatchObject({ outcome: "refused", step_run_id: "sr_1_0_f" });
      const page = await store.getHistory("r1", { limit: 2, offset: 2 });
      expect(page.map((e) => e.message)).toEqual(["refused 1", "refused 2"]);
      expect((await store.getHistory("r1", { offset: 5 })).map((e) => e.message)).toEqual([
        "refused 4",
      ]);
      expect(await store.getHistory("r1", { limit: 1 })).toHaveLength(1);
    });

    it("listReleases: newest first, filtered by state, paged with `before`", async () => {
      for (let n = 1; n <= 7; n++) {
        await store.createRelease(
          makeRelease(n, { state: n % 3 === 0 ? "succeeded" : "running" }),
          [],
          [],
          T0,
        );
      }
      const firstPage = await store.listReleases({ limit: 3 });
      expect(firstPage.map((s) => s.id)).toEqual(["r7", "r6", "r5"]);
      const second = await store.listReleases({ limit: 3, before: firstPage[2]!.created_at });
      expect(second.map((s) => s.id)).toEqual(["r4", "r3", "r2"]);
      const last = await store.listReleases({ limit: 3, before: second[2]!.created_at });
      expect(last.map((s) => s.id)).toEqual(["r1"]);
      const done = await store.listReleases({ state: "succeeded", limit: 10 });
      expect(done.map((s) => s.id)).toEqual(["r6", "r3"]);
      expect(done[0]).toEqual({
        id: "r6",
        state: "succeeded",
        recipe_name: "llama-canary",
        model: "llama-3-8b",
        high_water_mark: -1,
        cursor: 0,
        step_count: 1,
        created_at: T0 + 6,
        updated_at: T0 + 6,
      });
      expect(await store.listReleases({ state: "aborted", limit: 10 })).toEqual([]);
    });

    it("countReleases: releases per state, states with none absent", async () => {
      expect(await store.countReleases()).toEqual({});
      for (let n = 1; n <= 7; n++) {
        await store.createRelease(
          makeRelease(n, { state: n % 3 === 0 ? "succeeded" : "running" }),
          [],
          [],
          T0,
        );
      }
      expect(await store.countReleases()).toEqual({ running: 5, succeeded: 2 });
    });

    it("claimDue leases due rows in due order, up to the limit, each with its own token", async () => {
      await created(1, [
        deadline("sr_1_0_f", T0 + 30),
        apply("sr_1_0_f", T0 + 10),
        deadline("sr_1_0_f", T0 + 20),
        deadline("sr_1_0_f", T0 + 999),
      ]);
      const now = T0 + 100;
      const claimed = await store.claimDue({ now, limit: 2, leaseMs: 1000, owner: "eng-a" });
      expect(claimed.map((c) => c.due_at)).toEqual([T0 + 10, T0 + 20]);
      for (const c of claimed) {
        expect(c.claim_token).toMatch(/^eng-a:/);
        expect(c.claimed_until).toBe(now + 1000);
        expect(c.claims).toBe(1);
      }
      expect(claimed[0]!.claim_token).not.toBe(claimed[1]!.claim_token);
      const rest = await store.claimDue({ now, limit: 10, leaseMs: 1000, owner: "eng-a" });
      expect(rest.map((c) => c.due_at)).toEqual([T0 + 30]);
      // Held rows stay held until their lease has passed (claimed_until < now); the last row
      // has become due by then.
      const later = await store.claimDue({ now: now + 1000, limit: 10, leaseMs: 1000, owner: "b" });
      expect(later.map((c) => c.due_at)).toEqual([T0 + 999]);
      const pending = await store.pendingOutbox("r1");
      expect(pending).toHaveLength(4);
      expect(pending.filter((p) => p.claim_token !== null)).toHaveLength(4);
    });

    it("an expired lease can be claimed again; the old token no longer completes it", async () => {
      await created(1, [apply("sr_1_0_f")]);
      const [first] = await store.claimDue({ now: T0, limit: 1, leaseMs: 50, owner: "a" });
      const [second] = await store.claimDue({ now: T0 + 51, limit: 1, leaseMs: 50, owner: "b" });
      expect(second?.id).toBe(first?.id);
      expect(second?.claims).toBe(2);
      expect(second?.claim_token).toMatch(/^b:/);
      expect(await store.completeOutbox(first!.id, first!.claim_token!)).toBe(false);
      expect(await store.releaseClaim(first!.id, first!.claim_token!, T0)).toBe(false);
      expect(await store.completeOutbox(second!.id, second!.claim_token!)).toBe(true);
      expect(await store.completeOutbox(second!.id, second!.claim_token!)).toBe(false);
      expect(await store.pendingOutbox()).toEqual([]);
      expect(await store.claimDue({ now: T0 + 10_000, limit: 5, leaseMs: 50, owner: "c" })).toEqual(
        [],
      );
    });

    it("fractional times (backoff with jitter) are rounded up to whole ms, not refused", async () => {
      await created(1, [apply("sr_1_0_f", T0 + 10.4)]);
      expect((await store.pendingOutbox("r1"))[0]?.due_at).toBe(T0 + 11);
      expect(await store.claimDue({ now: T0 + 10.9, limit: 1, leaseMs: 5, owner: "a" })).toEqual(
        [],
      );
      const [c] = await store.claimDue({ now: T0 + 11.5, limit: 1, leaseMs: 0.2, owner: "a" });
      expect(c?.claimed_until).toBe(T0 + 12);
      expect(await store.releaseClaim(c!.id, c!.claim_token!, T0 + 20.1)).toBe(true);
      expect((await store.pendingOutbox("r1"))[0]?.due_at).toBe(T0 + 21);
    });

    it("extendClaim renews a held claim only: another owner cannot take it meanwhile", async () => {
      await created(1, [apply("sr_1_0_f")]);
      const [c] = await store.claimDue({ now: T0, limit: 1, leaseMs: 100, owner: "a" });
      expect(await store.extendClaim(c!.id, "a:wrong", T0 + 10_000)).toBe(false);
      expect(await store.extendClaim(c!.id, c!.claim_token!, T0 + 1_000.5)).toBe(true);
      expect((await store.pendingOutbox("r1"))[0]?.claimed_until).toBe(T0 + 1_001);
      // Past the first lease, before the renewed one ends: not claimable by another engine.
      expect(await store.claimDue({ now: T0 + 500, limit: 1, leaseMs: 100, owner: "b" })).toEqual(
        [],
      );
      // Once the renewed lease ends, another engine takes it and the old token renews nothing.
      const [taken] = await store.claimDue({ now: T0 + 1_002, limit: 1, leaseMs: 100, owner: "b" });
      expect(taken?.id).toBe(c?.id);
      expect(await store.extendClaim(c!.id, c!.claim_token!, T0 + 5_000)).toBe(false);
      expect(await store.completeOutbox(taken!.id, taken!.claim_token!)).toBe(true);
      expect(await store.extendClaim(taken!.id, taken!.claim_token!, T0 + 5_000)).toBe(false);
    });

    it("releaseClaim gives a row back, due again at the given time", async () => {
      await created(1, [apply("sr_1_0_f")]);
      const [c] = await store.claimDue({ now: T0, limit: 1, leaseMs: 60_000, owner: "a" });
      expect(await store.releaseClaim(c!.id, "a:wrong", T0 + 500)).toBe(false);
      expect(await store.releaseClaim(c!.id, c!.claim_token!, T0 + 500)).toBe(true);
      const [row] = await store.pendingOutbox("r1");
      expect(row).toMatchObject({ due_at: T0 + 500, claim_token: null, claimed_until: null });
      expect(await store.claimDue({ now: T0 + 499, limit: 1, leaseMs: 10, owner: "a" })).toEqual(
        [],
      );
      const [again] = await store.claimDue({ now: T0 + 500, limit: 1, leaseMs: 10, owner: "a" });
      expect(again?.claims).toBe(2);
    });

    it("commit completes the outbox row it was caused by, in the same transaction", async () => {
      const r = await created(1, [apply("sr_1_0_f"), deadline("sr_1_0_f", T0)]);
      const [c] = await store.claimDue({ now: T0, limit: 1, leaseMs: 1000, owner: "a" });
      const res = await store.commit({
        release: next(r),
        expected_version: 1,
        history: [note("r1", "applied")],
        effects: [],
        now: T0 + 1,
        complete_outbox: { id: c!.id, claim_token: c!.claim_token! },
      });
      expect(res).toEqual({ ok: true });
      const pending = await store.pendingOutbox("r1");
      expect(pending.map((p) => p.id)).not.toContain(c!.id);
      expect(pending).toHaveLength(1);
    });

    it("a lost outbox claim rolls the whole commit back (conflict outbox_claim)", async () => {
      const r = await created(1, [apply("sr_1_0_f")]);
      const [mine] = await store.claimDue({ now: T0, limit: 1, leaseMs: 10, owner: "a" });
      // The lease expired and another engine took the row over.
      const [theirs] = await store.claimDue({ now: T0 + 11, limit: 1, leaseMs: 10, owner: "b" });
      const res = await store.commit({
        release: next(r, { state: "paused" }),
        expected_version: 1,
        history: [note("r1", "late outcome")],
        effects: [deadline("sr_1_0_f", T0)],
        now: T0 + 12,
        attempt_results: [attemptResult("sr_1_0_f", 1)],
        complete_outbox: { id: mine!.id, claim_token: mine!.claim_token! },
      });
      expect(res).toEqual({ ok: false, conflict: "outbox_claim" });
      expect(await store.getRelease("r1")).toEqual(r);
      expect(await store.getHistory("r1")).toHaveLength(1);
      expect(await store.pendingOutbox("r1")).toEqual([theirs]);
      expect(await store.getAttemptResult("sr_1_0_f", 1)).toBeNull();
    });

    it("a stale version with a held claim is a resource_version conflict; the row stays held", async () => {
      const r = await created(1, [apply("sr_1_0_f")]);
      const [c] = await store.claimDue({ now: T0, limit: 1, leaseMs: 1000, owner: "a" });
      await store.commit({
        release: next(r),
        expected_version: 1,
        history: [],
        effects: [],
        now: T0,
      });
      const res = await store.commit({
        release: next(r),
        expected_version: 1,
        history: [note("r1", "stale")],
        effects: [],
        now: T0,
        complete_outbox: { id: c!.id, claim_token: c!.claim_token! },
      });
      expect(res).toEqual({ ok: false, conflict: "resource_version" });
      expect(await store.pendingOutbox("r1")).toEqual([c]);
      expect(await store.getHistory("r1")).toHaveLength(1);
    });

    it("two stores claiming in parallel never get the same row", async () => {
      const peer = await h.openPeer();
      const effects = Array.from({ length: 60 }, (_, i) => deadline("sr_1_0_f", T0 + (i % 7)));
      await created(1, effects);
      const seen: number[][] = [[], []];
      await Promise.all(
        [store, peer].map(async (s, who) => {
          for (let round = 0; round < 40; round++) {
            const got = await s.claimDue({
              now: T0 + 100,
              limit: 4,
              leaseMs: 60_000,
              owner: `e${who}`,
            });
            if (got.length === 0) break;
            seen[who]!.push(...got.map((g) => g.id));
          }
        }),
      );
      const all = [...seen[0]!, ...seen[1]!];
      expect(all).toHaveLength(60);
      expect(new Set(all).size).toBe(60);
    });

    it("pendingOutbox lists every release's rows, or one release's", async () => {
      await created(1, [apply("sr_1_0_f")]);
      await created(2, [apply("sr_2_0_f"), apply("sr_2_0_f")]);
      expect(await store.pendingOutbox()).toHaveLength(3);
      expect((await store.pendingOutbox("r2")).every((p) => p.release_id === "r2")).toBe(true);
      expect(await store.pendingOutbox("r3")).toEqual([]);
    });

    it("NUL and lone surrogates in any written string come back as U+FFFD, on every store", async () => {
      const bad = "a\u0000b\ud800c\udc00";
      const good = "a\ufffdb\ufffdc\ufffd";
      const r = makeRelease(3, { reason: bad });
      await store.createRelease(r, [note(r.id, bad, { [bad]: [bad] })], [apply("sr_3_0_f")], T0);
      expect((await store.getRelease("r3"))?.reason).toBe(good);
      expect(await store.getHistory("r3")).toEqual([note(r.id, good, { [good]: [good] })]);
      const res = await store.commit({
        release: next(r, { reason: `${bad}!` }),
        expected_version: 1,
        history: [note(r.id, bad, bad)],
        effects: [],
        now: T0,
        attempt_results: [
          attemptResult("sr_3_0_f", 1, {
            release_id: "r3",
            log: bad,
            checks: [{ [bad]: bad }],
            preflight: { run_id: bad, run_attempt: 1 },
          }),
        ],
      });
      expect(res).toEqual({ ok: true });
      expect((await store.getRelease("r3"))?.reason).toBe(`${good}!`);
      const a = await store.getAttemptResult("sr_3_0_f", 1);
      expect([a?.log, a?.checks, a?.preflight]).toEqual([
        good,
        [{ [good]: good }],
        { run_id: good, run_attempt: 1 },
      ]);
      await store.appendHistory([note(r.id, bad, { x: bad })]);
      expect((await store.getHistory("r3")).at(-1)).toEqual(note(r.id, good, { x: good }));
    });

    describe("retention (compactFinished)", () => {
      const refused = (releaseId: string, kind: string, i: number): HistoryEntry => ({
        release_id: releaseId,
        at: T0 + i,
        kind,
        step_run_id: null,
        outcome: "refused",
        message: `[engine] forged ${kind} ${i}`,
        data: { i },
      });

      /** r1 finished (rolled_back) with noise; r2 still running with the same noise. */
      async function twoReleases(checks: Json = PASSING_CHECKS) {
        const r1 = await created(1, [apply("sr_1_0_f"), deadline("sr_1_0_f", T0 + 9_000)]);
        const r2 = await created(2, [apply("sr_2_0_f")]);
        const long = `${"x".repeat(10_000)}THE END`;
        for (const [r, state] of [
          [r1, "rolled_back"],
          [r2, "running"],
        ] as const) {
          const done = next(r, { state, reason: "health check failed: 503" });
          expect(
            await store.commit({
              release: done,
              expected_version: r.resource_version,
              history: [note(r.id, "[engine] step 0 failed")],
              effects: [],
              now: T0 + 10,
              attempt_results: [
                attemptResult(`sr_${r.id.slice(1)}_0_f`, 1, {
                  release_id: r.id,
                  log: long,
                  checks,
                }),
              ],
            }),
          ).toEqual({ ok: true });
          await store.appendHistory(
            Array.from({ length: 30 }, (_, i) =>
              refused(r.id, i % 3 ? "callback" : "preflight", i),
            ),
          );
        }
        // r1's apply row is performed (done); its deadline row stays pending.
        const rows = await store.claimDue({ now: T0 + 1, limit: 10, leaseMs: 60_000, owner: "t" });
        const mine = rows.find((x) => x.release_id === "r1" && x.effect.type === "control_plane");
        expect(await store.completeOutbox(mine?.id ?? -1, mine?.claim_token ?? "")).toBe(true);
        return { r1, r2, long };
      }

      it("compacts a finished release and keeps what its record needs", async () => {
        const { r1, long } = await twoReleases();
        const decided: HistoryEntry = {
          ...note(r1.id, "[engine] abort by alice: wrong image", { actor: "alice", reason: "x" }),
          kind: "abort",
        };
        const automatic: HistoryEntry = {
          ...note(r1.id, "[engine] step 0 applied", { outcome: "ok" }),
          kind: "applied",
        };
        await store.appendHistory([decided, automatic]);
        const before = await store.getRelease("r1");
        const accepted = (await store.getHistory("r1"))
          .filter((x) => x.outcome === "accepted")
          .map((x) => (x.kind === "applied" ? { ...x, data: null } : x));
        const res = await store.compactFinished({
          before: T0 + 1_000_000,
          now: T0 + 2_000_000,
          limit: 10,
          logTailChars: 100,
        });
        expect(res).toEqual({
          releases: 1,
          history_rows_removed: 30,
          outbox_rows_removed: 2,
          attempt_results_shortened: 1,
        });
        // The release, its manifest and every accepted entry are as they were.
        expect(await store.getRelease("r1")).toEqual(before);
        const history = await store.getHistory("r1");
        expect(history.filter((x) => x.outcome === "refused")).toEqual([]);
        // Every accepted entry stays; an automatic one loses its event data, a decision keeps it.
        expect(history.slice(0, accepted.length)).toEqual(accepted);
        expect(history.find((x) => x.kind === "abort")?.data).toEqual({
          actor: "alice",
          reason: "x",
        });
        expect(history.find((x) => x.kind === "applied")?.data).toBeNull();
        const summary = history.at(-1);
        expect(summary).toMatchObject({ kind: "retention", outcome: "accepted" });
        expect(summary?.message).toContain("30 refused requests");
        expect(summary?.data).toEqual({ refused: 30, by_kind: { callback: 20, preflight: 10 } });
        const a = await store.getAttemptResult("sr_1_0_f", 1);
        // A passing attempt keeps a quarter of the tail a failed one keeps.
        expect(a?.log).toBe(long.slice(-25));
        expect(a?.log.endsWith("THE END")).toBe(true);
        expect(a?.log_truncated).toBe(true);
        expect(a?.raw_callback).toBe("");
        expect(a?.checks).toEqual(PASSING_CHECKS);
        expect(a?.status).toBe("completed");
        expect(await store.pendingOutbox("r1")).toEqual([]);
        expect(r1.id).toBe("r1");
      });

      it("an attempt that said pass beside a failed check keeps a failed attempt's tail", async () => {
        const { long } = await twoReleases([{ name: "health", status: "failed" }]);
        await store.compactFinished({
          before: T0 + 1_000_000,
          now: T0 + 2_000_000,
          limit: 10,
          logTailChars: 100,
        });
        expect((await store.getAttemptResult("sr_1_0_f", 1))?.log).toBe(long.slice(-100));
      });

      it("never touches a release that is not finished, nor one finished too recently", async () => {
        await twoReleases();
        const r2 = await store.getRelease("r2");
        const h2 = await store.getHistory("r2");
        const recent = await store.compactFinished({
          before: T0, // r1 was last updated after T0: too recent
          now: T0 + 2_000_000,
          limit: 10,
          logTailChars: 100,
        });
        expect(recent.releases).toBe(0);
        await store.compactFinished({
          before: T0 + 1_000_000,
          now: T0 + 2_000_000,
          limit: 10,
          logTailChars: 100,
        });
        expect(await store.getRelease("r2")).toEqual(r2);
        expect(await store.getHistory("r2")).toEqual(h2);
        expect((await store.getAttemptResult("sr_2_0_f", 1))?.raw_callback).not.toBe("");
        expect(await store.pendingOutbox("r2")).toHaveLength(1);
      });

      it("is idempotent: a second pass finds nothing, and a late refused request stays visible", async () => {
        await twoReleases();
        const q = { before: T0 + 1_000_000, now: T0 + 2_000_000, limit: 10, logTailChars: 100 };
        expect((await store.compactFinished(q)).releases).toBe(1);
        const once = await store.getHistory("r1");
        expect(await store.compactFinished(q)).toEqual({
          releases: 0,
          history_rows_removed: 0,
          outbox_rows_removed: 0,
          attempt_results_shortened: 0,
        });
        expect(await store.getHistory("r1")).toEqual(once);
      });

      it("a peer store compacting at the same time does not compact a release twice", async () => {
        await twoReleases();
        const peer = await h.openPeer();
        const q = { before: T0 + 1_000_000, now: T0 + 2_000_000, limit: 10, logTailChars: 100 };
        const results = await Promise.allSettled([
          store.compactFinished(q),
          peer.compactFinished(q),
        ]);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);
        const done = results.reduce(
          (n, r) => n + (r.status === "fulfilled" ? r.value.releases : 0),
          0,
        );
        expect(done).toBe(1);
        const summaries = (await store.getHistory("r1")).filter((x) => x.kind === "retention");
        expect(summaries).toHaveLength(1);
      });
    });

    describe("lane claims (one owner per lane, G9)", () => {
      const claims = (ids: string[]) => ({ claimLanes: ids });
      async function refusal(p: Promise<unknown>): Promise<LanesClaimed> {
        const err = await p.then(
          () => new Error("expected LanesClaimed"),
          (e: unknown) => e,
        );
        if (!(err instanceof LanesClaimed)) throw err;
        return err;
      }

      it("an overlapping release writes nothing and the refusal names the owner per lane", async () => {
        await store.createRelease(
          makeRelease(1),
          [note("r1", "c")],
          [apply("sr_1_0_f")],
          T0,
          claims(["a", "b"]),
        );
        const err = await refusal(
          store.createRelease(
            makeRelease(2),
            [note("r2", "c")],
            [apply("sr_2_0_f")],
            T0,
            claims(["c", "b"]),
          ),
        );
        expect(err.releaseId).toBe("r2");
        expect(err.owners).toEqual([{ lane_id: "b", release_id: "r1" }]);
        expect(await store.getRelease("r2")).toBeNull();
        expect(await store.getHistory("r2")).toEqual([]);
        expect((await store.pendingOutbox()).every((row) => row.release_id === "r1")).toBe(true);
        // Not even the free lane `c` was claimed: the transaction rolled back whole.
        expect(await store.laneClaims(["a", "b", "c"])).toEqual([
          { lane_id: "a", release_id: "r1" },
          { lane_id: "b", release_id: "r1" },
        ]);
      });

      it("a claim stays while its release is not terminal and is taken over once it is", async () => {
        const r1 = makeRelease(1);
        await store.createRelease(r1, [], [], T0, claims(["a"]));
        const paused = next(r1, { state: "paused" });
        expect(
          (
            await store.commit({
              release: paused,
              expected_version: 1,
              history: [],
              effects: [],
              now: T0,
            })
          ).ok,
        ).toBe(true);
        await refusal(store.createRelease(makeRelease(2), [], [], T0, claims(["a"])));
        const done = next(paused, { state: "rolled_back" });
        expect(
          (
            await store.commit({
              release: done,
              expected_version: 2,
              history: [],
              effects: [],
              now: T0,
            })
          ).ok,
        ).toBe(true);
        await store.createRelease(makeRelease(3), [], [], T0, claims(["a"]));
        expect(await store.laneClaims(["a"])).toEqual([{ lane_id: "a", release_id: "r3" }]);
        expect(await store.getRelease("r2")).toBeNull();
      });

      it("without claimLanes nothing is claimed (exclusive lanes off)", async () => {
        await store.createRelease(makeRelease(1), [], [], T0, claims(["a"]));
        await store.createRelease(makeRelease(2), [], [], T0);
        expect(await store.laneClaims(["a"])).toEqual([{ lane_id: "a", release_id: "r1" }]);
      });

      it("overlapping starts on four stores at the same instant: exactly one commits, every round", async () => {
        const stores = [store, await h.openPeer(), await h.openPeer(), await h.openPeer()];
        let n = 0;
        for (let round = 0; round < 6; round++) {
          // Each start claims a shared lane and one of its own, listed in varying order.
          const starts = stores.map((s, i) => {
            const r = makeRelease(++n);
            const lanes = [`shared-${round % 2}`, `own-${round}-${i}`];
            return {
              r,
              p: s.createRelease(
                r,
                [note(r.id, "c")],
                [apply(`sr_${n}_0_f`)],
                T0,
                claims(i % 2 ? lanes.reverse() : lanes),
              ),
            };
          });
          const settled = await Promise.allSettled(starts.map((x) => x.p));
          const won = starts.filter((_, i) => settled[i]?.status === "fulfilled").map((x) => x.r);
          expect(won).toHaveLength(1);
          for (const x of settled)
            if (x.status === "rejected") expect(x.reason).toBeInstanceOf(LanesClaimed);
          const winner = won[0] as Release;
          expect(await store.laneClaims([`shared-${round % 2}`])).toEqual([
            { lane_id: `shared-${round % 2}`, release_id: winner.id },
          ]);
          for (const { r } of starts)
            expect((await store.getRelease(r.id)) !== null).toBe(r.id === winner.id);
          // The winner finishes, so the shared lane is free for the round after next.
          const done = next(winner, { state: "succeeded" });
          await store.commit({
            release: done,
            expected_version: 1,
            history: [],
            effects: [],
            now: T0,
          });
        }
      });
    });

    describe("source marks (merge order is release order)", () => {
      const C1 = "1".repeat(40);
      const C2 = "2".repeat(40);
      const C3 = "3".repeat(40);
      const mark = (commit: string, release_id: string, committed_at = T0): SourceMark => ({
        model: "llama-3-8b",
        commit,
        committed_at,
        release_id,
        at: T0 + 5,
      });
      async function moved(p: Promise<unknown>): Promise<SourceMarkMoved> {
        const err = await p.then(
          () => new Error("expected SourceMarkMoved"),
          (e: unknown) => e,
        );
        if (!(err instanceof SourceMarkMoved)) throw err;
        return err;
      }

      it("createRelease sets the mark only from the commit it expects; a moved mark writes nothing", async () => {
        expect(await store.getSourceMark("llama-3-8b")).toBeNull();
        await store.createRelease(makeRelease(1), [note("r1", "c")], [], T0, {
          sourceMark: { mark: mark(C1, "r1"), expect: null },
        });
        expect(await store.getSourceMark("llama-3-8b")).toEqual(mark(C1, "r1"));
        // A start judged against "no mark" (or an old commit) finds it moved: nothing written,
        // not even its lane claims.
        for (const stale of [null, C3]) {
          const err = await moved(
            store.createRelease(makeRelease(2), [note("r2", "c")], [apply("sr_2_0_f")], T0, {
              claimLanes: ["lane-x"],
              sourceMark: { mark: mark(C2, "r2"), expect: stale },
            }),
          );
          expect(err.model).toBe("llama-3-8b");
          expect(err.expected).toBe(stale);
        }
        expect(await store.getRelease("r2")).toBeNull();
        expect(await store.getHistory("r2")).toEqual([]);
        expect(await store.pendingOutbox("r2")).toEqual([]);
        expect(await store.laneClaims(["lane-x"])).toEqual([]);
        expect(await store.getSourceMark("llama-3-8b")).toEqual(mark(C1, "r1"));
        await store.createRelease(makeRelease(2), [], [], T0, {
          sourceMark: { mark: mark(C2, "r2", T0 + 1), expect: C1 },
        });
        expect(await store.getSourceMark("llama-3-8b")).toEqual(mark(C2, "r2", T0 + 1));
        expect(await store.getSourceMark("another-model")).toBeNull();
      });

      it("raiseSourceMark moves the mark without a release, only from the commit it expects", async () => {
        expect(await store.raiseSourceMark(mark(C1, "r7"), C2)).toBe(false);
        expect(await store.getSourceMark("llama-3-8b")).toBeNull();
        expect(await store.raiseSourceMark(mark(C1, "r7"), null)).toBe(true);
        expect(await store.raiseSourceMark(mark(C2, "r7"), null)).toBe(false);
        expect(await store.raiseSourceMark(mark(C2, "r7", T0 + 9), C1)).toBe(true);
        expect(await store.getSourceMark("llama-3-8b")).toEqual(mark(C2, "r7", T0 + 9));
      });

      it("four stores moving the mark from the same commit at once: exactly one wins, every round", async () => {
        const stores = [store, await h.openPeer(), await h.openPeer(), await h.openPeer()];
        await store.raiseSourceMark(mark(C1, "r1"), null);
        let at = C1;
        for (let round = 0; round < 6; round++) {
          const next = stores.map((_, i) => `${round}${i}`.padStart(40, "a"));
          const won = await Promise.all(
            stores.map((s, i) => s.raiseSourceMark(mark(next[i] as string, `r${i}`), at)),
          );
          expect(won.filter(Boolean)).toHaveLength(1);
          const winner = next[won.indexOf(true)] as string;
          expect((await store.getSourceMark("llama-3-8b"))?.commit).toBe(winner);
          at = winner;
        }
      });
    });

    it("ping({ write: true }) proves a write: it fails on a store that refuses writes, where a plain ping passes", async () => {
      await expect(store.ping({ write: true })).resolves.toBeUndefined();
      await expect(store.ping({ write: true })).resolves.toBeUndefined();
      const ro = await h.openReadOnlyPeer();
      await expect(ro.ping()).resolves.toBeUndefined();
      await expect(ro.ping({ write: true })).rejects.toThrow();
      await expect(store.ping({ write: true })).resolves.toBeUndefined();
    });

    describe("runner credentials (OIDC token ids and run bindings)", () => {
      it("useTokenId: a token id is used once, across stores and concurrent callers", async () => {
        const peer = await h.openPeer();
        const q = { jti: "jti-1", expiresAt: T0 + 600_000, now: T0 };
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? peer : store).useTokenId(q)),
        );
        expect(results.filter(Boolean).length).toBe(1);
        expect(await store.useTokenId({ ...q, now: T0 + 1000 })).toBe(false);
        expect(await store.useTokenId({ ...q, jti: "jti-2" })).toBe(true);
      });

      it("useTokenId: an id is kept until its token expires, then dropped", async () => {
        expect(await store.useTokenId({ jti: "a", expiresAt: T0 + 60_000, now: T0 })).toBe(true);
        expect(await store.useTokenId({ jti: "a", expiresAt: T0 + 60_000, now: T0 + 59_999 })).toBe(
          false,
        );
        // Past its expiry the token itself is refused by its `exp`; the row is dropped.
        expect(
          await store.useTokenId({ jti: "a", expiresAt: T0 + 200_000, now: T0 + 60_001 }),
        ).toBe(true);
      });

      it("bindRun: the first binding of a run stands, across stores and concurrent callers", async () => {
        const peer = await h.openPeer();
        expect(await store.boundStepRun("o/r#77")).toBeNull();
        const bound = await Promise.all(
          ["sr_1_0_f", "sr_1_1_f", "sr_2_0_f", "sr_2_1_f"].map((id, i) =>
            (i % 2 ? peer : store).bindRun({ run: "o/r#77", stepRunId: id, now: T0 }),
          ),
        );
        expect(new Set(bound).size).toBe(1);
        expect(await store.boundStepRun("o/r#77")).toBe(bound[0]);
        expect(await store.bindRun({ run: "o/r#78", stepRunId: "sr_3_0_f", now: T0 })).toBe(
          "sr_3_0_f",
        );
        expect(await peer.boundStepRun("o/r#78")).toBe("sr_3_0_f");
      });
    });

    describe("leases (one engine of several runs a periodic job)", () => {
      it("takeLease: of several owners asking at once across stores exactly one holds it", async () => {
        const peer = await h.openPeer();
        const got = await Promise.all(
          ["e1", "e2", "e3", "e4", "e5", "e6"].map((owner, i) =>
            (i % 2 ? peer : store).takeLease({ name: "drift", owner, until: T0 + 30_000, now: T0 }),
          ),
        );
        expect(got.filter(Boolean).length).toBe(1);
        const holder = ["e1", "e2", "e3", "e4", "e5", "e6"][got.indexOf(true)] as string;
        const other = holder === "e1" ? "e2" : "e1";
        // The holder renews it; another owner is refused until it expires.
        expect(
          await peer.takeLease({ name: "drift", owner: holder, until: T0 + 60_000, now: T0 + 1 }),
        ).toBe(true);
        expect(
          await store.takeLease({
            name: "drift",
            owner: other,
            until: T0 + 90_000,
            now: T0 + 59_999,
          }),
        ).toBe(false);
        // Another name is another lease.
        expect(
          await store.takeLease({ name: "retention", owner: other, until: T0 + 60_000, now: T0 }),
        ).toBe(true);
      });

      it("takeLease: an expired lease goes to the next owner who asks, and the old holder is refused", async () => {
        expect(
          await store.takeLease({ name: "drift", owner: "a", until: T0 + 10_000, now: T0 }),
        ).toBe(true);
        expect(
          await store.takeLease({
            name: "drift",
            owner: "b",
            until: T0 + 20_000,
            now: T0 + 10_001,
          }),
        ).toBe(true);
        expect(
          await store.takeLease({
            name: "drift",
            owner: "a",
            until: T0 + 25_000,
            now: T0 + 10_002,
          }),
        ).toBe(false);
        expect(
          await store.takeLease({
            name: "drift",
            owner: "b",
            until: T0 + 30_000,
            now: T0 + 19_000,
          }),
        ).toBe(true);
      });
    });

    describe("engine state (kept across events)", () => {
      it("putState / getState: absent until written, replaced whole, read by another store on the database", async () => {
        expect(await store.getState("drift")).toBeNull();
        const v = { observations: 3, models: [{ model: "m", lanes: ["a"], ok: true, w: null }] };
        await store.putState({ name: "drift", value: v, now: T0 });
        expect(await store.getState("drift")).toEqual({ value: v, at: T0 });
        await store.putState({ name: "drift", value: { observations: 4 }, now: T0 + 5 });
        const peer = await h.openPeer();
        expect(await peer.getState("drift")).toEqual({ value: { observations: 4 }, at: T0 + 5 });
        expect(await peer.getState("other")).toBeNull();
      });

      it("swapState: of two writers expecting the same time exactly one wins; the time always moves", async () => {
        const peer = await h.openPeer();
        // Never written: only one of two first writes lands.
        const first = await Promise.all([
          store.swapState({ name: "book", value: { by: "a" }, now: T0, expect: null }),
          peer.swapState({ name: "book", value: { by: "b" }, now: T0, expect: null }),
        ]);
        expect(first.filter((t) => t !== null)).toEqual([T0]);
        const stored = await store.getState("book");
        expect(stored?.at).toBe(T0);
        // Same clock reading again: the new time is expect + 1, and a stale expect loses.
        expect(
          await store.swapState({ name: "book", value: { by: "c" }, now: T0, expect: T0 }),
        ).toBe(T0 + 1);
        expect(
          await peer.swapState({ name: "book", value: { by: "d" }, now: T0 + 9, expect: T0 }),
        ).toBeNull();
        expect(await peer.getState("book")).toEqual({ value: { by: "c" }, at: T0 + 1 });
      });
    });

    it("ping works while open and fails after close", async () => {
      await expect(store.ping()).resolves.toBeUndefined();
      const peer = await h.openPeer();
      await peer.close();
      await peer.close();
      await expect(peer.ping()).rejects.toThrow(/\[store\] the store is closed/);
      await expect(peer.getRelease("r1")).rejects.toThrow(/closed/);
      await expect(store.ping()).resolves.toBeUndefined();
    });
  });
}
