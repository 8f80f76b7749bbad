/**
 * A whole release with a shadow phase, its gate read through a real Prometheus (docs/recipes.md
 * "Shadow phase"), on both stores: the engine's metrics source is the Prometheus adapter, and
 * Prometheus scrapes the reference router (the HTTP proxy in front of lane stand-ins that share
 * no code with it) for the `baton_shadow_*` series of the mirrored requests. Users' requests go
 * through the router all along; the engine's writes to the control-plane double move the
 * router's weights; the engine's clock is the wall clock (Prometheus stamps samples with it).
 * While the shadow phase is held the candidate answers no user and the shadow-safe lane gets
 * mirrored copies only; the gate passes on Prometheus's numbers, the release goes on to its 100%
 * wave and succeeds, and its record names the shadow phase, its counts and its evidence. Every
 * loop is bounded in count and time; waiting is polling for something to happen.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { PrometheusMetricsSource } from "../../engine/src/adapters/prometheus/index.ts";
import {
  type RouterProxyHandle,
  startRouterProxy,
} from "../../engine/src/control-plane/router-proxy.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { GATE_METRICS, SHADOW_SAFE } from "../support/gate-rig.ts";
import { type PrometheusHandle, startPrometheus } from "../support/prometheus.ts";
import {
  createRelease,
  FakeClock,
  type Harness,
  makeHarness,
  pumpOnce,
  recipe,
  STORE_KINDS,
  seedControlPlane,
  skipStore,
} from "./service-harness.ts";

const LANES = ["lane-a", "lane-b", "lane-c"];
/** Wall-clock bound of one release (the gate needs a few scrapes, then its bake). */
const RELEASE_MS = 45_000;

/** Three lanes; lane-a shadow-safe takes the shadow phase, then every lane goes to 100%. */
function shadowRecipe(model: string): RecipeInput {
  const r = recipe(3);
  return {
    ...r,
    model,
    lanes: (r.lanes ?? []).map((l) =>
      l.id === "lane-a"
        ? {
            ...l,
            shadow_safe: SHADOW_SAFE,
          }
        : l,
    ),
    rollout: {
      waves: [
        { lanes: ["lane-a"], traffic: 0, shadow: { share: 50, rate_per_s: 1000 } },
        { lanes: ["lane-b", "lane-c"], traffic: 100 },
      ],
    },
    analysis: {
      min_samples: 200,
      bake_ms: 2000,
      interval_ms: 1000,
      max_wait_ms: 40_000,
      // The error rate only: the latency metric would judge this machine's load (the copies'
      // time on a CI run loaded 10 deep), not the release; the gate's latency rule through
      // Prometheus has its own tests.
      metrics: GATE_METRICS.filter((m) => m.name === "error-rate"),
    },
  } as RecipeInput;
}

/**
 * What one lane stand-in received, per model: users' requests (`plain`; `candidate` those that
 * came once a runner had deployed the candidate on it) and mirrored copies.
 */
interface Received {
  plain: number;
  candidate: number;
  mirrored: number;
}

describe("a release with a shadow phase gated through a real Prometheus", () => {
  const servers: http.Server[] = [];
  const endpoints = new Map<string, string>();
  /** Per `<model> <lane>`. */
  const received = new Map<string, Received>();
  /** The harness of the test running now, per model (the router reads its control plane). */
  const harnesses = new Map<string, Harness>();
  /** Lanes a runner deployed the candidate on, per model. */
  const candidateLanes = new Map<string, Set<string>>();
  let router: RouterProxyHandle;
  let prom: PrometheusHandle;

  const got = (model: string, lane: string): Received => {
    const key = `${model} ${lane}`;
    let r = received.get(key);
    if (!r) {
      r = { plain: 0, candidate: 0, mirrored: 0 };
      received.set(key, r);
    }
    return r;
  };

  beforeAll(async () => {
    for (const id of LANES) {
      const server = http.createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          const model = (req.url ?? "").split("/")[1] ?? "";
          const r = got(model, id);
          if (req.headers["baton-shadow"] === "1") r.mirrored++;
          else if (candidateLanes.get(model)?.has(id)) r.candidate++;
          else r.plain++;
          res.writeHead(200, { "content-type": "text/plain" });
          res.end(id);
        });
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      servers.push(server);
      endpoints.set(id, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    }
    router = await startRouterProxy({
      lanes: (model) => harnesses.get(model)?.cp.core.lanes(model) ?? [],
      upstream: (id) => endpoints.get(id) ?? null,
      shadow: {
        caps: (model) => (harnesses.has(model) ? { share: 50, rate_per_s: 1000 } : null),
        safe: (_, id) => id === "lane-a",
        candidate: (model, id) => candidateLanes.get(model)?.has(id) === true,
        authorize: () => true,
      },
    });
    prom = await startPrometheus([new URL(router.url).host]);
  }, 60_000);

  afterAll(async () => {
    await prom?.close();
    await router?.close();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
  });

  describe.each(STORE_KINDS)("on %s", (kind) => {
    it.skipIf(skipStore(kind))(
      "no user answered by the candidate while the shadow gate reads Prometheus; it passes, the release succeeds, the record names the phase",
      async () => {
        // The path is /route/<model>/<model>/…, so a lane stand-in knows the model.
        const model = `shadow-prom-${kind}`;
        const r = shadowRecipe(model);
        const clock = new FakeClock(Date.now());
        const cp = new MemoryControlPlane({ model, now: () => clock.now() });
        seedControlPlane(cp, r);
        const h = await makeHarness({
          kind,
          clock,
          cp,
          metrics: new PrometheusMetricsSource({ baseUrl: prom.url, timeoutMs: 2000 }),
        });
        harnesses.set(model, h);
        const deployed = new Set<string>();
        candidateLanes.set(model, deployed);
        let sending = true;
        /** Users' requests through the router until the release ends, two streams. */
        const users = async () => {
          for (let i = 0; sending && i < 20_000; i++) {
            const res = await fetch(`${router.url}/route/${model}/${model}/v1/summarize`, {
              method: "POST",
              body: `{"text":"request ${i}"}`,
            }).catch(() => null);
            await res?.text();
            await new Promise((ok) => setTimeout(ok, 5));
          }
        };
        const streams = [users(), users()];
        try {
          const id = await createRelease(h, r);
          /** Users the router had sent to lane-a when the candidate was deployed there. */
          let routedBefore: number | null = null;
          const decide = (p: DispatchPayload) => {
            const lane = (p.args.lane as { id?: string } | undefined)?.id;
            if (p.tool === "attach-queue-lane" && lane) {
              if (lane === "lane-a")
                routedBefore = router.counts(model).lanes["lane-a"]?.requests ?? 0;
              deployed.add(lane);
            }
            return "pass" as const;
          };
          /** The candidate's users' answers at the lane and at the router when its gate passed. */
          let atPass: { lane: number; router: number; mirrored: number } | null = null;
          const deadline = Date.now() + RELEASE_MS;
          let state = "pending";
          for (let round = 0; round < 2000 && Date.now() < deadline; round++) {
            clock.t = Date.now();
            const { t, fresh } = await pumpOnce(h, decide);
            const ev = await h.store.listEvidence(id);
            if (!atPass && ev.some((e) => e.wave === 0 && e.decision === "pass")) {
              atPass = {
                lane: got(model, "lane-a").candidate,
                router: (router.counts(model).lanes["lane-a"]?.requests ?? 0) - (routedBefore ?? 0),
                mirrored: got(model, "lane-a").mirrored,
              };
            }
            state = (await h.store.getRelease(id))?.state ?? "gone";
            if (["succeeded", "rolled_back", "needs_operator", "aborted"].includes(state)) break;
            if (t.performed === 0 && fresh.length === 0)
              await new Promise((ok) => setTimeout(ok, 200));
          }
          const ended = await h.store.getRelease(id);
          const evidence = (await h.store.listEvidence(id)).map(
            (e) => `wave ${e.wave}: ${e.decision}`,
          );
          expect(
            state,
            `release ${id}: ${ended?.reason ?? "no reason"}; gate evidence: ${evidence.join(", ") || "none"}`,
          ).toBe("succeeded");
          // Held through the shadow phase: the candidate's lane answered no user, only copies.
          expect(atPass).not.toBeNull();
          expect(routedBefore).not.toBeNull();
          expect(atPass?.lane).toBe(0);
          expect(atPass?.router).toBe(0);
          // The gate counts 200 copies by Prometheus's `increase()`, which extrapolates to the
          // edges of its window: the lane's own count may be a little lower (196 once, at load
          // 9 in CI). A pass on far fewer real copies would still fail here.
          expect(atPass?.mirrored).toBeGreaterThanOrEqual(180);
          for (const l of ["lane-b", "lane-c"]) expect(got(model, l).mirrored).toBe(0);
          // Once the 100% wave is in force the candidate answers users, on every lane.
          const answered = () => LANES.reduce((n, l) => n + got(model, l).candidate, 0);
          const before = answered();
          for (let i = 0; i < 10; i++)
            await (await fetch(`${router.url}/route/${model}/${model}/v1/summarize`)).text();
          expect(answered() - before).toBeGreaterThanOrEqual(10);
          // The gate's evidence of the phase: Prometheus's numbers (`increase()` extrapolates, so
          // not whole counts), the copies' answers and the baseline's to the same requests.
          const shadowEv = (await h.store.listEvidence(id)).filter((e) => e.wave === 0);
          const pass = shadowEv.at(-1);
          expect(pass?.decision).toBe("pass");
          expect(shadowEv.some((e) => e.decision === "wait")).toBe(true);
          expect(pass?.arms?.candidate).toBeGreaterThanOrEqual(200);
          expect(pass?.arms?.control).toBeGreaterThanOrEqual(200);
          const rec = (await h.engine.service.releaseRecord(id)) as unknown as {
            intended: { rollout_policy: { waves: { phase?: string }[] } };
            evidence: {
              shadow?: { phase: string; wave: number; mirrored: number; baseline: number }[];
            };
          };
          expect(rec.intended.rollout_policy.waves.map((w) => w.phase ?? "wave")).toEqual([
            "shadow",
            "wave",
          ]);
          const phase = rec.evidence.shadow?.[0];
          expect(phase).toMatchObject({ phase: "shadow", wave: 0 });
          // As the gate read them from Prometheus: the copies' answers and the baseline's.
          expect(phase?.mirrored).toBeGreaterThanOrEqual(200);
          expect(phase?.baseline).toBeGreaterThanOrEqual(200);
        } finally {
          sending = false;
          await Promise.all(streams);
          harnesses.delete(model);
          await h.close();
        }
      },
      90_000,
    );
  });
});
