/**
 * The pure preflight check compares the runner's `payload_digest` with the
 * `expected_payload_digest` the service computed; a missing expected value fails closed.
 */
import { describe, expect, it } from "vitest";
import { transition } from "../../engine/src/domain/transition.ts";
import type { DispatchEffect } from "../../engine/src/domain/types.ts";
import { payloadDigestOf } from "../../engine/src/protocol/payload-digest.ts";
import { buildDispatchPayload } from "../../engine/src/service/payload.ts";
import { expectedPayloadDigest } from "../../engine/src/service/payload-digest.ts";
import type { StepSpec } from "../support/manifest-fixture.ts";
import { release as newRelease, ok, preflightOf, sr } from "../support/sim/drive.ts";

const specs: StepSpec[] = [{ name: "attach_queue_lane", kind: "runner", backward: true }];

/** A started release whose step 0 (runner) was just dispatched, with that dispatch effect. */
function startedRunnerRelease() {
  const res = ok(newRelease(specs), { type: "start" });
  const effect = res.effects.find((e): e is DispatchEffect => e.type === "dispatch");
  if (!effect) throw new Error("[test] no dispatch effect");
  return { release: res.release, effect };
}

describe("preflight payload digest (pure transition)", () => {
  it("the dispatch payload builder's payload digests to what the engine expects", () => {
    const { release, effect } = startedRunnerRelease();
    const payload = buildDispatchPayload(effect, release, "http://127.0.0.1:8787");
    expect(payloadDigestOf(payload)).toBe(expectedPayloadDigest(release, sr(release, 0)));
  });

  it("a different digest is refused 409 payload_mismatch; no attempt opened", () => {
    const { release } = startedRunnerRelease();
    const id = sr(release, 0).id;
    const res = transition(
      release,
      preflightOf(release, id, { payload_digest: "f".repeat(64) }),
      1,
    );
    expect(res.ok).toBe(false);
    if (res.ok) return;
    expect(res.status).toBe(409);
    expect(res.code).toBe("payload_mismatch");
    expect(res.history[0]?.outcome).toBe("refused");
    expect(sr(release, 0).attempts).toEqual([]);
  });

  it("no expected digest (the service did not compute it) fails closed", () => {
    const { release } = startedRunnerRelease();
    const id = sr(release, 0).id;
    const { expected_payload_digest: _x, ...ev } = preflightOf(release, id);
    const res = transition(release, ev, 1);
    expect(res.ok).toBe(false);
    if (!res.ok) expect(res.code).toBe("payload_mismatch");
  });

  it("the genuine digest is admitted", () => {
    const { release } = startedRunnerRelease();
    const res = transition(release, preflightOf(release, sr(release, 0).id), 1);
    expect(res.ok).toBe(true);
  });
});
