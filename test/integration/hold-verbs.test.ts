/**
 * The lifecycle verbs that hold a release and let it go on (docs/lifecycle.md), end to end on
 * the embedded stack, on both stores: `pause` / `resume` by an operator (the step in flight
 * settles, nothing new is dispatched, the control plane keeps the weights it had), `deploy`
 * (`?exposure=dark`) / `release` (the reference router serves the candidate nothing until
 * release, then its wave's share), and `promotion: manual` / `promote`. Each verb is refused
 * in the wrong state with a 409 naming what the release accepts.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  gatedRecipe,
  IMAGE_UNDER_TEST as IMAGE,
  MODEL,
  type Rig,
  rig,
  run,
} from "../support/gate-rig.ts";
import {
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  pumpOnce,
  recipe,
  runStep,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

type Full = {
  state: string;
  reason: string | null;
  cursor: number;
  hold: { kind: string; actor: string; reason: string; at: number; wave?: number } | null;
  exposure: string | null;
  available_actions: { action: string }[];
  history: { kind: string; outcome: string; message: string; data: unknown }[];
};
const full = async (h: Harness, id: string) =>
  (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as Full;
const offered = async (h: Harness, id: string) =>
  (await full(h, id)).available_actions.map((a) => a.action);
const errorOf = async (res: Response) =>
  (
    (await res.json()) as {
      error: { code: string; message: string; problems?: { path: string }[] };
    }
  ).error;

describe.each(STORE_KINDS)("hold verbs on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  let g: Rig | null = null;
  afterEach(async () => {
    g?.traffic.stop();
    await g?.h.close();
    g = null;
    await h?.close();
    h = null;
  });

  it.skipIf(skip)(
    "pause: the step in flight settles, nothing new is dispatched, resume goes on to success",
    async () => {
      h = await makeHarness({ kind });
      const res0 = await op(h, "POST", "/v1/releases", recipe(2));
      expect(res0.status).toBe(201);
      const id = ((await res0.json()) as { id: string }).id;
      // Run until the first runner dispatch is out, and leave it unanswered (in flight).
      let inFlight: DispatchPayload | null = null;
      for (let i = 0; i < 100 && !inFlight; i++) {
        const { fresh } = await pumpOnce(h, () => "skip");
        inFlight = fresh[0] ?? null;
      }
      expect(inFlight).not.toBeNull();
      expect(await offered(h, id)).toEqual(["pause", "abort"]);

      const noReason = await op(h, "POST", `/v1/releases/${id}/pause`, {});
      expect(noReason.status).toBe(422);
      const missing = await errorOf(noReason);
      expect(missing.message).toMatch(/reason is required/);
      // The field at fault, as every 422 about a field names it (README "Errors").
      expect(missing.problems?.map((p) => p.path)).toEqual(["body.reason"]);

      const res = await op(h, "POST", `/v1/releases/${id}/pause`, {
        reason: "error budget burn on lane-a",
        actor: "alice",
      });
      expect(res.status, await res.clone().text()).toBe(200);
      let rec = await full(h, id);
      expect(rec.state).toBe("paused");
      expect(rec.reason).toMatch(/paused by operator:alice: error budget burn on lane-a/);
      expect(rec.hold).toMatchObject({
        kind: "pause",
        actor: "operator:alice",
        reason: "error budget burn on lane-a",
      });
      const entry = rec.history.find((e) => e.kind === "pause" && e.outcome === "accepted");
      expect(entry?.message).toMatch(new RegExp(`${inFlight?.step_run_id} in flight settle first`));
      expect(entry?.data).toMatchObject({ actor: "operator:alice" });

      // The step in flight settles; the release stays paused and dispatches nothing new.
      const weights = h.cp.weights(MODEL);
      const dispatched = h.dispatcher.accepted.length;
      await runStep(h, inFlight as DispatchPayload, "pass");
      for (let i = 0; i < 10; i++) await pumpOnce(h);
      rec = await full(h, id);
      expect(rec.state).toBe("paused");
      expect(h.dispatcher.accepted.length).toBe(dispatched);
      expect(h.cp.weights(MODEL)).toEqual(weights);
      expect(await offered(h, id)).toEqual(["resume", "abort"]);
      const again = await op(h, "POST", `/v1/releases/${id}/pause`, { reason: "x" });
      expect(again.status).toBe(409);
      expect((await errorOf(again)).message).toMatch(/already paused.*resume \(baton resume/);
      const rel = await op(h, "POST", `/v1/releases/${id}/release`, {});
      expect(rel.status).toBe(409);
      expect((await errorOf(rel)).message).toMatch(/not deployed dark/);

      const resumed = await op(h, "POST", `/v1/releases/${id}/resume`);
      expect(resumed.status).toBe(200);
      await drive(h);
      expect((await getRecord(h, id)).state).toBe("succeeded");
      expect(h.cp.weights(MODEL)).toEqual({ "lane-a": 50, "lane-b": 50 });
      const after = await op(h, "POST", `/v1/releases/${id}/pause`, { reason: "late" });
      expect(after.status).toBe(409);
      // The first release of the model: nothing to roll back to, so rollback is not offered.
      expect((await errorOf(after)).message).toMatch(
        /no earlier admitted manifest of model .* roll forward with a new recipe instead/,
      );
    },
  );

  it.skipIf(skip)("pause is refused while compensating, naming why", async () => {
    h = await makeHarness({ kind });
    const res0 = await op(
      h,
      "POST",
      "/v1/releases",
      recipe(2, { policy: { rerun_window_minutes: 0 } }),
    );
    const id = ((await res0.json()) as { id: string }).id;
    let inFlight: DispatchPayload | null = null;
    for (let i = 0; i < 100 && !inFlight; i++) {
      const { fresh } = await pumpOnce(h, () => "skip");
      inFlight = fresh[0] ?? null;
    }
    // The step fails: the release compensates (its undo waits unanswered).
    await runStep(h, inFlight as DispatchPayload, "fail");
    for (let i = 0; i < 5; i++) await pumpOnce(h, () => "skip");
    expect((await getRecord(h, id)).state).toBe("compensating");
    expect(await offered(h, id)).not.toContain("pause");
    const res = await op(h, "POST", `/v1/releases/${id}/pause`, { reason: "stop" });
    expect(res.status).toBe(409);
    expect((await errorOf(res)).message).toMatch(/compensation is not paused/);
  });

  it.skipIf(skip)(
    "deploy dark: the router serves the candidate nothing until release, then its wave's share",
    async () => {
      g = await rig(kind);
      const plain = { ...gatedRecipe() } as Record<string, unknown>;
      delete plain.analysis;
      const bad = await op(g.h, "POST", "/v1/releases?exposure=grey", plain);
      expect(bad.status).toBe(400);
      expect(await bad.text()).toMatch(/exposure/);
      const res0 = await op(g.h, "POST", "/v1/releases?exposure=dark", plain);
      expect(res0.status, await res0.clone().text()).toBe(201);
      const id = ((await res0.json()) as { id: string }).id;
      await run(g);
      const held = await full(g.h, id);
      expect(held.state).toBe("paused");
      expect(held.reason).toMatch(
        /0% exposure; release \(baton release r\d+ --reason "<why it is ready>"\)/,
      );
      expect(held.hold?.kind).toBe("dark");
      expect(held.exposure).toBe("dark");
      expect(held.available_actions.map((a) => a.action)).toEqual(["release", "abort"]);
      // The environment: lane-a runs the candidate, at weight 0; the router sends it nothing.
      expect(g.h.cp.weights(MODEL)["lane-a"]).toBe(0);
      g.h.clock.advance(10_000);
      g.traffic.send(2000);
      const served = () => g?.traffic.snapshot() ?? [];
      const units = (image: string) =>
        served()
          .filter((c) => c.image === image)
          .reduce((n, c) => n + c.units, 0);
      expect(units(IMAGE)).toBe(0);
      expect(served().some((c) => c.units > 0)).toBe(true);

      const resume = await op(g.h, "POST", `/v1/releases/${id}/resume`);
      expect(resume.status).toBe(409);
      expect((await errorOf(resume)).message).toMatch(/waits for release \(baton release/);
      const promote = await op(g.h, "POST", `/v1/releases/${id}/promote`, {});
      expect(promote.status).toBe(409);
      expect((await errorOf(promote)).message).toMatch(/waits for release/);

      const rel = await op(g.h, "POST", `/v1/releases/${id}/release`, {
        reason: "smoke on lane-a is clean",
        actor: "carol",
      });
      expect(rel.status, await rel.clone().text()).toBe(200);
      await run(g);
      expect((await getRecord(g.h, id)).state).toBe("succeeded");
      g.h.clock.advance(10_000);
      g.traffic.send(2000);
      expect(units(IMAGE)).toBeGreaterThan(0);
      const again = await op(g.h, "POST", `/v1/releases/${id}/release`, {});
      expect(again.status).toBe(409);
      const rec = await full(g.h, id);
      expect(
        rec.history.some(
          (e) => e.kind === "release" && /released by operator:carol/.test(e.message),
        ),
      ).toBe(true);
    },
  );

  it.skipIf(skip)(
    "promotion: manual waits after the wave for promote; the next lane is untouched until then",
    async () => {
      h = await makeHarness({ kind });
      const res0 = await op(h, "POST", "/v1/releases", recipe(2, { promotion: "manual" }));
      expect(res0.status, await res0.clone().text()).toBe(201);
      const id = ((await res0.json()) as { id: string }).id;
      const touched = new Set<string>();
      const decide = (p: DispatchPayload) => {
        const lane = (p.args as { lane?: { id?: string } }).lane?.id;
        if (lane) touched.add(lane);
        return "pass" as const;
      };
      await drive(h, decide);
      const held = await full(h, id);
      expect(held.state).toBe("paused");
      expect(held.reason).toMatch(/wave 1 \(25%\) is done and its promotion is manual/);
      expect(held.hold).toMatchObject({ kind: "promotion", actor: "recipe", wave: 1 });
      expect(held.available_actions.map((a) => a.action)).toEqual(["promote", "abort"]);
      // The environment: wave 1's weights; lane-b was never touched.
      expect(h.cp.weights(MODEL)).toEqual({ "lane-a": 25, "lane-b": 75 });
      expect([...touched]).toEqual(["lane-a"]);
      const resume = await op(h, "POST", `/v1/releases/${id}/resume`);
      expect(resume.status).toBe(409);
      expect((await errorOf(resume)).message).toMatch(/waits for promote \(baton promote/);

      const res = await op(h, "POST", `/v1/releases/${id}/promote`, {
        reason: "wave 1 is healthy",
        actor: "dan",
      });
      expect(res.status, await res.clone().text()).toBe(200);
      await drive(h, decide);
      expect((await getRecord(h, id)).state).toBe("succeeded");
      expect([...touched].sort()).toEqual(["lane-a", "lane-b"]);
      const again = await op(h, "POST", `/v1/releases/${id}/promote`, {});
      expect(again.status).toBe(409);
      expect((await errorOf(again)).message).toMatch(
        /no earlier admitted manifest of model .* roll forward with a new recipe instead/,
      );
    },
  );
});
