/**
 * Sticky assignment at the reference router (engine/src/control-plane/router-proxy.ts), over
 * real HTTP: generated unit keys and generated sequences of candidate shares that only widen
 * (split over one or two candidate lanes, the rest over two control lanes). After each change
 * every unit sends a request with its key through the router proxy, and the arm is read where
 * the lane answers (its image). A unit once on the candidate is on it at every later share; the
 * router's own counts agree: no unit moved to the control, each unit counted once per split on
 * one arm, every request counted.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LaneState } from "../../engine/src/control-plane/model.ts";
import {
  type RouterProxyHandle,
  startRouterProxy,
  UNIT_HEADERS,
} from "../../engine/src/control-plane/router-proxy.ts";

const RUNS = Number(process.env.BATON_STICKY_RUNS ?? 25);

const CANDIDATE_LANES = ["c1", "c2"];
const CONTROL_LANES = ["b1", "b2"];

const lane = (id: string, weight: number): LaneState =>
  ({
    id,
    model: "m",
    weight,
    excluded: false,
    capabilities: [],
    advertised: false,
    updated_at: 0,
  }) as LaneState;

/** Candidate percent p over c1/c2 (`cut` of it on c1), 100 − p over b1/b2 (`cut2` on b1). */
function weights(p: number, cut: number, cut2: number): LaneState[] {
  const c1 = Math.round(p * cut);
  const b1 = Math.round((100 - p) * cut2);
  return [lane("c1", c1), lane("c2", p - c1), lane("b1", b1), lane("b2", 100 - p - b1)];
}

describe("sticky assignment through the router proxy", () => {
  const closers: (() => Promise<void>)[] = [];
  let lanes: LaneState[] = weights(0, 0.5, 0.5);
  let proxy: RouterProxyHandle;
  const ups: Record<string, string> = {};

  beforeAll(async () => {
    for (const id of [...CANDIDATE_LANES, ...CONTROL_LANES]) {
      const image = CANDIDATE_LANES.includes(id) ? "new" : "old";
      const server = http.createServer((req, res) => {
        req.resume();
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ image }));
      });
      await new Promise<void>((ok) => server.listen(0, "127.0.0.1", () => ok()));
      closers.push(
        () =>
          new Promise<void>((ok) => {
            server.close(() => ok());
            server.closeAllConnections();
          }),
      );
      ups[id] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    }
  });
  afterAll(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** The image that answered `key`'s request, and the router's unit header. */
  async function send(model: string, key: string) {
    const res = await fetch(`${proxy.url}/route/${model}/v1/x`, {
      headers: { [UNIT_HEADERS.session]: key },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { image: string };
    expect(res.headers.get("baton-unit")).toBe("session");
    return body.image;
  }

  it("a unit never leaves the candidate while its share widens (counted where the lanes answer and at the router)", async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.stringMatching(/^[A-Za-z0-9_.-]{1,24}$/), {
          minLength: 1,
          maxLength: 30,
        }),
        fc.array(fc.integer({ min: 0, max: 100 }), { minLength: 1, maxLength: 6 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.string({ minLength: 1, maxLength: 8 }),
        async (keys, shares, cut, cut2, salt) => {
          // A model per run: its counts start at zero.
          const model = `m${runs++}`;
          proxy = await startRouterProxy({
            lanes: () => lanes,
            upstream: (id) => ups[id] ?? null,
            assignment: {
              unit: () => "session",
              arm: (_m, id) => (CANDIDATE_LANES.includes(id) ? "candidate" : "control"),
              salt: () => salt,
            },
          });
          try {
            const widening = [...shares].sort((a, b) => a - b);
            const onCandidate = new Set<string>();
            let splits = 0;
            let previous: string | null = null;
            for (const p of widening) {
              lanes = weights(p, cut, cut2);
              const split = JSON.stringify(lanes);
              if (split !== previous) splits++;
              previous = split;
              const images = await Promise.all(keys.map((k) => send(model, k)));
              keys.forEach((k, i) => {
                if (images[i] === "new") onCandidate.add(k);
                else expect(onCandidate.has(k), `${k} left the candidate at ${p}%`).toBe(false);
              });
              // At 0% nobody, at 100% everybody is on the candidate.
              if (p === 0) expect(images.every((x) => x === "old")).toBe(true);
              if (p === 100) expect(images.every((x) => x === "new")).toBe(true);
            }
            const c = proxy.counts(model);
            expect(c.moved.control).toBe(0);
            expect(c.arms.candidate.requests + c.arms.control.requests).toBe(
              keys.length * widening.length,
            );
            // Each key counts once per split (a repeated share is the same split), on one arm.
            expect(c.arms.candidate.units + c.arms.control.units).toBe(keys.length * splits);
            expect(c.split).toBe(splits);
            expect(c.arms.candidate.keyless + c.arms.control.keyless).toBe(0);
          } finally {
            await proxy.close();
          }
        },
      ),
      { numRuns: RUNS },
    );
  });
});
