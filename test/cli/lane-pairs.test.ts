/** `--lane <lane>=<image|none>` (abandon): a lane named twice is refused, not the last one taken. */
import { describe, expect, it } from "vitest";
import { baton } from "./run-baton.ts";

describe("--lane pairs", () => {
  it("refuses a lane named twice (exit 2), naming the lane, both values and the fix, before asking the engine", async () => {
    const r = await baton(
      [
        "abandon",
        "r2",
        "--reason",
        "lanes checked by hand",
        "--lane",
        "lane-a=registry/model@sha256:aa",
        "--lane",
        "lane-b=none",
        "--lane",
        "lane-a=none",
      ],
      // Nothing listens here: reaching it would fail as unreachable, not as usage.
      { BATON_ENGINE_URL: "http://127.0.0.1:1", BATON_TOKEN: "t".repeat(32) },
    );
    expect(r.stderr).toContain(
      "[cli] --lane lane-a is given twice (registry/model@sha256:aa and none); give each lane once",
    );
    expect(r.code).toBe(2);
  });
});
