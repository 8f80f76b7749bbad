/**
 * Rollback is offered only when it can be taken (docs/lifecycle.md "Rollback"): the first
 * succeeded release of a model has no earlier admitted manifest, so neither its
 * `lifecycle_actions` nor the refusals of other verbs offer rollback, and
 * `POST /v1/releases/:id/rollback` answers 422 saying why and to roll forward with a new recipe.
 * A later succeeded release of the same model is offered rollback again. Both stores.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type RecordJson, releaseSummary } from "../../engine/src/cli/output.ts";
import {
  drive,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

async function errorOf(res: Response): Promise<{ code: string; message: string }> {
  return ((await res.json()) as { error: { code: string; message: string } }).error;
}

describe.each(STORE_KINDS)("rollback offers on %s", (kind) => {
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  async function succeeded(hh: Harness): Promise<string> {
    const res = await op(hh, "POST", "/v1/releases", recipe(2));
    expect(res.status).toBe(201);
    const id = ((await res.json()) as { id: string }).id;
    await drive(hh);
    const got = (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as { state: string };
    expect(got.state).toBe("succeeded");
    return id;
  }

  it.skipIf(skipStore(kind))(
    "the first release of a model: no rollback offered anywhere, rollback is 422 naming why",
    async () => {
      h = await makeHarness({ kind });
      const first = await succeeded(h);
      const got = (await (await op(h, "GET", `/v1/releases/${first}`)).json()) as {
        lifecycle_actions: { action: string }[];
      };
      expect(got.lifecycle_actions.map((a) => a.action)).not.toContain("rollback");

      const rb = await op(h, "POST", `/v1/releases/${first}/rollback`, { reason: "x" });
      expect(rb.status).toBe(422);
      const e = await errorOf(rb);
      expect(e.code).toBe("no_previous_manifest");
      expect(e.message).toMatch(
        /no earlier admitted manifest of model summarizer-v7 to roll r\d+ back to; roll forward with a new recipe instead/,
      );
      // Nothing was started.
      expect((await h.store.listReleases({ limit: 10 })).map((r) => r.id)).toEqual([first]);

      // Other verbs' refusals do not offer it either.
      for (const verb of ["abort", "pause", "resume"]) {
        const res = await op(h, "POST", `/v1/releases/${first}/${verb}`, { reason: "x" });
        expect(res.status, verb).toBe(409);
        const m = (await errorOf(res)).message;
        expect(m, verb).not.toMatch(/rollback/);
        expect(m, verb).toMatch(/no earlier admitted manifest of model summarizer-v7/);
      }
      const rf = await op(h, "POST", `/v1/releases/${first}/roll-forward`, { recipe: recipe(2) });
      expect(rf.status).toBe(409);
      expect((await errorOf(rf)).message).not.toMatch(/It accepts: .*rollback/);

      // The second release of the model has the first's manifest to go back to.
      h.clock.advance(60_000);
      const second = await succeeded(h);
      const again = (await (await op(h, "GET", `/v1/releases/${second}`)).json()) as {
        lifecycle_actions: { action: string }[];
      };
      expect(again.lifecycle_actions.map((a) => a.action)).toContain("rollback");
      const abort = await op(h, "POST", `/v1/releases/${second}/abort`, { reason: "x" });
      expect((await errorOf(abort)).message).toMatch(/it accepts rollback/);
    },
    120_000,
  );

  it.skipIf(skipStore(kind))(
    "a release a later one replaced on the lanes: neither verb offered, rollback 409 naming the later release, nothing started",
    async () => {
      h = await makeHarness({ kind });
      await succeeded(h);
      h.clock.advance(60_000);
      const second = await succeeded(h);
      h.clock.advance(60_000);
      const third = await succeeded(h);
      const got = (await (await op(h, "GET", `/v1/releases/${second}`)).json()) as {
        lifecycle_actions: { action: string }[];
      };
      expect(got.lifecycle_actions).toEqual([]);
      const before = (await h.store.listReleases({ limit: 50 })).length;
      const rb = await op(h, "POST", `/v1/releases/${second}/rollback`, { reason: "x" });
      expect(rb.status).toBe(409);
      const e = await errorOf(rb);
      expect(e.code).toBe("superseded");
      expect(e.message).toMatch(
        new RegExp(
          `rollback of ${second} refused: ${third} \\(succeeded\\) of model summarizer-v7 came after it and now defines the lanes; roll back ${third} instead`,
        ),
      );
      expect((await h.store.listReleases({ limit: 50 })).length).toBe(before);
      // The same words everywhere (lifecycleBlocked): the record's note, what `baton status`
      // prints, and the refusals of other verbs, which no longer offer rollback by state.
      const words = `${third} (succeeded) of model summarizer-v7 came after it and now defines the lanes; roll back ${third} instead`;
      const rec = (await (await op(h, "GET", `/v1/releases/${second}`)).json()) as RecordJson;
      expect(rec.lifecycle_note).toContain(words);
      expect(e.message).toContain(rec.lifecycle_note as string);
      const status = releaseSummary(rec, h.clock.now()).join("\n");
      expect(status).toContain(`not offered: ${rec.lifecycle_note}`);
      // Its traffic line does not claim to be the traffic now: the later release set the lanes.
      expect(rec.superseded_by).toBe(third);
      expect(status).not.toMatch(/traffic now:/);
      expect(status).toContain(
        `traffic: as ${second} left it, below; ${third} has set these lanes since (\`baton status ${third}\` shows the traffic now)`,
      );
      for (const verb of ["abort", "resume", "promote", "pause"]) {
        const res = await op(h, "POST", `/v1/releases/${second}/${verb}`, { reason: "x" });
        expect(res.status, verb).toBe(409);
        const m = (await errorOf(res)).message;
        expect(m, verb).not.toMatch(/it accepts rollback/);
        expect(m, verb).toContain(rec.lifecycle_note as string);
        // Said once: the refusal does not repeat the later release's clause.
        expect(m.split("came after it and now defines the lanes").length - 1, m).toBe(1);
      }
      // Verify judges lanes the later release defines now: refused, naming it to verify instead.
      const vf = await op(h, "POST", `/v1/releases/${second}/verify`, { reason: "x" });
      expect(vf.status).toBe(409);
      const ve = await errorOf(vf);
      expect(ve.code).toBe("superseded");
      expect(ve.message).toContain(
        `verify of ${second} refused: ${third} (succeeded) of model summarizer-v7 came after it and now defines the lanes; verify ${third} instead (\`baton verify ${third}`,
      );
      const vt = await op(h, "POST", `/v1/releases/${third}/verify`, { reason: "x" });
      expect(vt.status).toBe(202);
      // The latest one is still offered rollback (to the second's manifest).
      const latest = (await (await op(h, "GET", `/v1/releases/${third}`)).json()) as {
        lifecycle_actions: { action: string; effect: string }[];
      };
      expect(latest.lifecycle_actions.map((a) => a.action)).toEqual(["rollback"]);
      expect(latest.lifecycle_actions[0]?.effect).toContain(`(${second}'s)`);

      // A later release that is aborted before anything took effect does not replace it.
      h.clock.advance(60_000);
      const held = await op(h, "POST", "/v1/releases?start=false", recipe(2));
      expect(held.status).toBe(201);
      const heldId = ((await held.json()) as { id: string }).id;
      expect(
        (await op(h, "POST", `/v1/releases/${heldId}/abort`, { reason: "not now" })).status,
      ).toBe(200);
      const still = (await (await op(h, "GET", `/v1/releases/${third}`)).json()) as {
        lifecycle_actions: { action: string }[];
      };
      expect(still.lifecycle_actions.map((a) => a.action)).toEqual(["rollback"]);
    },
    180_000,
  );
});
