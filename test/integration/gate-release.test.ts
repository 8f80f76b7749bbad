/**
 * The evidence gate in the release state machine, on both stores, with the embedded metrics
 * source reading the reference router's traffic generator over the control-plane double the
 * engine writes to, and a fake clock: a gated wave is held after its traffic assert and
 * evaluated every interval_ms; pass → the next wave, fail → compensation with a reason that
 * names the metric, its bound and the margin; no traffic to the candidate never passes;
 * inconclusive → paused with promote / abort as its only exits. Evidence is stored bound to
 * the release, generation, manifest digest and wave. Every loop is bounded by `drive`.
 */
import { expect, it } from "vitest";
import {
  acceptedCommands,
  gateLines,
  type RecordJson,
  releaseSummary,
} from "../../engine/src/cli/output.ts";
import { availableActions } from "../../engine/src/domain/transition/exits.ts";
import {
  compensationReason,
  gatedRecipe,
  IMAGE_UNDER_TEST as IMAGE,
  MODEL,
  run,
  start,
} from "../support/gate-rig.ts";
import { op } from "./service-harness.ts";
import { describeEachRig } from "./store-suites.ts";

describeEachRig("gated release on %s", ({ skip, open }) => {
  it.skipIf(skip)("a good candidate passes each gate and the release succeeds", async () => {
    const g = await open();
    const id = await start(g.h, gatedRecipe());
    await run(g);
    const release = await g.h.store.getRelease(id);
    expect(release?.state).toBe("succeeded");
    // The environment: the last wave's weights, every lane serving.
    expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 34, "lane-b": 33, "lane-c": 33 });
    const evidence = await g.h.store.listEvidence(id);
    const passes = evidence.filter((e) => e.decision === "pass");
    expect(passes.map((e) => e.wave)).toEqual([0, 1]);
    for (const e of passes) {
      expect(e).toMatchObject({
        release_id: id,
        generation: 1,
        manifest_digest: release?.manifest_digest,
        phase: "gate",
      });
      expect(e.elapsed_ms).toBeGreaterThanOrEqual(20_000);
      expect(e.arms?.candidate).toBeGreaterThan(400);
      expect(e.srm?.mismatch).toBe(false);
    }
    // Evaluations every interval: seq 1, 2, … per wave, waits before the pass.
    const wave0 = evidence.filter((e) => e.wave === 0).map((e) => e.seq);
    expect(wave0).toEqual(wave0.map((_, i) => i + 1));
    expect(wave0.length).toBeGreaterThan(1);
    expect(evidence.filter((e) => e.wave === 0 && e.decision === "wait").length).toBe(
      wave0.length - 1,
    );
    const messages = (await g.h.store.getHistory(id)).map((x) => x.message);
    expect(messages.some((m) => /gate of wave 1 \(20%\) passed/.test(m))).toBe(true);

    // The release record carries each gate (decision, figures) and the gate decisions.
    const rec = (await (await op(g.h, "GET", `/v1/releases/${id}/record`)).json()) as {
      evidence: { gates: Record<string, unknown>[] };
      decisions: { kind: string; by: string; automatic: boolean; why: string }[];
    };
    expect(rec.evidence.gates.map((x) => [x.wave, x.phase, x.decision])).toEqual([
      [0, "gate", "pass"],
      [1, "gate", "pass"],
    ]);
    const first = rec.evidence.gates[0] as {
      evaluations: number;
      arms: { candidate: number; control: number };
      srm: { mismatch: boolean };
      metrics: { name: string; lower: number; margin: number }[];
    };
    expect(first.evaluations).toBe(wave0.length);
    expect(first.arms).toEqual(passes[0]?.arms);
    expect(first.srm.mismatch).toBe(false);
    const er = first.metrics.find((m) => m.name === "error-rate");
    expect(er?.lower).toBeGreaterThanOrEqual(-(er?.margin ?? 0));
    const gateDecisions = rec.decisions.filter((d) => d.kind === "gate");
    expect(gateDecisions).toHaveLength(2); // the passes; the waits are not decisions
    expect(gateDecisions.every((d) => d.automatic && d.by === "engine")).toBe(true);

    // baton status shows the same: decision, counts per arm, SRM, bounds vs margin.
    const status = (await (await op(g.h, "GET", `/v1/releases/${id}`)).json()) as RecordJson;
    const lines = releaseSummary(status, g.h.clock.now()).join("\n");
    expect(gateLines(status).length).toBeGreaterThan(0);
    expect(lines).toMatch(/wave 1 \(20%\) gate: PASS after \d+ evaluations/);
    expect(lines).toMatch(
      /candidate [\d,]+ \/ control [\d,]+ units \(planned 20\.0% candidate, observed/,
    );
    expect(lines).toMatch(/SRM: ok \(planned 20\.0%\/80\.0%/);
    expect(lines).toMatch(
      /error-rate \(primary\): candidate \d+\.\d+% vs control \d+\.\d+%, allowed \+3\.0 points: within \((at most \d+\.?\d* points worse|no worse) than the control/,
    );
    expect(lines).toMatch(/slow-requests \(guardrail\):/);
  });

  it.skipIf(skip)(
    "the control arm is the baseline observed serving at start, not the assumed previous image",
    async () => {
      const g = await open();
      // lane-b and lane-c serve a hotfix the recipe's previous image does not name.
      const HOTFIX = `registry.example/summarizer@sha256:${"e".repeat(64)}`;
      g.traffic.setLaneImage("lane-b", HOTFIX);
      g.traffic.setLaneImage("lane-c", HOTFIX);
      const id = await start(g.h, gatedRecipe());
      await run(g);
      const evidence = await g.h.store.listEvidence(id);
      const pass = evidence.find((e) => e.wave === 0 && e.decision === "pass");
      expect(pass?.srm?.mismatch).toBe(false);
      // The environment: what the hotfix lanes served during wave 1 is the control arm.
      const hotfix = g.traffic
        .snapshot()
        .filter((c) => c.image === HOTFIX)
        .reduce((n, c) => n + c.units, 0);
      expect(hotfix).toBeGreaterThan(0);
      expect(pass?.arms?.control).toBeGreaterThan(0);
      expect(pass?.arms?.control).toBeLessThanOrEqual(hotfix);
      expect((await g.h.store.getRelease(id))?.state).toBe("succeeded");
    },
  );

  it.skipIf(skip)(
    "a router serving another split than the control plane holds fails the gate on SRM",
    async () => {
      const g = await open();
      // The router's config push for lane-a is stale: it sends lane-a 12 of every 92 units
      // (13%) whatever the control plane holds, while the control plane reads back 20%.
      g.traffic.setRouterFault("lane-a", 12);
      const id = await start(g.h, gatedRecipe());
      await run(g);
      const release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("rolled_back");
      // The environment: the router served the candidate about 13%, not the planned 20%.
      const served = g.traffic.snapshot();
      const units = (image: string) =>
        served.filter((c) => c.image === image).reduce((n, c) => n + c.units, 0);
      expect(units(IMAGE)).toBeGreaterThan(0);
      // Compensation restored the baseline weights at the control plane, and no wave past the
      // first began: the candidate never reached lane-b.
      expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 34, "lane-b": 33, "lane-c": 33 });
      expect(served.some((c) => c.lane === "lane-b" && c.image === IMAGE)).toBe(false);
      const evidence = await g.h.store.listEvidence(id);
      expect(evidence.some((e) => e.decision === "pass")).toBe(false);
      const last = evidence.at(-1);
      expect(last?.decision).toBe("fail");
      expect(last?.srm?.mismatch).toBe(true);
      const share =
        (last?.arms?.candidate ?? 0) / ((last?.arms?.candidate ?? 0) + (last?.arms?.control ?? 1));
      expect(share).toBeGreaterThan(0.08);
      expect(share).toBeLessThan(0.18);
      expect(await compensationReason(g.h, id)).toMatch(
        /gate of wave 1 \(20%\) failed: sample ratio mismatch: candidate 1\d\.\d\d% of units vs planned 20\.00% \(candidate [\d,]+, control [\d,]+\)/,
      );
      const rec = (await (await op(g.h, "GET", `/v1/releases/${id}/record`)).json()) as {
        evidence: { gates: { decision: string; srm: { mismatch: boolean } }[] };
      };
      expect(rec.evidence.gates[0]).toMatchObject({ decision: "fail", srm: { mismatch: true } });
    },
  );

  it.skipIf(skip)(
    "a candidate with errors well above the margin rolls back, naming metric, bound and margin",
    async () => {
      const g = await open(0.2);
      const id = await start(g.h, gatedRecipe());
      await run(g);
      const release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("rolled_back");
      const why = await compensationReason(g.h, id);
      expect(why).toMatch(
        /gate of wave 1 \(20%\) failed: error-rate: candidate \d+\.\d+% vs control \d\.\d+%, allowed \+3\.0 points: worse \(at least \d+\.\d+ points worse than the control/,
      );
      // Compensation wrote the baseline back: the environment, not only the tables.
      expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 34, "lane-b": 33, "lane-c": 33 });
      const evidence = await g.h.store.listEvidence(id);
      expect(evidence.at(-1)?.decision).toBe("fail");
      expect(evidence.some((e) => e.decision === "pass")).toBe(false);
      // The next wave never began.
      const wave1 = release?.step_runs.filter(
        (sr) => sr.direction === "fwd" && release.manifest.steps[sr.step_index]?.wave === 1,
      );
      expect(wave1).toEqual([]);
    },
  );

  it.skipIf(skip)(
    "no units to the candidate while the control serves: held to max wait, never a verdict",
    async () => {
      const g = await open();
      const id = await start(g.h, gatedRecipe());
      await run(g, { deploy: false }); // lane-a keeps serving the previous image
      const release = await g.h.store.getRelease(id);
      const evidence = await g.h.store.listEvidence(id);
      expect(evidence.length).toBeGreaterThan(1);
      expect(evidence.every((e) => e.decision === "wait" || e.decision === "inconclusive")).toBe(
        true,
      );
      expect(evidence.at(-1)?.decision).toBe("inconclusive");
      expect(evidence.at(-1)?.elapsed_ms).toBeGreaterThanOrEqual(120_000);
      // Held, not rolled back: paused for an operator, the wave's weights still in place.
      expect(release?.state).toBe("paused");
      expect(release?.reason).toMatch(
        /gate of wave 1 \(20%\) is inconclusive: inconclusive after 1\d\d s \(max_wait_ms 120,000\): insufficient data: the candidate received no units \(planned 20\.0%\), the control [\d,]+/,
      );
      expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 20, "lane-b": 40, "lane-c": 40 });
      expect(await compensationReason(g.h, id)).toBe("");
    },
  );

  it.skipIf(skip)(
    "missing evidence until max_wait_ms: paused for promote or abort; promote runs on",
    async () => {
      const g = await open();
      const id = await start(g.h, gatedRecipe());
      await run(g, { send: false });
      let release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("paused");
      expect(release?.gate?.decision).toBe("inconclusive");
      expect(release?.reason).toMatch(/gate of wave 1 \(20%\) is inconclusive: inconclusive after/);
      const exits = availableActions(release!).map((a) => a.action);
      expect(exits.sort()).toEqual(["abort", "promote"]);
      // The API offers the same, and refuses resume with the way out.
      const got = (await (await op(g.h, "GET", `/v1/releases/${id}`)).json()) as {
        available_actions: { action: string }[];
      };
      expect(got.available_actions.map((a) => a.action).sort()).toEqual(["abort", "promote"]);
      // `baton watch` and `baton status` derive their exits from this JSON: the same two.
      const offered = acceptedCommands(got as unknown as RecordJson);
      expect(offered.map((c) => c.split(" ")[1]).sort()).toEqual(["abort", "promote"]);
      const resume = await op(g.h, "POST", `/v1/releases/${id}/resume`);
      expect(resume.status).toBe(409);
      const promoted = await op(g.h, "POST", `/v1/releases/${id}/promote`, {
        reason: "traffic dashboard shows no regression",
        actor: "alice",
      });
      expect(promoted.status).toBe(200);
      release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("running");
      // The next wave's gate sees traffic and passes.
      await run(g);
      release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("succeeded");
      const history = await g.h.store.getHistory(id);
      expect(
        history.some((x) => x.kind === "promote" && /promoted by .*alice/.test(x.message)),
      ).toBe(true);
      // In the record, the operator's promote is a decision apart from the gate's own.
      const rec = (await (await op(g.h, "GET", `/v1/releases/${id}/record`)).json()) as {
        decisions: { kind: string; by: string; automatic: boolean; why: string }[];
      };
      const promote = rec.decisions.find((d) => d.kind === "promote");
      expect(promote).toMatchObject({ by: expect.stringMatching(/alice/), automatic: false });
      const gates = rec.decisions.filter((d) => d.kind === "gate");
      expect(gates.map((d) => d.automatic)).toEqual(gates.map(() => true));
      expect(gates.some((d) => /inconclusive/.test(d.why))).toBe(true);
      expect(gates.some((d) => /passed/.test(d.why))).toBe(true);
    },
  );

  it.skipIf(skip)("abort at an inconclusive gate compensates", async () => {
    const g = await open();
    const id = await start(g.h, gatedRecipe());
    await run(g, { send: false });
    expect((await g.h.store.getRelease(id))?.state).toBe("paused");
    const res = await op(g.h, "POST", `/v1/releases/${id}/abort`, { reason: "no data" });
    expect(res.status).toBe(200);
    await run(g, { send: false });
    expect((await g.h.store.getRelease(id))?.state).toBe("rolled_back");
    expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 34, "lane-b": 33, "lane-c": 33 });
  });
});
