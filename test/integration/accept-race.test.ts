/**
 * `accept` across engines (docs/record.md "Acceptance"): two engine processes on one database
 * (two store handles, two ReleaseService instances) accepting the same closed release at the
 * same moment. The acceptance is conditional in the store, so exactly one wins each round and
 * the other is refused 409 `already_accepted` naming the winner; the record holds one
 * acceptance per round. Rounds re-accept after the previous acceptance expired.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Store } from "../../engine/src/ports/store.ts";
import {
  type Harness,
  makeHarness,
  op,
  openSecondHandle,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const ROUNDS = 24;

describe.each(STORE_KINDS)("concurrent accept by two engines on one %s database", (kind) => {
  let a: Harness | null = null;
  let b: Harness | null = null;
  let second: Store | null = null;
  afterEach(async () => {
    await b?.close(true);
    await second?.close();
    await a?.close();
    a = b = second = null;
  });

  it.skipIf(skipStore(kind))(
    "exactly one acceptance per round; the other is 409 already_accepted naming who accepted",
    async () => {
      a = await makeHarness({ kind });
      second = await openSecondHandle(kind, a.dir, a.store);
      b = await makeHarness({ store: second, cp: a.cp, clock: a.clock, dir: a.dir });
      // A held release, aborted: closed, so it can be accepted.
      const created = await op(a, "POST", "/v1/releases?start=false", recipe(2));
      expect(created.status).toBe(201);
      const id = ((await created.json()) as { id: string }).id;
      expect((await op(a, "POST", `/v1/releases/${id}/abort`, { reason: "test" })).status).toBe(
        200,
      );
      expect((await b.store.getRelease(id))?.state).toBe("aborted");

      const sa = a.engine.service;
      const sb = b.engine.service;
      for (let round = 0; round < ROUNDS; round++) {
        const expires_at = a.clock.now() + 1000;
        const [x, y] = await Promise.all([
          sa.accept(id, `alice-${round}`, { expires_at }),
          sb.accept(id, `bob-${round}`, { expires_at }),
        ]);
        const results = [x, y];
        const won = results.filter((r) => r.ok);
        expect(won, JSON.stringify(results.map((r) => (r.ok ? "ok" : r.code)))).toHaveLength(1);
        const lost = results.find((r) => !r.ok);
        const winner = x.ok ? `alice-${round}` : `bob-${round}`;
        expect(lost).toMatchObject({ ok: false, status: 409, code: "already_accepted" });
        expect(lost && !lost.ok ? lost.reason : "").toMatch(
          new RegExp(`^\\[engine\\] release ${id} was already accepted by ${winner} at `),
        );
        const accepted = (await a.store.getHistory(id)).filter(
          (h) => h.kind === "accepted_by_owner" && h.outcome === "accepted",
        );
        const actors = accepted.map((h) => (h.data as { actor: string }).actor);
        expect(actors).toHaveLength(round + 1);
        expect(actors.at(-1)).toBe(winner);
        const rec = await b.engine.service.releaseRecord(id);
        expect(rec.acceptance?.by).toBe(winner);
        a.clock.advance(2000); // the acceptance expires: the next round may accept again
      }
    },
    120_000,
  );
});
