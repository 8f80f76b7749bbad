/**
 * Forged requests are logged in a bounded way: each distinct (guessable) step-run id is a new
 * key of the refusal record, and each wrote one log line (19,971 lines for 30,150 forged
 * requests). Now at most REFUSAL_LOG_LINES lines a minute; the rest are counted, and the first
 * line of the next minute says how many.
 */
import { describe, expect, it } from "vitest";
import { REFUSAL_LOG_LINES, SampledLog } from "../../engine/src/service/refusal-log.ts";
import { makeHarness, STORE_KINDS, skipStore } from "./service-harness.ts";

describe("SampledLog", () => {
  it("writes at most the window's lines, counts the rest, says how many in the next window", () => {
    const lines: string[] = [];
    const log = new SampledLog(3, 60_000);
    for (let i = 0; i < 10; i++) log.line((m) => lines.push(m), `refused ${i}`, 1_000 + i);
    expect(lines).toEqual(["refused 0", "refused 1", "refused 2"]);
    log.line((m) => lines.push(m), "refused later", 61_000);
    expect(lines.slice(3)).toEqual([
      "[engine] 7 more refused requests in the 60 s before were counted, not logged (at most 3 lines a window)",
      "refused later",
    ]);
  });
});

describe.each(STORE_KINDS)("forged callbacks to distinct step runs on %s", (kind) => {
  if (skipStore(kind)) {
    it.skip("Postgres: BATON_TEST_DATABASE_URL is not set", () => {});
    return;
  }
  it(`300 forged requests to 300 step-run ids write at most ${REFUSAL_LOG_LINES} lines`, async () => {
    const lines: string[] = [];
    const h = await makeHarness({
      kind,
      log: { info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) },
    });
    try {
      for (let i = 0; i < 300; i++) {
        const r = await h.engine.app.request(`/v1/releases/step-runs/sr_${900 + i}_1_f/callback`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-baton-signature": `sha256=${"0".repeat(64)}`,
            "x-baton-timestamp": String(Math.floor(h.clock.now() / 1000)),
          },
          body: "{}",
        });
        expect(r.status).toBe(401);
      }
      const refused = lines.filter((l) => /refused/.test(l));
      expect(refused.length).toBe(REFUSAL_LOG_LINES);
      h.clock.advance(60_000);
      await h.engine.app.request("/v1/releases/step-runs/sr_9999_1_f/callback", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      expect(
        lines.some((l) => l.includes(`${300 - REFUSAL_LOG_LINES} more refused requests`)),
      ).toBe(true);
    } finally {
      await h.close();
    }
  });
});
