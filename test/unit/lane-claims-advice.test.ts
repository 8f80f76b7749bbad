/**
 * The 409 for lanes still owned by a release in flight suggests only what the engine accepts
 * in that release's state (availableActions): abort for a running release, resolve or abandon
 * for one that needs an operator (abort is refused there).
 */
import { describe, expect, it } from "vitest";
import { availableActions } from "../../engine/src/domain/transition/exits.ts";
import { howToFree } from "../../engine/src/service/lane-claims.ts";
import { boundAt0, needsOperator } from "../support/sim/scenes.ts";

describe("howToFree", () => {
  it("a running release: abort it", () => {
    expect(howToFree(boundAt0())).toBe("wait for it to finish or abort it, then start again");
  });

  it("needs_operator: resolve or abandon it, never abort (the engine refuses abort there)", () => {
    const r = needsOperator();
    expect(r.state).toBe("needs_operator");
    expect(availableActions(r).map((a) => a.action)).not.toContain("abort");
    const advice = howToFree(r);
    expect(advice).toBe(
      "it waits for an operator: resolve or abandon it (`baton status r17` says how), then start again",
    );
    expect(advice).not.toContain("abort");
  });

  it("an unreadable owner: abort it", () => {
    expect(howToFree(null)).toContain("abort it");
  });
});
