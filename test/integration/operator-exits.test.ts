/**
 * Ways out of `needs_operator` through the HTTP API, on both stores (docs/state-machine.md
 * "Ways out"): `GET /v1/releases/:id` offers exactly the exits the engine accepts; `resolve`
 * continues compensation; `abandon` ends the release once every lane is confirmed and frees
 * its lanes; every refusal answers with its reason and is kept in history.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import {
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

interface Exit {
  action: string;
  target: string;
  lanes?: string[];
  command: string;
}

/** Every runner step fails, forward and backward: the release ends `needs_operator`. */
const failRunners = (p: DispatchPayload) => (p.tool.includes("smoke") ? "pass" : "fail");

async function exitsOf(h: Harness, id: string): Promise<Exit[]> {
  const res = await op(h, "GET", `/v1/releases/${id}`);
  return ((await res.json()) as { available_actions: Exit[] }).available_actions;
}

describe.each(STORE_KINDS)("operator exits on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  async function stuck(): Promise<{ h: Harness; id: string; waited: string }> {
    h = await makeHarness({ kind });
    const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
    await drive(h, failRunners);
    const rec = await getRecord(h, id);
    expect(rec.state).toBe("needs_operator");
    const waited = rec.step_runs.find((s) => s.direction === "bwd" && s.state === "failed")!.id;
    return { h, id, waited };
  }

  it.skipIf(skip)(
    "needs_operator offers retry, resolve and abandon; refuses the rest",
    async () => {
      const { h, id, waited } = await stuck();
      const exits = await exitsOf(h, id);
      expect(exits.map((e) => `${e.action}:${e.target}`)).toEqual([
        `retry:${waited}`,
        `resolve:${waited}`,
        `abandon:${id}`,
      ]);
      expect(exits.find((e) => e.action === "abandon")?.lanes).toEqual(["lane-a", "lane-b"]);
      // Refusals: each answers its status and reason, and is recorded.
      const abort = await op(h, "POST", `/v1/releases/${id}/abort`, { reason: "x" });
      expect(abort.status).toBe(409);
      // Each refusal names what the release accepts instead.
      const accepted = "it accepts retry or resolve of the step run it waits on, or abandon";
      expect(await abort.text()).toContain(accepted);
      const resume = await op(h, "POST", `/v1/releases/${id}/resume`);
      expect(resume.status).toBe(409);
      expect(await resume.text()).toContain(accepted);
      const fwd = (await getRecord(h, id)).step_runs.find((s) => s.direction === "fwd")!.id;
      const wrong = await op(h, "POST", `/v1/releases/step-runs/${fwd}/resolve`, { reason: "x" });
      expect(wrong.status).toBe(409);
      expect(await wrong.text()).toContain(`the release waits on ${waited}`);
      const noReason = await op(h, "POST", `/v1/releases/step-runs/${waited}/resolve`, {});
      expect(noReason.status).toBe(422);
      expect(await noReason.text()).toContain("reason is required");
      const noLanes = await op(h, "POST", `/v1/releases/${id}/abandon`, { reason: "gave up" });
      expect(noLanes.status).toBe(422);
      expect(await noLanes.text()).toContain("confirm what lanes lane-a, lane-b run now");
      const oneLane = await op(h, "POST", `/v1/releases/${id}/abandon`, {
        reason: "gave up",
        lanes: { "lane-a": PREVIOUS_IMAGE },
      });
      expect(oneLane.status).toBe(422);
      expect(await oneLane.text()).toContain("confirm what lanes lane-b run now");
      const badBody = await op(h, "POST", `/v1/releases/${id}/abandon`, { reason: 5 });
      expect(badBody.status).toBe(400);
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("needs_operator");
      expect(rec.history.filter((e) => e.outcome === "refused").length).toBeGreaterThanOrEqual(6);
    },
  );

  it.skipIf(skip)(
    "resolve counts the step run as done and compensation ends rolled_back",
    async () => {
      const { h, id, waited } = await stuck();
      const res = await op(h, "POST", `/v1/releases/step-runs/${waited}/resolve`, {
        reason: "restored the old image on lane-a by hand",
        actor: "alice",
      });
      expect(res.status).toBe(200);
      // Everything below the resolved step compensates normally now.
      await drive(h);
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("rolled_back");
      const entry = rec.history.find((e) => e.kind === "resolve" && e.outcome === "accepted");
      expect(entry?.message).toContain(
        "resolved by operator:alice: restored the old image on lane-a by hand",
      );
      expect(await exitsOf(h, id)).toEqual([]);
    },
  );

  it.skipIf(skip)(
    "abandon with every lane confirmed ends abandoned and frees the lanes",
    async () => {
      const { h, id } = await stuck();
      // The lanes are still owned: a new release of the same recipe is refused.
      const blocked = await op(h, "POST", "/v1/releases", recipe(2));
      expect(blocked.status).toBe(409);
      expect(await blocked.text()).toContain(`release ${id}`);
      const lanes = { "lane-a": PREVIOUS_IMAGE, "lane-b": "none" };
      const res = await op(h, "POST", `/v1/releases/${id}/abandon`, {
        reason: "host is gone; lane-b decommissioned",
        actor: "alice",
        lanes,
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ state: "abandoned", lanes });
      const rec = (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as {
        state: string;
        abandoned: { actor: string; reason: string; lanes: Record<string, string> };
        available_actions: unknown[];
      };
      expect(rec.state).toBe("abandoned");
      expect(rec.abandoned).toMatchObject({ actor: "operator:alice", lanes });
      expect(rec.available_actions).toEqual([]);
      const listed = await op(h, "GET", "/v1/releases?state=abandoned");
      expect(
        ((await listed.json()) as { releases: { id: string }[] }).releases.map((r) => r.id),
      ).toEqual([id]);
      // Nothing is dispatched after the abandon.
      const before = h.dispatcher.accepted.length;
      await drive(h);
      expect(h.dispatcher.accepted.length).toBe(before);
      const next = await op(h, "POST", "/v1/releases", recipe(2));
      expect(next.status).toBe(201);
    },
  );
});
