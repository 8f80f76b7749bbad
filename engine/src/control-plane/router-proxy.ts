/**
 * The reference router as an HTTP proxy (docs/control-plane.md "The router as a proxy"): a
 * request to `/route/<model>/<path>` is sent to one lane of the model, chosen by the control
 * plane's current weights, and the lane's own answer comes back (status, headers, body) with
 * `baton-lane: <id>` added. So what a lane serves can be counted where the lane answers.
 *
 * The split is exact per batch: requests are dealt in batches planned with `route` (largest
 * remainder) over the lanes that can take traffic, each batch of `S × ⌈min_batch / S⌉`
 * requests where S is the sum of their weights, so every lane's quota is exactly
 * `size × weight / S` (10% of 100 is 10, not 9 or 11). A new batch is planned when the last
 * one is used up or the lanes' weights or markers changed; every answer carries
 * `baton-batch: <plan>/<index>/<size>`, so a client can tell one whole batch from requests that
 * straddled a change. Within a batch the lanes are interleaved evenly.
 *
 * No lane can take traffic: 503 `no_lane`. A lane's endpoint that does not answer: 502
 * `lane_unreachable` with `baton-lane`. Node only (node:http); loopback by default.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { LaneState } from "./model.ts";
import { route } from "./router.ts";

/** Where the proxy reads lanes and finds their endpoints. */
export interface RouterProxyOptions {
  /** The model's lanes as the control plane holds them now (`ControlPlaneCore.lanes`). */
  lanes: (model: string) => LaneState[];
  /** Base URL of a lane's serve endpoint (`http://127.0.0.1:41234`), or null when it has none. */
  upstream: (lane: string) => string | null;
  /** Fewest requests a batch covers (default 100); a batch is a whole multiple of the weights' sum. */
  minBatch?: number;
  /** Interface to bind (default 127.0.0.1); port 0 (default) picks a free one. */
  host?: string;
  port?: number;
}

export interface RouterProxyHandle {
  /** Base URL, e.g. `http://127.0.0.1:40123`; requests go to `${url}/route/<model>/<path>`. */
  url: string;
  close(): Promise<void>;
}

interface Batch {
  plan: number;
  /** The lanes' weights and markers it was planned over. */
  key: string;
  order: string[];
  next: number;
}

/**
 * Lane ids of one batch in the order they are served: `counts` spread evenly (lane j's k-th
 * request at position (k + ½) × size / count_j, ties by lane id). Pure.
 */
export function batchOrder(counts: Record<string, number>): string[] {
  const size = Object.values(counts).reduce((a, c) => a + c, 0);
  const slots: { at: number; id: string }[] = [];
  for (const [id, c] of Object.entries(counts))
    for (let k = 0; k < c; k++) slots.push({ at: ((k + 0.5) * size) / c, id });
  slots.sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return slots.map((s) => s.id);
}

/** Greatest common divisor of non-negative integers. */
const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** Plans batches and picks the lane of each request; exported for tests. */
export class BatchRouter {
  private readonly batches = new Map<string, Batch>();
  private plans = 0;
  constructor(
    private readonly lanes: (model: string) => LaneState[],
    private readonly minBatch = 100,
  ) {}

  /** The lane for the next request of `model`, with its batch position; null when none serves. */
  next(model: string): { lane: string; plan: number; index: number; size: number } | null {
    const lanes = this.lanes(model);
    const eligible = lanes.filter((l) => !l.excluded && l.weight > 0);
    if (eligible.length === 0) return null;
    const key = eligible
      .map((l) => `${l.id}=${l.weight}`)
      .sort()
      .join(",");
    let b = this.batches.get(model);
    if (!b || b.key !== key || b.next >= b.order.length) {
      const sum = eligible.reduce((a, l) => a + l.weight, 0);
      // The smallest size ≥ minBatch at which every quota size × w / sum is whole.
      const unit = sum / eligible.reduce((g, l) => gcd(g, l.weight), sum);
      const size = unit * Math.max(1, Math.ceil(this.minBatch / unit));
      b = { plan: ++this.plans, key, order: batchOrder(route(model, lanes, size).counts), next: 0 };
      this.batches.set(model, b);
    }
    const index = b.next++;
    return { lane: b.order[index]!, plan: b.plan, index, size: b.order.length };
  }
}

/** Starts the proxy; resolves once it listens. */
export async function startRouterProxy(o: RouterProxyOptions): Promise<RouterProxyHandle> {
  const router = new BatchRouter(o.lanes, o.minBatch);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const fail = (res: http.ServerResponse, status: number, code: string, message: string) => {
    if (res.headersSent) return res.destroy();
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { code, message } }));
  };
  const server = http.createServer((req, res) => {
    const m = /^\/route\/([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(req.url ?? "");
    if (!m) return fail(res, 404, "not_found", "[router] route requests as /route/<model>/<path>");
    const model = decodeURIComponent(m[1]!);
    const pick = router.next(model);
    if (!pick) return fail(res, 503, "no_lane", `[router] no lane of ${model} takes traffic`);
    const batch = `${pick.plan}/${pick.index}/${pick.size}`;
    res.setHeader("baton-lane", pick.lane);
    res.setHeader("baton-batch", batch);
    const base = o.upstream(pick.lane);
    if (!base)
      return fail(res, 502, "lane_unreachable", `[router] lane ${pick.lane} has no endpoint`);
    const target = new URL(`${m[2] ?? "/"}${m[3] ?? ""}`, base);
    const up = http.request(
      target,
      { method: req.method, headers: { ...req.headers, host: target.host }, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, {
          ...answer.headers,
          "baton-lane": pick.lane,
          "baton-batch": batch,
        });
        answer.pipe(res);
      },
    );
    up.setTimeout(10_000, () => up.destroy(new Error("timed out")));
    up.on("error", (err) =>
      fail(res, 502, "lane_unreachable", `[router] lane ${pick.lane}: ${err.message}`),
    );
    req.pipe(up);
  });
  const info = await new Promise<AddressInfo>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port ?? 0, o.host ?? "127.0.0.1", () =>
      resolve(server.address() as AddressInfo),
    );
  });
  return {
    url: `http://${o.host ?? "127.0.0.1"}:${info.port}`,
    async close() {
      agent.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
