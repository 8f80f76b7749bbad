/**
 * F01 at the builder: the dispatch payload of every runner step run (forward and backward) of
 * the largest recipe we can build stays within GitHub's limits (≤ 10 top-level keys,
 * < 64 KB); an oversized args object is refused before sending.
 */
import { describe, expect, it } from "vitest";
import { BatonError } from "../../engine/src/domain/errors.ts";
import type { DispatchEffect, Release } from "../../engine/src/domain/types.ts";
import { GITHUB_DISPATCH_LIMITS } from "../../engine/src/protocol/messages.ts";
import { defaultDomain } from "../../engine/src/service/domain.ts";
import { capLogTail } from "../../engine/src/service/log-tail.ts";
import { buildDispatchPayload, callbackUrl } from "../../engine/src/service/payload.ts";
import { lane, laneId } from "../unit/recipe-fixture.ts";
import { recipe } from "./service-harness.ts";

/** 64 lanes with long (but valid) hosts, queues, capabilities and health URLs, 8 waves. */
function largest() {
  const lanes = Array.from({ length: 64 }, (_, i) => ({
    ...lane(i),
    id: `${laneId(i)}-${"l".repeat(40)}`,
    host: `gpu-${i}-${"h".repeat(180)}.serving.acme.internal`,
    queue: `queue-${"q".repeat(100)}-${i}`,
    capabilities: Array.from({ length: 16 }, (_, k) => `capability-${k}-${"c".repeat(40)}`),
    health_url: `http://gpu-${i}.serving.acme.internal:8080/${"p".repeat(340)}/healthz`,
  }));
  const waves = Array.from({ length: 8 }, (_, w) => ({
    lanes: lanes.slice(w * 8, w * 8 + 8).map((l) => l.id),
    traffic: w === 7 ? 100 : (w + 1) * 12,
  }));
  return { ...recipe(2), lanes, rollout: { waves } };
}

function release(): Release {
  const c = defaultDomain.compile(largest());
  return defaultDomain.newRelease("r999999999999", c.manifest, c.manifest_digest, 0);
}

describe("dispatch payload builder", () => {
  it("every runner step of a 64-lane recipe fits GitHub's limits", () => {
    const r = release();
    let n = 0;
    for (const step of r.manifest.steps) {
      for (const [dir, action] of [
        ["fwd", step.forward],
        ["bwd", step.backward],
      ] as const) {
        if (action?.kind !== "runner") continue;
        const effect: DispatchEffect = {
          type: "dispatch",
          step_run_id: `sr_999999999999_${step.index}_${dir === "fwd" ? "f" : "b"}`,
          dispatch: 99,
          operation_key: `${r.id}:${step.index}:${dir}:${action.target}`,
          tool: action.tool,
          args: action.args,
          generation: 7,
          not_before: null,
        };
        const p = buildDispatchPayload(effect, r, `https://${"e".repeat(200)}.example`);
        expect(Object.keys(p).length).toBeLessThanOrEqual(
          GITHUB_DISPATCH_LIMITS.client_payload_max_top_level_keys,
        );
        expect(Buffer.byteLength(JSON.stringify(p))).toBeLessThan(
          GITHUB_DISPATCH_LIMITS.client_payload_max_bytes,
        );
        expect(p.release.generation).toBe(7);
        n++;
      }
    }
    expect(n).toBe(64 * 3); // attach + smoke forward, restore backward, per lane
  });

  it("refuses an oversized args object (and too many keys can never be built)", () => {
    const r = release();
    const effect: DispatchEffect = {
      type: "dispatch",
      step_run_id: "sr_999999999999_1_f",
      dispatch: 1,
      operation_key: "r999999999999:1:fwd:x",
      tool: "attach-queue-lane",
      args: { blob: "x".repeat(70 * 1024) },
      generation: 1,
      not_before: null,
    };
    expect(() => buildDispatchPayload(effect, r, "http://127.0.0.1:8787")).toThrow(BatonError);
    try {
      buildDispatchPayload(effect, r, "http://127.0.0.1:8787");
    } catch (e) {
      expect((e as BatonError).status).toBe(413);
      expect((e as BatonError).message).toMatch(
        /^\[engine\] dispatch payload of sr_999999999999_1_f is \d+ bytes/,
      );
    }
    // The callback URL names the step run under the engine's public URL.
    expect(callbackUrl("http://e.example/", "sr_1_2_f")).toBe(
      "http://e.example/v1/releases/step-runs/sr_1_2_f/callback",
    );
  });

  it("a bad tool name breaks the wire schema: 400 naming tool", () => {
    const r = release();
    const effect = {
      type: "dispatch" as const,
      step_run_id: "sr_1_1_f",
      dispatch: 1,
      operation_key: "r1:1:fwd:x",
      tool: 'deploy"; curl x | sh',
      args: {},
      generation: 1,
      not_before: null,
    };
    try {
      buildDispatchPayload(effect, r, "http://127.0.0.1:8787");
      expect.unreachable();
    } catch (e) {
      expect((e as BatonError).problems.map((p) => p.path)).toContain("tool");
    }
  });
});

describe("log tail cap", () => {
  it("keeps the end, adds the marker, stays within the cap, never splits a character", () => {
    expect(capLogTail("short")).toEqual({ log: "short", cut: false });
    const { log, cut } = capLogTail(`${"é".repeat(100)}END`, 64);
    expect(cut).toBe(true);
    expect(Buffer.byteLength(log)).toBeLessThanOrEqual(64);
    expect(log.endsWith("END")).toBe(true);
    expect(log).not.toContain("\uFFFD");
  });
});
