/** Hostile and malformed input: the properties of test/support/chaos-fuzz.ts, on both stores. */
import { describe, expect, it } from "vitest";
import { STORE_KINDS, skipStore } from "../integration/service-harness.ts";
import { fuzzEngine } from "../support/chaos-fuzz.ts";

describe.each(STORE_KINDS)("hostile input on %s", (kind) => {
  if (skipStore(kind)) {
    it.skip("Postgres: BATON_TEST_DATABASE_URL is not set", () => {});
    return;
  }
  it("every case gets a clean 4xx or a clean result; the store holds no half-written record", async () => {
    const r = await fuzzEngine(60, kind);
    expect(r.problems).toEqual([]);
    expect(r.serverErrors).toBe(0);
    expect(r.halfWritten).toBe(0);
    expect(r.cases).toBeGreaterThan(300);
  }, 300_000);
});
