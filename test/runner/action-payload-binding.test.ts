// The bundled release-step action, run by hand as a workflow_dispatch with a tampered payload
// (identity fields right, work changed): the engine's preflight refuses it 409 payload_mismatch
// (the stand-in checks the digest as the engine does), the job ends cleanly as declined with
// the reason, and the tool never runs: no key written, no callback, the lane untouched.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { callbacksOf, type Fixture, startFixture } from "../support/action-fixture.ts";

let f: Fixture;
beforeAll(async () => {
  f = await startFixture();
});
afterAll(async () => {
  await f?.close();
});
afterEach(() => {
  expect(f.keyDirs()).toEqual([]);
});

const EVIL = `docker.io/evil/miner@sha256:${"3".repeat(64)}`;
const tamperings: [string, (p: DispatchPayload) => DispatchPayload][] = [
  ["args.image", (p) => ({ ...p, args: { ...p.args, image: EVIL } })],
  ["operation key", (p) => ({ ...p, release: { ...p.release, operation_key: "whatever" } })],
];

describe("release-step action: preflight binds the payload's work", () => {
  it.each(tamperings)(
    "a workflow_dispatch whose %s was edited is declined (409 payload_mismatch); the tool never runs",
    async (_what, tamper) => {
      const { payload } = await f.stepRun();
      const forged = tamper(payload);
      const r = await f.run(forged, {
        eventName: "workflow_dispatch",
        event: { inputs: { step_run_id: forged.step_run_id, payload: JSON.stringify(forged) } },
      });
      expect(r.main.code).toBe(0);
      expect(r.outputs.status).toBe("declined");
      expect(r.summary).toMatch(/409.*payload's tool\/args\/operation key differ/s);
      expect(r.state.key_dir).toBeUndefined();
      expect(r.main.stdout).not.toContain("::group::5.");
      expect(callbacksOf(f.engine, payload.step_run_id)).toHaveLength(0);
      const pre = f.engine.received.filter(
        (x) => x.route === "preflight" && x.stepRunId === payload.step_run_id,
      );
      expect(pre.map((x) => x.status)).toEqual([409]);
      // The genuine payload of the same step run is still admitted and runs.
      const ok = await f.run(payload, {
        eventName: "workflow_dispatch",
        event: { inputs: { step_run_id: payload.step_run_id, payload: JSON.stringify(payload) } },
      });
      expect(ok.main.code).toBe(0);
      expect(ok.outputs.overall).toBe("pass");
    },
  );
});
