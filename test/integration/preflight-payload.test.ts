/**
 * Preflight binds the payload's work (docs/engine.md "Preflight"): a payload whose tool, args
 * or operation key the engine did not dispatch (a hand-run workflow_dispatch, a forged
 * repository_dispatch) is refused 409 payload_mismatch, recorded as refused, and opens no
 * attempt; the genuine payload is admitted.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  createRelease,
  getRecord,
  type Harness,
  makeHarness,
  preflightBody,
  preflightUrl,
  recipe,
  signedPost,
} from "./service-harness.ts";

const open: Harness[] = [];
afterEach(async () => {
  for (const x of open.splice(0)) await x.close().catch(() => {});
});

const EVIL = `docker.io/evil/miner@sha256:${"3".repeat(64)}`;

const forgeries: [string, (p: DispatchPayload) => DispatchPayload][] = [
  ["args.image", (p) => ({ ...p, args: { ...p.args, image: EVIL } })],
  ["args (extra field)", (p) => ({ ...p, args: { ...p.args, extra: true } })],
  ["tool", (p) => ({ ...p, tool: "run-smoke" })],
  ["operation key", (p) => ({ ...p, release: { ...p.release, operation_key: "whatever" } })],
];

describe("preflight binds the dispatched work", () => {
  it("each forged tool/args/operation key → 409 payload_mismatch, refused in history, no attempt; the genuine payload → 200", async () => {
    const h = await makeHarness({ seed: recipe(2) });
    open.push(h);
    const id = await createRelease(h, recipe(2));
    for (let i = 0; i < 3; i++) await h.engine.tick();
    const p = h.dispatcher.accepted[0];
    if (!p) throw new Error("[test] no runner dispatch");
    const run = { run_id: "31337", run_attempt: 1 };
    for (const [what, forge] of forgeries) {
      const res = await signedPost(h, preflightUrl(p.step_run_id), preflightBody(forge(p), run));
      expect(res.status, what).toBe(409);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code, what).toBe("payload_mismatch");
      expect(body.error.message).toMatch(
        new RegExp(
          `^\\[engine\\] preflight for ${p.step_run_id}: the payload's tool/args/operation key differ`,
        ),
      );
      expect(body.error.message).toContain("copy it from the step-run page");
    }
    let rec = await getRecord(h, id);
    let sr = rec.step_runs.find((s) => s.id === p.step_run_id);
    expect(sr?.attempts).toEqual([]);
    expect(sr?.state).not.toBe("running");
    const refused = rec.history.filter(
      (e) => e.outcome === "refused" && /payload's tool\/args\/operation key/.test(e.message),
    );
    // Refusals of one step run, kind and reason within a minute are recorded once and
    // counted (engine/src/service/refusal-log.ts): the forgeries share one history row.
    expect(forgeries.length).toBeGreaterThan(1);
    expect(refused.length).toBe(1);

    const ok = await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run));
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { attempt: number }).attempt).toBe(1);
    rec = await getRecord(h, id);
    sr = rec.step_runs.find((s) => s.id === p.step_run_id);
    expect(sr?.state).toBe("running");
    expect(sr?.attempts.length).toBe(1);
  });

  it("a preflight without payload_digest is a 400 naming the field", async () => {
    const h = await makeHarness({ seed: recipe(2) });
    open.push(h);
    await createRelease(h, recipe(2));
    for (let i = 0; i < 3; i++) await h.engine.tick();
    const p = h.dispatcher.accepted[0];
    if (!p) throw new Error("[test] no runner dispatch");
    const body = JSON.parse(preflightBody(p, { run_id: "7", run_attempt: 1 }));
    delete body.payload_digest;
    const res = await signedPost(h, preflightUrl(p.step_run_id), JSON.stringify(body));
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("payload_digest");
  });
});
