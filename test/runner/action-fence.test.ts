// The generation fence end to end: the bundled action, as a runner runs it, through a real sshd
// on 127.0.0.1 to deploy.sh on the stand-in target. A runner that outlived its callback deadline
// (step run `unknown`) sends its forward deploy (generation 1) after compensation restored the
// lane (generation 2): deploy.sh refuses it, the lane keeps the restored image, and the callback
// reports the step run failed with a check of class `stale_generation` (docs/state-machine.md rule 7).

import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { payloadDigestOf } from "../../engine/src/protocol/payload-digest.ts";
import { callbacksOf, type Fixture, startFixture } from "../support/action-fixture.ts";
import { containerName } from "../support/standin-target.ts";

let f: Fixture;
beforeAll(async () => {
  f = await startFixture();
});
afterAll(async () => {
  await f?.close();
});

type Check = { name: string; status: string; class?: string; message?: string };

/** The backward step run of `fwd` (restore-queue-lane) in `generation`, known to the engine. */
function restoreOf(fwd: DispatchPayload, generation: number): DispatchPayload {
  const args = fwd.args as { lane: { id: string }; image: string; previous_image: string };
  const id = fwd.step_run_id.replace(/_f$/, "_b");
  const bwd: DispatchPayload = {
    ...fwd,
    step_run_id: id,
    tool: "restore-queue-lane",
    args: { ...args, image: args.previous_image, previous_image: args.image },
    callback_url: fwd.callback_url.replace(fwd.step_run_id, id),
    release: {
      ...fwd.release,
      generation,
      operation_key: fwd.release.operation_key.replace(":fwd:", ":bwd:"),
    },
  };
  f.engine.addStepRun({
    id,
    release_id: bwd.release.id,
    generation,
    manifest_digest: bwd.release.manifest_digest,
    dispatch: 1,
    payload_digest: payloadDigestOf(bwd),
  });
  return bwd;
}

describe("release-step action: generation fence on the target", () => {
  it("a late generation-1 deploy after the generation-2 restore fails with stale_generation; the restore stands", async () => {
    const { payload: fwd, lane, img, prev, healthUrl } = await f.stepRun();
    // Before the release: the lane runs the previous image.
    f.target.seedRunning(lane, prev, healthUrl);

    // Compensation (generation 2) restores the lane.
    const bwd = restoreOf(fwd, 2);
    const restored = await f.run(bwd);
    expect(restored.main.code).toBe(0);
    expect(restored.main.stdout).toContain(`release ${fwd.release.id} generation 2`);
    expect(f.target.container(containerName(lane, prev))?.running).toBe(true);
    const calls = f.target.calls().length;

    // The runner that outlived its callback deadline now sends its forward deploy (generation 1).
    const late = await f.run(fwd);
    expect(late.main.code).toBe(1);
    expect(late.outputs).toMatchObject({ status: "failed", overall: "fail" });
    const cbs = callbacksOf(f.engine, fwd.step_run_id);
    expect(cbs).toHaveLength(1);
    const body = cbs[0]?.body as { status: string; overall: string; checks: Check[] };
    expect(body).toMatchObject({ status: "failed", overall: "fail" });
    expect(body.checks.map((c) => [c.name, c.status, c.class])).toEqual([
      ["connect", "ok", undefined],
      ["pull", "failed", "stale_generation"],
      ["start", "not_run", undefined],
      ["health", "not_run", undefined],
      ["stop-old", "not_run", undefined],
    ]);
    expect(body.checks[1]?.message).toMatch(
      new RegExp(`release ${fwd.release.id} generation 1 is stale.*generation 2`),
    );
    // Nothing reached the container CLI; the lane keeps the restored image.
    expect(f.target.calls().length).toBe(calls);
    expect(f.target.container(containerName(lane, prev))?.running).toBe(true);
    expect(f.target.container(containerName(lane, img))?.running).not.toBe(true);
    expect(f.keyDirs()).toEqual([]);
  });

  it("a forward deploy carries its payload's release and generation to the lane's record", async () => {
    const { payload, lane, img } = await f.stepRun();
    const r = await f.run(payload);
    expect(r.main.code).toBe(0);
    expect(r.main.stdout).toContain(`release ${payload.release.id} generation 1`);
    expect(f.target.container(containerName(lane, img))?.running).toBe(true);
    expect(readFileSync(`${f.target.ledger}.gen-${lane}`, "utf8")).toBe(
      `${payload.release.id}\t1\n`,
    );
  });
});
