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
 * Sticky assignment (docs/control-plane.md "Sticky assignment"): with `assignment`, a model whose
 * assignment unit is `session`, `user` or `tenant` routes a request that carries the unit's key
 * (header `baton-session`, `baton-user`, `baton-tenant` unless configured) with `stickyLane`,
 * so the unit keeps its arm while the candidate's share holds or widens; a request without a
 * key is routed per request (the batches above) and counted apart as `keyless`. The router
 * counts, per model, lane and arm, requests, units (a unit counts once per arm per split: its
 * first request after the lanes' weights last changed) and keyless requests, and the units that
 * moved between arms; `GET /counts/<model>` answers them as JSON.
 *
 * Release labels (docs/control-plane.md "Release labels"): every request forwarded to a lane
 * carries `baton-release: <id>` (the release the model's traffic is under, `none` before any)
 * and `baton-arm: candidate | control` (`unknown` when the router is not told arms); a client's
 * own values of those headers are replaced. The router counts requests per release and arm
 * (`releases` in `GET /counts/<model>`), so the lanes' counts by label can be checked against it.
 *
 * No lane can take traffic: 503 `no_lane`. A lane's endpoint that does not answer: 502
 * `lane_unreachable` with `baton-lane`. Node only (node:http); loopback by default.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { AssignmentUnit } from "../domain/gate/analysis.ts";
import type { ChangeRecord, LaneState } from "./model.ts";
import { type Arm, route, stickyLane } from "./router.ts";

/** Header carrying each unit's key unless `assignment.headers` says otherwise. */
export const UNIT_HEADERS: Readonly<Record<Exclude<AssignmentUnit, "request">, string>> = {
  session: "baton-session",
  user: "baton-user",
  tenant: "baton-tenant",
};

/** How the router assigns units to arms (absent: every model per request, as batches). */
export interface AssignmentOptions {
  /** The model's assignment unit now: the `assignment_unit` of the gated wave in force. */
  unit: (model: string) => AssignmentUnit;
  /** The arm lane `lane` of `model` serves now: `candidate` when it serves the candidate image. */
  arm: (model: string, lane: string) => Arm;
  /** Header carrying each unit's key (lower case); defaults: {@link UNIT_HEADERS}. */
  headers?: Partial<Record<Exclude<AssignmentUnit, "request">, string>>;
  /** Mixed into every unit's hash, e.g. the release id; default: the model. */
  salt?: (model: string) => string;
}

/** Where the proxy reads lanes and finds their endpoints. */
export interface RouterProxyOptions {
  /** The model's lanes as the control plane holds them now (`ControlPlaneCore.lanes`). */
  lanes: (model: string) => LaneState[];
  /** Base URL of a lane's serve endpoint (`http://127.0.0.1:41234`), or null when it has none. */
  upstream: (lane: string) => string | null;
  /** Fewest requests a batch covers (default 100); a batch is a whole multiple of the weights' sum. */
  minBatch?: number;
  /** Sticky assignment and arm counts; absent: per request, counted per lane only. */
  assignment?: AssignmentOptions;
  /**
   * The release `model`'s traffic is under now, labelled on every forwarded request; null: none
   * yet. Default: none (`baton-release: none`). {@link ObservedRelease} reads it from the
   * control plane's history.
   */
  release?: (model: string) => string | null;
  /** Interface to bind (default 127.0.0.1); port 0 (default) picks a free one. */
  host?: string;
  port?: number;
}

export interface RouterProxyHandle {
  /** Base URL, e.g. `http://127.0.0.1:40123`; requests go to `${url}/route/<model>/<path>`. */
  url: string;
  /** The counts `GET /counts/<model>` answers. */
  counts(model: string): RouterCounts;
  close(): Promise<void>;
}

/** Cumulative counts of one lane or arm since the router started. */
export interface ArmCount {
  /** Requests routed (keyless ones included). */
  requests: number;
  /**
   * Assignment units: a unit counts once per arm per split (its first request after the
   * model's split last changed); under `request` assignment every request is a unit.
   */
  units: number;
  /** Requests without the unit's key under a non-request unit, routed per request. */
  keyless: number;
}

/** What the router counted for one model (`GET /counts/<model>`). */
export interface RouterCounts {
  model: string;
  /** The model's assignment unit now. */
  unit: AssignmentUnit;
  /** Number of the split in force: bumped when the lanes' weights, markers or arms change. */
  split: number;
  /** Per lane (the arm it served under, when known). */
  lanes: Record<string, ArmCount & { arm: Arm | null }>;
  /** Per arm; zeros without `assignment`. */
  arms: Record<Arm, ArmCount>;
  /** Units whose request went to another arm than their previous one, by the arm they moved to. */
  moved: Record<Arm, number>;
  /**
   * Requests forwarded per release label (`none` before any release) and arm label (`unknown`
   * without arms), as the lanes received them in `baton-release` and `baton-arm`.
   */
  releases: Record<string, ReleaseCount>;
}

/** Requests of one release label, per arm label. */
export type ReleaseCount = Record<ArmLabel, number>;

/** The `baton-arm` value: the arm, or `unknown` when the router is not told arms. */
export type ArmLabel = Arm | "unknown";

/** Header naming the release a forwarded request is served under (`none`: no release yet). */
export const RELEASE_HEADER = "baton-release";
/** Header naming the arm of a forwarded request: `candidate`, `control` or `unknown`. */
export const ARM_HEADER = "baton-arm";

/**
 * The release a model's traffic is under, read from the control plane's history: the release of
 * the latest applied change to the model's traffic or to one of its lanes. Reads only entries it
 * has not seen (`after`), so a request costs no more than the changes since the last one.
 */
export class ObservedRelease {
  private after = 0;
  /** `m:<model>` or `l:<lane>` -> the latest change to it (history id) and its release. */
  private readonly latest = new Map<string, { id: number; release: string }>();
  constructor(
    private readonly history: (q: { after: number }) => ChangeRecord[],
    private readonly lanes: (model: string) => LaneState[],
  ) {}

  /** The release of the latest change to `model` or its lanes; null when none wrote them. */
  of(model: string): string | null {
    for (const c of this.history({ after: this.after })) {
      this.after = Math.max(this.after, c.id);
      const seen = { id: c.id, release: c.release_id };
      if (c.model !== null) this.latest.set(`m:${c.model}`, seen);
      if (c.lane !== null) this.latest.set(`l:${c.lane}`, seen);
    }
    const keys = [`m:${model}`, ...this.lanes(model).map((l) => `l:${l.id}`)];
    let best: { id: number; release: string } | undefined;
    for (const k of keys) {
      const v = this.latest.get(k);
      if (v && (!best || v.id > best.id)) best = v;
    }
    return best?.release ?? null;
  }
}

const zero = (): ArmCount => ({ requests: 0, units: 0, keyless: 0 });

/** One routing decision of {@link UnitRouter}. */
export interface UnitPick {
  lane: string;
  arm: Arm | null;
  /** The unit the request was assigned by, or `request` (keyless ones included). */
  by: AssignmentUnit;
  /** Set when the request was routed per request (a batch position). */
  batch?: { plan: number; index: number; size: number };
}

interface ModelCounts {
  split: number;
  splitKey: string;
  /** `<arm>\0<key>` of the units seen in the current split. */
  seen: Set<string>;
  /** Each unit's last arm (for `moved`). */
  last: Map<string, Arm>;
  lanes: Map<string, ArmCount & { arm: Arm | null }>;
  arms: Record<Arm, ArmCount>;
  moved: Record<Arm, number>;
}

/**
 * Routes and counts: per request through {@link BatchRouter}, or stickily by a unit's key
 * ({@link stickyLane}). Keeps every unit key it has seen in memory (a reference router for the
 * demo and the tests). Exported for tests.
 */
export class UnitRouter {
  private readonly batch: BatchRouter;
  private readonly models = new Map<string, ModelCounts>();
  private readonly releases = new Map<string, Map<string, ReleaseCount>>();
  constructor(
    private readonly lanes: (model: string) => LaneState[],
    private readonly assignment?: AssignmentOptions,
    minBatch?: number,
  ) {
    this.batch = new BatchRouter(lanes, minBatch);
  }

  /** The model's assignment unit now (`request` without `assignment`). */
  unit(model: string): AssignmentUnit {
    return this.assignment?.unit(model) ?? "request";
  }

  /** The header that carries `unit`'s key, or null for `request`. */
  header(unit: AssignmentUnit): string | null {
    if (unit === "request") return null;
    return (this.assignment?.headers?.[unit] ?? UNIT_HEADERS[unit]).toLowerCase();
  }

  /**
   * The lane for one request of `model` carrying `key` (null or empty: none), counted; null
   * when no lane takes traffic.
   */
  next(model: string, key: string | null): UnitPick | null {
    const unit = this.unit(model);
    const lanes = this.lanes(model);
    const armOf = (lane: string): Arm | null => this.assignment?.arm(model, lane) ?? null;
    const m = this.model(model, lanes, armOf);
    let pick: UnitPick;
    if (unit !== "request" && key) {
      const salt = this.assignment?.salt?.(model) ?? model;
      const s = stickyLane(lanes, (l) => armOf(l) ?? "control", salt, key);
      if (!s) return null;
      pick = { lane: s.lane, arm: s.arm, by: unit };
    } else {
      const b = this.batch.next(model);
      if (!b) return null;
      const { lane, ...batch } = b;
      pick = { lane, arm: armOf(lane), by: "request", batch };
    }
    this.count(m, pick, unit, unit === "request" ? null : key || null);
    return pick;
  }

  private model(
    model: string,
    lanes: LaneState[],
    armOf: (lane: string) => Arm | null,
  ): ModelCounts {
    const splitKey = lanes
      .filter((l) => !l.excluded && l.weight > 0)
      .map((l) => `${l.id}=${l.weight}:${armOf(l.id) ?? "-"}`)
      .sort()
      .join(",");
    let m = this.models.get(model);
    if (!m) {
      m = {
        split: 0,
        splitKey: "",
        seen: new Set(),
        last: new Map(),
        lanes: new Map(),
        arms: { candidate: zero(), control: zero() },
        moved: { candidate: 0, control: 0 },
      };
      this.models.set(model, m);
    }
    if (m.splitKey !== splitKey || m.split === 0) {
      m.split++;
      m.splitKey = splitKey;
      m.seen.clear();
    }
    return m;
  }

  /** Counts one request: a unit of its own (`request`), a keyed unit's, or a keyless one. */
  private count(m: ModelCounts, pick: UnitPick, unit: AssignmentUnit, key: string | null): void {
    let lane = m.lanes.get(pick.lane);
    if (!lane) {
      lane = { ...zero(), arm: pick.arm };
      m.lanes.set(pick.lane, lane);
    }
    lane.arm = pick.arm;
    const rows: ArmCount[] = pick.arm ? [lane, m.arms[pick.arm]] : [lane];
    const keyless = unit !== "request" && key === null;
    let fresh = unit === "request";
    if (key !== null && pick.arm) {
      const seen = `${pick.arm}\u0000${key}`;
      fresh = !m.seen.has(seen);
      m.seen.add(seen);
      const before = m.last.get(key);
      if (before !== undefined && before !== pick.arm) m.moved[pick.arm]++;
      m.last.set(key, pick.arm);
    } else if (key !== null) {
      fresh = !m.seen.has(key);
      m.seen.add(key);
    }
    for (const r of rows) {
      r.requests++;
      if (keyless) r.keyless++;
      else if (fresh) r.units++;
    }
  }

  /** Counts one forwarded request of `model` under its release and arm labels. */
  label(model: string, release: string, arm: ArmLabel): void {
    let m = this.releases.get(model);
    if (!m) {
      m = new Map();
      this.releases.set(model, m);
    }
    let c = m.get(release);
    if (!c) {
      c = { candidate: 0, control: 0, unknown: 0 };
      m.set(release, c);
    }
    c[arm]++;
  }

  /** What the router counted for `model` (zeros before its first request). */
  counts(model: string): RouterCounts {
    const m = this.models.get(model);
    const copy = (c: ArmCount): ArmCount => ({ ...c });
    return {
      model,
      unit: this.unit(model),
      split: m?.split ?? 0,
      lanes: Object.fromEntries(
        [...(m?.lanes ?? new Map()).entries()].map(([k, v]) => [k, { ...v }]),
      ),
      arms: {
        candidate: copy(m?.arms.candidate ?? zero()),
        control: copy(m?.arms.control ?? zero()),
      },
      moved: { ...(m?.moved ?? { candidate: 0, control: 0 }) },
      releases: Object.fromEntries(
        [...(this.releases.get(model) ?? new Map<string, ReleaseCount>()).entries()].map(
          ([k, v]) => [k, { ...v }],
        ),
      ),
    };
  }
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
  const router = new UnitRouter(o.lanes, o.assignment, o.minBatch);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const fail = (res: http.ServerResponse, status: number, code: string, message: string) => {
    if (res.headersSent) return res.destroy();
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { code, message } }));
  };
  const server = http.createServer((req, res) => {
    const counts = /^\/counts\/([^/?]+)$/.exec(req.url ?? "");
    if (counts && req.method === "GET") {
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify(router.counts(decodeURIComponent(counts[1]!))));
    }
    const m = /^\/route\/([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(req.url ?? "");
    if (!m) return fail(res, 404, "not_found", "[router] route requests as /route/<model>/<path>");
    const model = decodeURIComponent(m[1]!);
    const header = router.header(router.unit(model));
    const raw = header ? req.headers[header] : undefined;
    const key = (Array.isArray(raw) ? raw[0] : raw)?.trim() || null;
    const pick = router.next(model, key);
    if (!pick) return fail(res, 503, "no_lane", `[router] no lane of ${model} takes traffic`);
    const tags: Record<string, string> = { "baton-lane": pick.lane };
    if (pick.batch)
      tags["baton-batch"] = `${pick.batch.plan}/${pick.batch.index}/${pick.batch.size}`;
    const release = o.release?.(model) ?? "none";
    const arm: ArmLabel = pick.arm ?? "unknown";
    tags[ARM_HEADER] = arm;
    tags[RELEASE_HEADER] = release;
    if (header) tags["baton-unit"] = key === null ? "none" : pick.by;
    for (const [k, v] of Object.entries(tags)) res.setHeader(k, v);
    const base = o.upstream(pick.lane);
    if (!base)
      return fail(res, 502, "lane_unreachable", `[router] lane ${pick.lane} has no endpoint`);
    const target = new URL(`${m[2] ?? "/"}${m[3] ?? ""}`, base);
    // The labels are the router's: a client's own baton-release or baton-arm is replaced.
    const labels = { [RELEASE_HEADER]: release, [ARM_HEADER]: arm };
    router.label(model, release, arm);
    const up = http.request(
      target,
      { method: req.method, headers: { ...req.headers, ...labels, host: target.host }, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, { ...answer.headers, ...tags });
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
    counts: (model) => router.counts(model),
    async close() {
      agent.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
