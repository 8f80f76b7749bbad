/** Which deployment status a release move posts, and that an older status never follows a newer one. */
import { describe, expect, it } from "vitest";
import { statusMayFollow } from "../../engine/src/adapters/github/deployments.ts";
import {
  clipDescription,
  DEPLOYMENT_DESCRIPTION_MAX,
  deploymentStateFor,
} from "../../engine/src/domain/deployments.ts";
import type { Release } from "../../engine/src/domain/types.ts";

const r = (state: string) => ({ state }) as unknown as Release;

describe("deployment statuses", () => {
  it("maps release moves to GitHub states", () => {
    expect(deploymentStateFor(r("pending"), r("running"), { type: "start" })).toBe("in_progress");
    expect(deploymentStateFor(r("paused"), r("running"), null)).toBeNull();
    expect(deploymentStateFor(r("running"), r("succeeded"), null)).toBe("success");
    expect(deploymentStateFor(r("running"), r("compensating"), null)).toBe("failure");
    expect(
      deploymentStateFor(r("running"), r("compensating"), { type: "abort" } as never),
    ).toBeNull();
    expect(deploymentStateFor(r("compensating"), r("rolled_back"), null)).toBe("inactive");
    expect(deploymentStateFor(r("compensating"), r("needs_operator"), null)).toBe("error");
    expect(deploymentStateFor(r("running"), r("running"), null)).toBeNull();
  });
  it("never posts an older status after a newer one", () => {
    expect(statusMayFollow(null, "in_progress")).toBe(true);
    expect(statusMayFollow("in_progress", "success")).toBe(true);
    expect(statusMayFollow("success", "in_progress")).toBe(false);
    expect(statusMayFollow("success", "success")).toBe(false);
    expect(statusMayFollow("failure", "inactive")).toBe(true);
    expect(statusMayFollow("inactive", "failure")).toBe(false);
  });
  it("clips descriptions to GitHub's 140 characters", () => {
    expect(clipDescription("x".repeat(300))).toHaveLength(DEPLOYMENT_DESCRIPTION_MAX);
    expect(clipDescription("a\n b")).toBe("a b");
  });
});
