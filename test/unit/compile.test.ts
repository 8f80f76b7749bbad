import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { TOOL_ALLOWLIST } from "../../engine/src/domain/allowlist.ts";
import { STEP_NAMES } from "../../engine/src/domain/catalogue.ts";
import { checkAndCompile, compileRecipe } from "../../engine/src/domain/compile.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { ManifestStep } from "../../engine/src/domain/types.ts";
import { canonicalJson } from "../../engine/src/protocol/canonical-json.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { manifestDigest } from "../../engine/src/recipes/digest.ts";
import {
  goodRecipe,
  IMAGE,
  NEW_DIGEST,
  OLD_DIGEST,
  PREVIOUS_IMAGE,
  wideRecipe,
} from "./recipe-fixture.ts";

const compile = (r: RecipeInput) => compileRecipe(Recipe.parse(r));

/** Weights of a control-plane action, or undefined. */
function weights(a: ManifestStep["forward"] | null): Record<string, number> | undefined {
  if (a?.kind !== "control_plane") return undefined;
  return "weights" in a.request ? a.request.weights : undefined;
}

describe("compileRecipe: the step table of 3 lanes, waves 10 -> 50 -> 100", () => {
  const { manifest } = compile(goodRecipe());
  const steps = manifest.steps;

  it("has the documented rows in order", () => {
    const lane = (id: string) =>
      [
        "exclude_lane",
        "attach_queue_lane",
        "assert_smoke_passed",
        "advertise_capabilities",
        "include_lane",
      ].map((n) => `${n}(${id})`);
    expect(
      steps.map((s) => (s.lane ? `${s.name}(${s.lane})` : `${s.name}(${s.forward.target})`)),
    ).toEqual([
      "drain_wave(drain:traffic=0)",
      ...lane("lane-a"),
      "set_traffic(traffic=10)",
      "assert_traffic_observed(traffic=10)",
      "drain_wave(drain:traffic=10)",
      ...lane("lane-b"),
      "set_traffic(traffic=50)",
      "assert_traffic_observed(traffic=50)",
      // No lane on the previous image would serve while lane-c redeploys: 100% moves first.
      "drain_wave(drain:traffic=100)",
      ...lane("lane-c"),
      "set_traffic(traffic=100)",
      "assert_traffic_observed(traffic=100)",
    ]);
    expect(steps.map((s) => s.index)).toEqual(steps.map((_, i) => i));
    expect(steps.map((s) => s.wave)).toEqual([
      ...Array(8).fill(0),
      ...Array(8).fill(1),
      ...Array(8).fill(2),
    ]);
  });

  it("pairs every mutating step with its backward action; assertions have none", () => {
    const pairs = Object.fromEntries(
      steps.slice(0, 8).map((s) => [s.name, s.backward?.name ?? null]),
    );
    expect(pairs).toEqual({
      drain_wave: "set_traffic",
      exclude_lane: "include_lane",
      attach_queue_lane: "restore_queue_lane",
      assert_smoke_passed: null,
      advertise_capabilities: "withdraw_capabilities",
      include_lane: "exclude_lane",
      set_traffic: "set_traffic",
      assert_traffic_observed: null,
    });
  });

  it("sets absolute weights per wave, restoring the previous ones backward", () => {
    const traffic = steps.filter((s) => s.name === "set_traffic");
    expect(traffic.map((s) => weights(s.forward))).toEqual([
      { "lane-a": 10, "lane-b": 45, "lane-c": 45 },
      { "lane-a": 25, "lane-b": 25, "lane-c": 50 },
      { "lane-a": 34, "lane-b": 33, "lane-c": 33 },
    ]);
    // Backward, each set_traffic restores the drained state right before it.
    expect(traffic.map((s) => weights(s.backward))).toEqual([
      { "lane-a": 0, "lane-b": 50, "lane-c": 50 },
      { "lane-a": 10, "lane-b": 0, "lane-c": 90 },
      { "lane-a": 51, "lane-b": 49, "lane-c": 0 },
    ]);
    expect(traffic.map((s) => s.backward?.target)).toEqual([
      "traffic=0",
      "traffic=10",
      "traffic=100",
    ]);
    for (const s of steps.filter((x) => x.name === "assert_traffic_observed")) {
      expect(s.forward.kind === "control_plane" && s.forward.request.op).toBe("assert_traffic");
    }
  });

  it("drains each wave's lanes first: their share goes to lanes of the same image only", () => {
    const drains = steps.filter((s) => s.name === "drain_wave");
    expect(drains.map((s) => weights(s.forward))).toEqual([
      // canary wave: lane-a out, its 34% to lane-b and lane-c (previous image); 0% candidate
      { "lane-a": 0, "lane-b": 50, "lane-c": 50 },
      // wave 1: lane-a (new image) keeps the 10% in force, lane-b out, lane-c carries 90%
      { "lane-a": 10, "lane-b": 0, "lane-c": 90 },
      // wave 2 declares 100% and no previous-image lane would remain: its traffic moves first
      { "lane-a": 51, "lane-b": 49, "lane-c": 0 },
    ]);
    expect(drains.map((s) => weights(s.backward))).toEqual([
      { "lane-a": 34, "lane-b": 33, "lane-c": 33 }, // the baseline
      { "lane-a": 10, "lane-b": 45, "lane-c": 45 },
      { "lane-a": 25, "lane-b": 25, "lane-c": 50 },
    ]);
    for (const s of steps.filter((x) => x.name === "assert_traffic_observed")) {
      expect(s.forward.kind === "control_plane" && s.forward.request.op).toBe("assert_traffic");
    }
  });

  it("builds short, deterministic operation-key targets", () => {
    expect(steps.slice(1, 6).map((s) => [s.forward.target, s.backward?.target ?? null])).toEqual([
      ["lane=lane-a:excluded=true", "lane=lane-a:excluded=false"],
      [
        `lane=lane-a:image=${NEW_DIGEST.slice(0, 12)}`,
        `lane=lane-a:image=${OLD_DIGEST.slice(0, 12)}`,
      ],
      [`lane=lane-a:smoke=${NEW_DIGEST.slice(0, 12)}`, null],
      ["lane=lane-a:capabilities=advertised", "lane=lane-a:capabilities=withdrawn"],
      ["lane=lane-a:excluded=false", "lane=lane-a:excluded=true"],
    ]);
  });

  it("gives runner steps allowlisted tools and the shared args shape", () => {
    const attach = steps[2]!;
    expect(attach.kind).toBe("runner");
    if (attach.forward.kind !== "runner" || attach.backward?.kind !== "runner")
      throw new Error("runner");
    expect(attach.forward.tool).toBe("attach-queue-lane");
    expect(attach.backward.tool).toBe("restore-queue-lane");
    expect(attach.forward.args).toEqual({
      lane: {
        id: "lane-a",
        host: "gpu-0.serving.acme.internal",
        port: 22,
        user: "deploy",
        host_key: goodRecipe().lanes[0]!.host_key,
        queue: "summarize",
        health_url: "http://gpu-0.serving.acme.internal:8080/healthz",
      },
      image: IMAGE,
      previous_image: PREVIOUS_IMAGE,
    });
    // The backward step runs the previous image again.
    expect(attach.backward.args.image).toBe(PREVIOUS_IMAGE);
    expect(attach.backward.args.previous_image).toBe(IMAGE);
    const smoke = steps[3]!.forward;
    expect(smoke.kind === "runner" && smoke.tool).toBe("run-smoke");
    for (const s of steps) {
      for (const a of [s.forward, s.backward]) {
        if (a?.kind === "runner") expect(TOOL_ALLOWLIST).toContain(a.tool);
      }
    }
  });

  it("fills every manifest field, with default deadlines and retries", () => {
    expect(manifest).toMatchObject({
      v: 1,
      recipe_name: "summarizer-v7-rollout",
      model: "summarizer-v7",
      image: IMAGE,
      previous_image: PREVIOUS_IMAGE,
      tool_revision: null,
      waves: [
        { lanes: ["lane-a"], traffic: 10 },
        { lanes: ["lane-b"], traffic: 50 },
        { lanes: ["lane-c"], traffic: 100 },
      ],
    });
    expect(manifest.lanes.map((l) => [l.id, l.port, l.baseline_weight])).toEqual([
      ["lane-a", 22, 34],
      ["lane-b", 22, 33],
      ["lane-c", 22, 33],
    ]);
    for (const s of steps) {
      expect(s.start_deadline_ms).toBe(600_000);
      expect(s.callback_deadline_ms).toBe(1_800_000);
      expect(s.on_failure).toBe("compensate");
      expect(s.retries).toBe(s.kind === "runner" ? 0 : 2);
    }
  });
});

describe("compileRecipe: policy, deadlines, weights", () => {
  it("applies the recipe-wide policy, then per-step overrides", () => {
    const r = goodRecipe();
    r.policy = {
      retries: 1,
      on_failure: "pause",
      steps: { set_traffic: { retries: 4, on_failure: "compensate" } },
    };
    r.deadlines = { start_ms: 120_000 };
    const { manifest } = compile(r);
    for (const s of manifest.steps) {
      expect(s.retries).toBe(s.name === "set_traffic" ? 4 : 1);
      expect(s.on_failure).toBe(s.name === "set_traffic" ? "compensate" : "pause");
      expect(s.start_deadline_ms).toBe(120_000);
      expect(s.callback_deadline_ms).toBe(1_800_000);
    }
  });

  it("splits traffic by the given baseline weights", () => {
    const r = goodRecipe();
    r.lanes[0]!.weight = 20;
    r.lanes[1]!.weight = 50;
    r.lanes[2]!.weight = 30;
    const { manifest } = compile(r);
    const drain = manifest.steps.find((s) => s.name === "drain_wave")!;
    expect(weights(drain.backward)).toEqual({ "lane-a": 20, "lane-b": 50, "lane-c": 30 });
    expect(weights(drain.forward)).toEqual({ "lane-a": 0, "lane-b": 63, "lane-c": 37 });
    const first = manifest.steps.find((s) => s.name === "set_traffic")!;
    expect(weights(first.backward)).toEqual({ "lane-a": 0, "lane-b": 63, "lane-c": 37 });
    expect(weights(first.forward)).toEqual({ "lane-a": 10, "lane-b": 56, "lane-c": 34 });
  });

  it("the policy step keys are exactly the catalogue's step names", () => {
    const keys = Object.keys(Recipe.shape.policy.unwrap().shape.steps.unwrap().shape);
    expect(keys).toEqual([...STEP_NAMES]);
  });
});

describe("canonical JSON and the manifest digest", () => {
  it("sorts keys and drops whitespace", () => {
    expect(canonicalJson({ b: [1, { z: "é", a: null }], a: true, "": -0 })).toBe(
      '{"":0,"a":true,"b":[1,{"a":null,"z":"é"}]}',
    );
  });

  it("refuses values JSON cannot carry, naming the path", () => {
    expect(() => canonicalJson({ a: [1, Number.NaN] })).toThrow(/\$\.a\.1 is NaN/);
    expect(() => canonicalJson({ a: undefined })).toThrow(/\$\.a is undefined/);
    expect(() => canonicalJson({ d: new Date(0) })).toThrow(/not a plain object/);
  });

  it("is stable under key reordering of the input recipe", () => {
    const reverse = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(reverse)
        : v !== null && typeof v === "object"
          ? Object.fromEntries(
              Object.entries(v)
                .reverse()
                .map(([k, x]) => [k, reverse(x)]),
            )
          : v;
    const a = compileRecipeInput(goodRecipe());
    const b = compileRecipeInput(reverse(goodRecipe()));
    expect(JSON.stringify(reverse(goodRecipe()))).not.toBe(JSON.stringify(goodRecipe()));
    expect(b.canonical).toBe(a.canonical);
    expect(b.manifest_digest).toBe(a.manifest_digest);
  });

  it("is sha256 hex of the canonical bytes, and changes with the recipe", () => {
    const a = compileRecipeInput(goodRecipe());
    expect(a.manifest_digest).toMatch(/^[a-f0-9]{64}$/);
    expect(a.manifest_digest).toBe(createHash("sha256").update(a.canonical).digest("hex"));
    expect(manifestDigest(a.canonical)).toBe(a.manifest_digest);
    expect(JSON.parse(a.canonical)).toEqual(a.manifest);
    const r = goodRecipe();
    r.rollout!.waves[1]!.traffic = 60;
    expect(compileRecipeInput(r).manifest_digest).not.toBe(a.manifest_digest);
  });

  it("spelled-out defaults give the same digest as omitted ones", () => {
    const r = goodRecipe();
    r.lanes = r.lanes.map((l) => ({ ...l, port: 22 }));
    r.policy = { on_failure: "compensate", steps: {} };
    r.deadlines = { start_ms: 600_000, callback_ms: 1_800_000 };
    expect(compileRecipeInput(r).manifest_digest).toBe(
      compileRecipeInput(goodRecipe()).manifest_digest,
    );
  });
});

describe("large recipes", () => {
  it("compiles 64 lanes; every runner step's args JSON is under 8 KB", () => {
    const res = checkAndCompile(wideRecipe(64));
    if (!res.ok) throw new Error(JSON.stringify(res.problems));
    const { manifest, canonical } = res;
    expect(manifest.lanes).toHaveLength(64);
    expect(manifest.steps).toHaveLength(64 * 5 + 2 * 3);
    let runner = 0;
    for (const s of manifest.steps) {
      for (const a of [s.forward, s.backward]) {
        if (a?.kind !== "runner") continue;
        runner++;
        expect(Buffer.byteLength(JSON.stringify(a.args))).toBeLessThan(8 * 1024);
      }
    }
    expect(runner).toBe(64 * 3);
    const last = manifest.steps.filter((s) => s.name === "set_traffic").at(-1)!;
    expect(Object.values(weights(last.forward)!).reduce((a, b) => a + b, 0)).toBe(100);
    expect(canonical.length).toBeGreaterThan(0);
  });
});

describe("compileRecipe: lanes marked for drills", () => {
  it("a lane marked `drill: true` carries it in the manifest; unmarked and `drill: false` lanes compile as before", () => {
    const plain = goodRecipe();
    const marked = goodRecipe();
    marked.lanes = marked.lanes.map((l, i) => (i === 1 ? { ...l, drill: true } : l));
    const { manifest } = compile(marked);
    expect(manifest.lanes.map((l) => l.drill ?? false)).toEqual([false, true, false]);
    const off = goodRecipe();
    off.lanes = off.lanes.map((l) => ({ ...l, drill: false }));
    const digest = (r: RecipeInput) => manifestDigest(compile(r).canonical);
    expect(digest(off)).toBe(digest(plain));
    expect(digest(marked)).not.toBe(digest(plain));
  });

  it("refuses a drill mark that is not true or false, naming the lane's field", () => {
    const r = goodRecipe();
    r.lanes = r.lanes.map((l, i) => (i === 2 ? { ...l, drill: "yes" as unknown as boolean } : l));
    const res = checkAndCompile(r);
    expect(res.ok).toBe(false);
    if (res.ok) return;
    expect(res.problems).toEqual([
      expect.objectContaining({
        path: "lanes.2.drill",
        message: expect.stringContaining("drill must be true or false"),
      }),
    ]);
  });
});
