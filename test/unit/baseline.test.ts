/**
 * The observed baseline check (engine/src/domain/baseline.ts): the recipe's lanes against the
 * control plane's, every disagreement a problem naming the lane and the fix.
 */
import { describe, expect, it } from "vitest";
import { type ControlPlaneLane, observeBaseline } from "../../engine/src/domain/baseline.ts";

const CANDIDATE = `reg.example/m@sha256:${"e".repeat(64)}`;

const lane = (id: string, over: Partial<ControlPlaneLane> = {}): ControlPlaneLane => ({
  id,
  model: "m",
  weight: 50,
  excluded: false,
  capabilities: [],
  advertised: false,
  ...over,
});

describe("observeBaseline", () => {
  it("returns the control plane's state of every recipe lane, in recipe order", () => {
    const r = observeBaseline({ model: "m", image: CANDIDATE, lanes: [{ id: "b" }, { id: "a" }] }, [
      lane("a", { weight: 34, capabilities: ["y", "x"], advertised: true }),
      lane("b", { weight: 66, excluded: true }),
      lane("z", { weight: 0 }), // of the model, unnamed, carries nothing: left alone
      lane("q", { model: "other", weight: 100 }),
    ]);
    expect(r).toEqual({
      ok: true,
      baseline: [
        { id: "b", weight: 66, excluded: true, capabilities: [], advertised: false, image: null },
        {
          id: "a",
          weight: 34,
          excluded: false,
          capabilities: ["x", "y"],
          advertised: true,
          image: null,
        },
      ],
    });
  });

  it("records the image each lane reported, null when unknown or not pinned by digest", () => {
    const hotfix = `reg.example/m@sha256:${"c".repeat(64)}`;
    const r = observeBaseline(
      { model: "m", image: CANDIDATE, lanes: [{ id: "a" }, { id: "b" }, { id: "c" }] },
      [
        lane("a", { weight: 34, image: hotfix }),
        lane("b", { weight: 33, image: "reg.example/m:latest" }),
        lane("c", { weight: 33 }),
      ],
    );
    expect(r.ok && r.baseline.map((l) => l.image)).toEqual([hotfix, null, null]);
  });

  it("refuses a lane the control plane serves for the model but the recipe does not name", () => {
    const r = observeBaseline({ model: "m", image: CANDIDATE, lanes: [{ id: "a" }, { id: "b" }] }, [
      lane("a", { weight: 34 }),
      lane("b", { weight: 33 }),
      lane("c", { weight: 33 }),
    ]);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems).toHaveLength(1);
    expect(r.problems[0]).toMatchObject({ path: "control_plane.lanes.c" });
    expect(r.problems[0]?.message).toContain("routes 33% of model m to lane c");
    expect(r.problems[0]?.fix).toContain("add lane c to the recipe");
  });

  it("refuses a recipe lane the control plane has never seen, or one of another model", () => {
    const r = observeBaseline(
      { model: "m", image: CANDIDATE, lanes: [{ id: "a" }, { id: "new" }, { id: "o" }] },
      [lane("a", { weight: 100 }), lane("o", { model: "other", weight: 100 })],
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => p.path)).toEqual(["lanes.1.id", "lanes.2.id"]);
    expect(r.problems[0]?.message).toContain("lane new is not registered for model m");
    expect(r.problems[0]?.fix).toContain('PUT /v1/lanes/new {"model":"m"}');
    expect(r.problems[1]?.message).toContain("lane o serves model other");
  });

  it("refuses a stated weight that differs from the observed one, and lanes not summing to 100", () => {
    const stated = observeBaseline(
      { model: "m", image: CANDIDATE, lanes: [{ id: "a", weight: 50 }, { id: "b" }] },
      [lane("a", { weight: 60 }), lane("b", { weight: 40 })],
    );
    expect(stated.ok).toBe(false);
    if (!stated.ok) expect(stated.problems[0]?.fix).toContain("set it to 60");
    const short = observeBaseline({ model: "m", image: CANDIDATE, lanes: [{ id: "a" }] }, [
      lane("a", { weight: 0 }),
    ]);
    expect(short.ok).toBe(false);
    if (!short.ok) expect(short.problems[0]?.message).toContain("carry 0% of model m");
  });

  it("refuses a lane in service that already runs the candidate, naming the lane and the fix", () => {
    // Same digest under another registry name is the same candidate.
    const elsewhere = `mirror.example/m@sha256:${"e".repeat(64)}`;
    const r = observeBaseline(
      {
        model: "m",
        image: CANDIDATE,
        previous_image: `reg.example/m@sha256:${"a".repeat(64)}`,
        lanes: [{ id: "a" }, { id: "b" }],
      },
      [lane("a", { weight: 90 }), lane("b", { weight: 10, image: elsewhere })],
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems).toHaveLength(1);
    expect(r.problems[0]?.path).toBe("control_plane.lanes.b.image");
    expect(r.problems[0]?.message).toContain("lane b already runs the candidate");
    expect(r.problems[0]?.message).toContain("10% of model m");
    expect(r.problems[0]?.fix).toContain(
      `redeploy lane b to reg.example/m@sha256:${"a".repeat(64)}`,
    );
    expect(r.problems[0]?.fix).toContain('PUT /v1/lanes/b/markers/excluded {"present":true}');
  });

  it("accepts a lane on the candidate that is excluded, and a lane on a third image", () => {
    const hotfix = `reg.example/m@sha256:${"c".repeat(64)}`;
    const r = observeBaseline({ model: "m", image: CANDIDATE, lanes: [{ id: "a" }, { id: "b" }] }, [
      lane("a", { weight: 100, image: hotfix }),
      lane("b", { weight: 0, excluded: true, image: CANDIDATE }),
    ]);
    expect(r.ok && r.baseline.map((l) => l.image)).toEqual([hotfix, CANDIDATE]);
  });
});
