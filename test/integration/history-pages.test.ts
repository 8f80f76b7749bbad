/**
 * `GET /v1/releases/:id/history?cursor=&limit=` on both stores: the whole history, page by
 * page with a cursor, equals the record's history; bad paging is a 400 naming the field.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

describe.each(STORE_KINDS)("history pages on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it.skipIf(skip)("pages of 7 with a cursor give back the whole history", async () => {
    const r = recipe(2);
    h = await makeHarness({ kind, seed: r });
    const id = await createRelease(h, r);
    await drive(h);
    const whole = (await getRecord(h, id)).history;
    expect(whole.length).toBeGreaterThan(20);
    const got: unknown[] = [];
    let cursor: number | null = 0;
    for (let i = 0; cursor !== null && i < 100; i++) {
      const res = await op(h, "GET", `/v1/releases/${id}/history?cursor=${cursor}&limit=7`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as { entries: unknown[]; next_cursor: number | null };
      expect(page.entries.length).toBeLessThanOrEqual(7);
      got.push(...page.entries);
      cursor = page.next_cursor;
    }
    expect(cursor).toBeNull();
    expect(got).toEqual(whole);

    const bad = await op(h, "GET", `/v1/releases/${id}/history?limit=5000`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("limit");
    const unknown = await op(h, "GET", "/v1/releases/r999/history");
    expect(unknown.status).toBe(404);
  });
});
