/**
 * The drill schedule (docs/recovery-actions.md "The drill schedule"), on both stores with a fake
 * clock: a model whose newest succeeded release's recipe sets `policy.drill_every_days` and
 * whose last passed drill is older gets a `drill_due` entry on that release (shown by
 * `GET /v1/releases/:id`) and a `drill_due` notice, once per due period, also across an engine
 * restart; a passed drill recorded since clears it at the schedule's next look, and the next
 * period is told again; a newer succeeded release takes the due drill over without telling it
 * again, and one whose recipe drops the field ends it; a recipe without the field never gets one.
 * Two engines on one database (each its own store handle): the due period is recorded and told
 * once, whichever engine judges, also when the judging engine stops and the other takes over.
 */
import { afterEach, describe, expect, it } from "vitest";
import { NOTICE_KINDS, type Notice } from "../../engine/src/domain/notifications.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Notifier } from "../../engine/src/ports/notifier.ts";
import type { Store } from "../../engine/src/ports/store.ts";
import { DRILL_SCHEDULE_STATE } from "../../engine/src/service/drill-schedule.ts";
import {
  createRelease,
  drive,
  type Harness,
  makeHarness,
  op,
  openSecondHandle,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const INTERVAL = 30_000;
const DAY = 86_400_000;
const MODEL = String(recipe().model);

const scheduled = (every?: number): RecipeInput => {
  const r = recipe();
  return every === undefined
    ? r
    : { ...r, policy: { ...(r.policy ?? {}), drill_every_days: every } };
};

const drill = (id: string, passed = true) => ({
  drill: id,
  passed,
  rto_ms: 1830,
  rpo_ms: 3156,
  rows_lost: 151,
  restored: true,
  verified: true,
  actor: "dana",
});

type Body = {
  state: string;
  drill_due: { model: string; every_days: number; last: { drill: string } | null } | null;
  history: { kind: string; message: string }[];
};

const notify = {
  webhook: null,
  slack: null,
  github: false,
  events: [...NOTICE_KINDS],
  retryBaseMs: 1_000,
  maxTries: 3,
};

describe.each(STORE_KINDS)("drill schedule on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  const sent: Notice[] = [];
  const notifier: Notifier = {
    channel: "webhook",
    send: async (n) => {
      sent.push(n);
      return { ok: true, status: 200 };
    },
  };
  const engine = (o: Partial<Parameters<typeof makeHarness>[0]> = {}) =>
    makeHarness({
      kind,
      notifiers: [notifier],
      config: { driftIntervalMs: INTERVAL, notify },
      ...o,
    });
  const get = async (id: string) =>
    (await (await op(h as Harness, "GET", `/v1/releases/${id}`)).json()) as Body;
  const kinds = async (id: string) =>
    (await get(id)).history.map((x) => x.kind).filter((k) => k.startsWith("drill_due"));
  /** `ms` later, one tick (the schedule looks when its interval has passed), notices delivered. */
  const look = async (ms = INTERVAL) => {
    (h as Harness).clock.advance(ms);
    await (h as Harness).engine.tick();
    await drive(h as Harness);
  };
  const dueNotices = () => sent.filter((n) => n.kind === "drill_due");
  const record = async (id: string, passed = true) =>
    expect(
      (await op(h as Harness, "POST", `/v1/models/${MODEL}/drills`, drill(id, passed))).status,
    ).toBe(201);

  it.skipIf(skip)(
    "a drill older than drill_every_days is due: recorded and told once per due period; a passed drill clears it",
    async () => {
      sent.length = 0;
      h = await engine();
      await record("d1");
      const r1 = await createRelease(h, scheduled(7));
      await drive(h);
      expect((await get(r1)).state).toBe("succeeded");

      // Fresh drill: nothing due.
      await look();
      expect(await kinds(r1)).toEqual([]);
      expect((await get(r1)).drill_due).toBeNull();

      // Eight days later: due, on the newest succeeded release, with one notice.
      await look(8 * DAY);
      const due = await get(r1);
      expect(due.drill_due).toMatchObject({ model: MODEL, every_days: 7, last: { drill: "d1" } });
      expect(due.history.filter((x) => x.kind === "drill_due")).toEqual([
        expect.objectContaining({
          message: expect.stringMatching(
            new RegExp(
              `^\\[drill\\] model ${MODEL}: a recovery drill is due: its last passed drill \\(d1\\) is 8 days old; the recipe's policy.drill_every_days is 7`,
            ),
          ),
        }),
      ]);
      expect(dueNotices()).toEqual([
        expect.objectContaining({
          release_id: r1,
          summary: expect.stringMatching(
            new RegExp(`^${r1} is due a recovery drill: model ${MODEL}`),
          ),
        }),
      ]);

      // Looked at again, and after a restart on the same store: the same period, told once.
      await look();
      await h.close(true);
      h = await engine({ store: h.store, dir: h.dir, cp: h.cp, clock: h.clock });
      await look();
      expect(await kinds(r1)).toEqual(["drill_due"]);
      expect(dueNotices()).toHaveLength(1);

      // A failed drill changes nothing; a passed one clears it at the next look.
      await record("d2", false);
      await look();
      expect(await kinds(r1)).toEqual(["drill_due"]);
      await record("d3");
      await look();
      expect(await kinds(r1)).toEqual(["drill_due", "drill_due_cleared"]);
      expect((await get(r1)).drill_due).toBeNull();
      expect((await get(r1)).history.at(-1)?.message).toBe(
        `[drill] model ${MODEL}: drill d3 passed; no drill is due`,
      );

      // The next period: told again.
      await look(8 * DAY);
      expect(await kinds(r1)).toEqual(["drill_due", "drill_due_cleared", "drill_due"]);
      expect((await get(r1)).drill_due?.last?.drill).toBe("d3");
      expect(dueNotices()).toHaveLength(2);

      // A newer succeeded release takes it over: the older one's is cleared, not told again.
      const r2 = await createRelease(h, scheduled(7));
      await drive(h);
      expect((await get(r2)).state).toBe("succeeded");
      await look();
      expect((await get(r1)).drill_due).toBeNull();
      expect((await get(r2)).drill_due?.last?.drill).toBe("d3");
      expect(dueNotices()).toHaveLength(2);

      // A newer succeeded release whose recipe drops the schedule ends it.
      const r3 = await createRelease(h, scheduled());
      await drive(h);
      expect((await get(r3)).state).toBe("succeeded");
      await look();
      expect((await get(r2)).drill_due).toBeNull();
      expect((await get(r2)).history.at(-1)?.message).toBe(
        `[drill] model ${MODEL}: release ${r3}, the model's newest succeeded release, sets no drill schedule`,
      );
      expect(await kinds(r3)).toEqual([]);
      expect(dueNotices()).toHaveLength(2);
    },
  );

  it.skipIf(skip)(
    "a passed drill already older than drill_every_days writes no drill_due_cleared: the due entry follows it",
    async () => {
      sent.length = 0;
      h = await engine();
      const r1 = await createRelease(h, scheduled(7));
      await drive(h);
      expect((await get(r1)).state).toBe("succeeded");
      await look();
      expect(await kinds(r1)).toEqual(["drill_due"]);
      // A drill that ran 20 days ago, recorded now: still due, now following that drill.
      const old = { ...drill("d-old"), at: h.clock.now() - 20 * DAY };
      expect((await op(h, "POST", `/v1/models/${MODEL}/drills`, old)).status).toBe(201);
      await look();
      expect(await kinds(r1)).toEqual(["drill_due", "drill_due"]);
      expect((await get(r1)).drill_due?.last?.drill).toBe("d-old");
      expect((await get(r1)).history.map((x) => x.message).join("\n")).not.toContain(
        "no drill is due",
      );
    },
  );

  it.skipIf(skip)("a recipe without drill_every_days never gets a drill due", async () => {
    sent.length = 0;
    h = await engine();
    const r1 = await createRelease(h, scheduled());
    await drive(h);
    expect((await get(r1)).state).toBe("succeeded");
    await look(400 * DAY);
    await look();
    expect(await kinds(r1)).toEqual([]);
    expect(dueNotices()).toEqual([]);
  });
  it.skipIf(skip)(
    "two engines on one database: a due drill is recorded and told once per due period, whichever engine judges",
    async () => {
      sent.length = 0;
      h = await engine();
      const first = h;
      let handle: Store | null = await openSecondHandle(kind, first.dir, first.store);
      let second: Harness | null = await engine({
        store: handle,
        dir: first.dir,
        cp: first.cp,
        clock: first.clock,
      });
      // Each engine's read of what the schedule recorded waits, while both engines tick, until
      // the other reads it too or ends its tick: two judgements (were the lease not there)
      // would overlap, both reading nothing recorded yet. Bounded: a tick that ends frees it.
      let ticking = 0;
      let parked: (() => void) | null = null;
      const free = () => {
        parked?.();
        parked = null;
      };
      const meet = (s: Store) => {
        const read = s.getState.bind(s);
        s.getState = async (name) => {
          if (name === DRILL_SCHEDULE_STATE && ticking > 1)
            await new Promise<void>((ok) => {
              if (parked) {
                free();
                ok();
              } else parked = ok;
            });
          return read(name);
        };
      };
      meet(first.store);
      meet(handle);
      /** `ms` later, both engines tick at once, then both deliver what they owe. */
      const lookBoth = async (ms = INTERVAL) => {
        first.clock.advance(ms);
        const engines = [first, second].filter((x): x is Harness => x !== null);
        ticking = engines.length;
        await Promise.all(
          engines.map((x) =>
            x.engine.tick().finally(() => {
              ticking -= 1;
              free();
            }),
          ),
        );
        await drive(first);
        if (second) await drive(second);
      };
      try {
        await record("d1");
        const r1 = await createRelease(first, scheduled(7));
        await drive(first);
        expect((await get(r1)).state).toBe("succeeded");

        // Due: one entry, one notice, looked at by both engines over several intervals.
        await lookBoth(8 * DAY);
        for (let i = 0; i < 3; i++) await lookBoth();
        expect(await kinds(r1)).toEqual(["drill_due"]);
        expect(dueNotices()).toHaveLength(1);

        // The second engine stops (its lease, if it held it, is given back): the first judges
        // from then on and knows the period was told.
        await second.close(true);
        second = null;
        await handle.close();
        handle = null;
        await lookBoth(3 * INTERVAL);
        await lookBoth();
        expect(await kinds(r1)).toEqual(["drill_due"]);
        expect(dueNotices()).toHaveLength(1);

        // A passed drill clears it; the next period is told once more, by one engine.
        handle = await openSecondHandle(kind, first.dir, first.store);
        meet(handle);
        second = await engine({ store: handle, dir: first.dir, cp: first.cp, clock: first.clock });
        await record("d2");
        await lookBoth();
        expect(await kinds(r1)).toEqual(["drill_due", "drill_due_cleared"]);
        await lookBoth(8 * DAY);
        for (let i = 0; i < 3; i++) await lookBoth();
        expect(await kinds(r1)).toEqual(["drill_due", "drill_due_cleared", "drill_due"]);
        expect(dueNotices()).toHaveLength(2);
      } finally {
        // `first` owns the store (closed after each test); the second engine only its handle.
        await second?.close(true).catch(() => {});
        await handle?.close().catch(() => {});
      }
    },
  );
});
