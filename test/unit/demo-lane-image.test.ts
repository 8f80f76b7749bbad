/**
 * Which local-runner runs tell the demo's control plane (and router) that a lane now runs an
 * image: only a deploy or restore that ran its step and succeeded, never one whose preflight was
 * declined (it ends `success` with output `status: declined` and touched nothing).
 */
import { describe, expect, it } from "vitest";
import type { LocalRunEvent } from "../../engine/src/adapters/local-runner/index.ts";
import { laneImageChange } from "../../engine/src/demo/stack.ts";

const V8 = `ghcr.io/acme/summarizer:v8@sha256:${"1".repeat(64)}`;

function finished(tool: string, status: string, conclusion = "success"): LocalRunEvent {
  return {
    type: "finished",
    run: {
      conclusion,
      outputs: { status, overall: status === "succeeded" ? "pass" : "fail" },
      payload: { tool, args: { lane: { id: "lane-b" }, image: V8 } },
    },
  } as unknown as LocalRunEvent;
}

describe("the demo's lane image reports", () => {
  it("a deploy or restore that succeeded reports its lane and image", () => {
    expect(laneImageChange(finished("attach-queue-lane", "succeeded"))).toEqual({
      lane: "lane-b",
      image: V8,
    });
    expect(laneImageChange(finished("restore-queue-lane", "succeeded"))).toEqual({
      lane: "lane-b",
      image: V8,
    });
  });

  it("a deploy whose preflight was declined (stale generation after an abort) reports nothing", () => {
    expect(laneImageChange(finished("attach-queue-lane", "declined"))).toBeNull();
  });

  it("a failed run, another tool or an event before the end reports nothing", () => {
    expect(laneImageChange(finished("attach-queue-lane", "failed", "failure"))).toBeNull();
    expect(laneImageChange(finished("run-smoke", "succeeded"))).toBeNull();
    const started = { ...finished("attach-queue-lane", "succeeded"), type: "started" as const };
    expect(laneImageChange(started)).toBeNull();
  });
});
