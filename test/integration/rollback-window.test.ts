/**
 * The rollback window (docs/lifecycle.md "The rollback window"): `baton rollback` of a
 * succeeded release is admitted while its window (`policy.rollback_window`, default 7d) is
 * open, and refused 409 `rollback_window_closed` once it has closed, naming when it succeeded,
 * when the window closed and what to do instead; it is then no longer offered. Fake clock,
 * both stores.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import {
  drive,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const HOUR = 3_600_000;
const V2 = `ghcr.io/acme/summarizer:v8@sha256:${"8e".repeat(32)}`;

interface Got {
  state: string;
  succeeded_at?: number;
  lifecycle_actions: { action: string }[];
  lifecycle_note?: string | null;
}

describe.each(STORE_KINDS)("rollback window on %s", (kind) => {
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  async function succeeded(hh: Harness, r: RecipeInput): Promise<Got & { id: string }> {
    const res = await op(hh, "POST", "/v1/releases", r);
    expect(res.status).toBe(201);
    const id = ((await res.json()) as { id: string }).id;
    await drive(hh);
    const got = (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as Got;
    expect(got.state).toBe("succeeded");
    return { id, ...got };
  }

  const get = async (hh: Harness, id: string) =>
    (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as Got;

  it.skipIf(skipStore(kind))(
    "policy.rollback_window 2h: rollback offered and admitted inside it, refused after it closed naming when and what to do",
    async () => {
      h = await makeHarness({ kind });
      const r = recipe(2, { policy: { rollback_window: "2h" } });
      await succeeded(h, r);
      h.clock.advance(60_000);
      const second = await succeeded(h, { ...r, image: V2, previous_image: r.image as string });
      const at = second.succeeded_at as number;
      expect(typeof at).toBe("number");

      // One minute before it closes: offered.
      h.clock.t = at + 2 * HOUR - 60_000;
      expect((await get(h, second.id)).lifecycle_actions.map((a) => a.action)).toContain(
        "rollback",
      );
      // At the instant it closes: refused, nothing started, no longer offered.
      h.clock.t = at + 2 * HOUR;
      const before = (await h.store.listReleases({ limit: 50 })).length;
      const rb = await op(h, "POST", `/v1/releases/${second.id}/rollback`, { reason: "late" });
      expect(rb.status).toBe(409);
      const e = ((await rb.json()) as { error: { code: string; message: string } }).error;
      expect(e.code).toBe("rollback_window_closed");
      expect(e.message).toContain(
        `rollback of ${second.id} refused: its rollback window (2h, policy.rollback_window) after it succeeded at ${new Date(at).toISOString()} closed at ${new Date(at + 2 * HOUR).toISOString()}`,
      );
      expect(e.message).toMatch(/start a fixed recipe \(baton start <fixed-recipe\.yaml>\)/);
      expect((await h.store.listReleases({ limit: 50 })).length).toBe(before);
      const late = await get(h, second.id);
      expect(late.lifecycle_actions.map((a) => a.action)).not.toContain("rollback");
      expect(late.lifecycle_note).toContain(`rollback of ${second.id} is closed`);

      // Inside the window the same request is admitted: a new release starts.
      h.clock.t = at + HOUR;
      const ok = await op(h, "POST", `/v1/releases/${second.id}/rollback`, { reason: "in time" });
      expect(ok.status, await ok.clone().text()).toBeLessThan(300);
      expect((await h.store.listReleases({ limit: 50 })).length).toBe(before + 1);
    },
    120_000,
  );

  it.skipIf(skipStore(kind))(
    "no policy.rollback_window: the default 7d",
    async () => {
      h = await makeHarness({ kind });
      await succeeded(h, recipe(2));
      h.clock.advance(60_000);
      const second = await succeeded(h, recipe(2));
      const at = second.succeeded_at as number;
      h.clock.t = at + 7 * 24 * HOUR - 1;
      expect((await get(h, second.id)).lifecycle_actions.map((a) => a.action)).toContain(
        "rollback",
      );
      h.clock.t = at + 7 * 24 * HOUR;
      const rb = await op(h, "POST", `/v1/releases/${second.id}/rollback`, { reason: "late" });
      expect(rb.status).toBe(409);
      expect(((await rb.json()) as { error: { message: string } }).error.message).toContain(
        "its rollback window (7d, the default)",
      );
    },
    120_000,
  );
});
