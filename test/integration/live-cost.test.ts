/**
 * The live dashboard stream's cost is bounded. Each poll reads a release
 * mark (state, version, history count: one indexed query), never the whole record, and tabs
 * watching the same release at the same moment share one read.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Store } from "../../engine/src/ports/store.ts";
import {
  createRelease,
  type Harness,
  makeHarness,
  OPERATOR,
  openTestStore,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

let h: Harness | null = null;
let dir = "";
afterEach(async () => {
  await h?.close();
  h = null;
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The store with a count of calls per method. */
function counting(store: Store) {
  const calls: Record<string, number> = {};
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        calls[String(prop)] = (calls[String(prop)] ?? 0) + 1;
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { proxy, calls };
}

describe.each(STORE_KINDS)("live stream cost on %s", (kind) => {
  if (skipStore(kind)) {
    it.skip("Postgres: BATON_TEST_DATABASE_URL is not set", () => {});
    return;
  }

  it("20 tabs polling at once cost one mark read and no record read", async () => {
    dir = mkdtempSync(path.join(tmpdir(), "baton-live-"));
    const raw = await openTestStore(kind, dir);
    if (!raw) throw new Error("no store");
    const { proxy, calls } = counting(raw);
    h = await makeHarness({ kind, dir, store: proxy, seed: recipe(2) });
    const id = await createRelease(h, recipe(2));
    for (const k of Object.keys(calls)) delete calls[k];
    const marks = await Promise.all(
      Array.from({ length: 20 }, () => h!.engine.service.liveMark(id)),
    );
    expect(new Set(marks).size).toBe(1);
    expect(marks[0]).toMatch(/^\d+:\d+$/);
    expect(calls.releaseMark).toBe(1);
    expect(calls.getHistory ?? 0).toBe(0);
    expect(calls.listAttemptResults ?? 0).toBe(0);

    // The stream itself: its first poll reads the mark, not the record.
    for (const k of Object.keys(calls)) delete calls[k];
    const res = await h.engine.app.request(`/releases/${id}/events?v=0:0`, {
      headers: { authorization: `Bearer ${OPERATOR}` },
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toMatch(/event: change/);
    await reader.cancel();
    expect(calls.getHistory ?? 0).toBe(0);
    expect(calls.getRelease ?? 0).toBe(0);
    // 0 when the read above is still shared, else 1.
    expect(calls.releaseMark ?? 0).toBeLessThanOrEqual(1);
  });

  it("the mark changes when history grows or the release moves, as the page's version does", async () => {
    h = await makeHarness({ kind, seed: recipe(2) });
    const id = await createRelease(h, recipe(2));
    const rec = await h.engine.service.get(id);
    const m1 = await h.engine.service.liveMark(id);
    expect(m1).toBe(`${rec.release.resource_version}:${rec.history.length}`);
    expect(await h.engine.service.liveMark("r999")).toBeNull();
  });
});
