/**
 * A gated release rig for tests: a service harness whose metrics source is the embedded one,
 * reading the reference router's traffic generator over the control-plane double the engine
 * writes to, with a fake clock; `run` drives a release to rest while the router sends units in
 * proportion to the clock's advance. Used by test/integration/gate-release.test.ts and the
 * dashboard's gate browser test.
 */
import { expect } from "vitest";
import { EmbeddedMetricsSource } from "../../engine/src/adapters/embedded-metrics/index.ts";
import type { EngineConfig } from "../../engine/src/config.ts";
import { TrafficGenerator } from "../../engine/src/control-plane/traffic.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Notifier } from "../../engine/src/ports/notifier.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  drive,
  FakeClock,
  type Harness,
  makeHarness,
  op,
  pumpOnce,
  recipe,
} from "../integration/service-harness.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";

export const MODEL = "summarizer-v7";
/** The gate tests' metrics: error rate (primary, 3 points) and requests over 250 ms (guardrail). */
export const GATE_METRICS = [
  { name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.03 } },
  {
    name: "slow-requests",
    kind: "latency",
    threshold_ms: 250,
    margin: { absolute: 0.05 },
    required: false,
  },
] as const;

/** A lane's `shadow_safe` declaration: every side effect isolated or suppressed. */
export const SHADOW_SAFE = {
  cache_namespace: "shadow-x",
  state_namespace: "shadow-x",
  tools: "sandboxed",
  egress: "restricted",
} as const;

/** Units the router draws per second of the fake clock. */
const UNITS_PER_S = 200;

export function gatedRecipe(over: Record<string, unknown> = {}): RecipeInput {
  const r = recipe(3);
  return {
    ...r,
    rollout: {
      waves: [
        { lanes: ["lane-a"], traffic: 20 },
        { lanes: ["lane-b"], traffic: 50 },
        { lanes: ["lane-c"], traffic: 100 },
      ],
    },
    analysis: {
      min_samples: 400,
      bake_ms: 20_000,
      interval_ms: 5_000,
      max_wait_ms: 120_000,
      metrics: [...GATE_METRICS],
      ...over,
    },
  } as RecipeInput;
}

export interface Rig {
  h: Harness;
  traffic: TrafficGenerator;
}

export async function rig(
  kind: "sqlite" | "postgres",
  candidateErrorRate = 0.01,
  /** Engine settings beside the harness's (e.g. `driftIntervalMs`). */
  config: Partial<EngineConfig> = {},
  /** The engine's notifiers (none by default). */
  notifiers?: Notifier[],
): Promise<Rig> {
  const clock = new FakeClock();
  const seed = gatedRecipe();
  // The router draws units over the weights the engine writes to the control-plane double.
  let source: EmbeddedMetricsSource | null = null;
  const h = await makeHarness({
    kind,
    clock,
    seed,
    config,
    ...(notifiers ? { notifiers } : {}),
    metrics: {
      observe: (q) => (source as EmbeddedMetricsSource).observe(q),
      releaseLabels: (q) => (source as EmbeddedMetricsSource).releaseLabels(q),
    },
  });
  const traffic = new TrafficGenerator(h.cp.core, { model: MODEL, seed: 11 });
  source = new EmbeddedMetricsSource(traffic);
  for (const l of seed.lanes ?? []) traffic.setLaneImage(String(l.id), PREVIOUS_IMAGE);
  traffic.setCandidate(IMAGE);
  traffic.setProfile(IMAGE, { errorRate: candidateErrorRate });
  return { h, traffic };
}

/**
 * The simulated runner: every step passes; a lane's image becomes the candidate when its attach
 * step runs (unless `deploy` is false), and the previous image again when it is restored.
 */
export function runner(
  g: Rig,
  o: { deploy?: boolean } = {},
): (p: DispatchPayload) => "pass" | "fail" | "skip" {
  return (p) => {
    const lane = (p.args as { lane?: { id?: string } }).lane?.id;
    if (lane && o.deploy !== false && p.tool === "attach-queue-lane") {
      g.traffic.setLaneImage(lane, IMAGE);
    }
    if (lane && p.tool === "restore-queue-lane") g.traffic.setLaneImage(lane, PREVIOUS_IMAGE);
    return "pass";
  };
}

/**
 * Drives the release: the runner passes every step; a lane's image becomes the candidate when
 * its attach step runs (and the previous image again when it is restored); the router sends
 * units in proportion to the fake clock's advance.
 */
export async function run(
  g: Rig,
  o: { deploy?: boolean; send?: boolean; until?: () => Promise<unknown> } = {},
): Promise<void> {
  let last = g.h.clock.now();
  await drive(
    g.h,
    runner(g, o),
    600,
    () => {
      const now = g.h.clock.now();
      const units = Math.floor(((now - last) / 1000) * UNITS_PER_S);
      last = now;
      if (units > 0 && o.send !== false) g.traffic.send(units);
    },
    o.until,
  );
}

/** The history line that began compensation (its reason). */
export async function compensationReason(h: Harness, id: string): Promise<string> {
  const line = (await h.store.getHistory(id)).find((x) =>
    / compensating from step /.test(x.message),
  );
  return line?.message ?? "";
}

export async function start(h: Harness, r: RecipeInput): Promise<string> {
  const res = await op(h, "POST", "/v1/releases", r);
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

export { IMAGE as IMAGE_UNDER_TEST };

/**
 * Drives release `id` until it is held at a gate that has been evaluated at least `seq` times
 * and still decides (the router sending units as the fake clock moves, one second a round);
 * bounded by `rounds`. @throws when the release never gets there.
 */
export async function holdAtGate(g: Rig, id: string, seq = 1, rounds = 300): Promise<void> {
  const decide = runner(g);
  for (let i = 0; i < rounds; i++) {
    await pumpOnce(g.h, decide);
    g.h.clock.advance(1_000);
    g.traffic.send(UNITS_PER_S);
    const rec = (await (await op(g.h, "GET", `/v1/releases/${id}`)).json()) as {
      state: string;
      gate: { seq: number; decision: string } | null;
    };
    if (rec.state === "running" && rec.gate && rec.gate.seq >= seq) return;
  }
  throw new Error(`[test] release ${id} was not held at a gate after ${rounds} rounds`);
}
