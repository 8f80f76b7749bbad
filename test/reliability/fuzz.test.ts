/** Hostile and malformed input (issue 6): the properties of test/support/chaos-fuzz.ts. */
import { describe, expect, it } from "vitest";
import { fuzzEngine } from "../support/chaos-fuzz.ts";

describe("hostile input", () => {
  it("every case gets a clean 4xx or a clean result; the store holds no half-written record", async () => {
    const r = await fuzzEngine(60);
    expect(r.problems).toEqual([]);
    expect(r.cases).toBeGreaterThan(300);
  }, 120_000);
});
