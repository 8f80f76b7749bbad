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
 * Shadow traffic (docs/control-plane.md "The router as a shadow router"): with `shadow`, while a
 * model has a shadow phase in force (`shadow.caps`), the router checks a request's authorization
 * before any copy is made, asks {@link ShadowMirror} whether to mirror it (a shadow-safe lane
 * serving the candidate at weight 0, within the share and rate caps), forwards it to the lane
 * routed as usual, and only once that lane answered sends the copy (`baton-shadow: 1`,
 * `baton-arm: candidate`) to the shadow lane and discards its answer. The user only ever gets
 * the routed lane's answer. `GET /counts/<model>` then adds `shadow`: what was mirrored and
 * skipped, and the outcome (errors, latency) of the candidate on the mirrored requests beside
 * the routed lane's on the same requests; `GET /metrics` exposes those outcomes per lane as
 * `baton_shadow_*` series (shadow-metrics.ts) for a metrics source such as Prometheus.
 *
 * No lane can take traffic: 503 `no_lane`. A lane's endpoint that does not answer: 502
 * `lane_unreachable` with `baton-lane`; a request without a body that met a kept-alive
 * connection the lane closed as it was reused is sent once more on a new connection first.
 * Node only (node:http); loopback by default.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { AssignmentUnit } from "../domain/gate/analysis.ts";
import type { LaneState } from "./model.ts";
import { ObservedRelease } from "./observed-release.ts";
import { type Arm, route, stickyLane } from "./router.ts";
import { type ShadowSeries, shadowMetricsLines } from "./shadow-metrics.ts";
import { type ShadowCaps, type ShadowCounts, ShadowMirror, shadowLanes } from "./shadow-mirror.ts";
import { LATENCY_BUCKETS_MS } from "./traffic.ts";

/** Header marking a mirrored request on its way to a shadow lane. */
export const SHADOW_HEADER = "baton-shadow";

/** How the router mirrors requests to shadow lanes (absent: it mirrors nothing). */
export interface ShadowOptions {
  /** The model's shadow phase in force now (the manifest wave's `shadow`), or null: none. */
  caps: (model: string) => ShadowCaps | null;
  /** The lane's recipe declares `shadow_safe`. */
  safe: (model: string, lane: string) => boolean;
  /** The lane serves the candidate image now. */
  candidate: (model: string, lane: string) => boolean;
  /**
   * The request's authorization, checked before any copy is made: false (or a throw) and the
   * request is not mirrored (it is still routed, and its lane answers it as it would).
   */
  authorize: (headers: http.IncomingHttpHeaders) => boolean | Promise<boolean>;
  /** Clock of the rate cap, epoch ms (default Date.now). */
  now?: () => number;
  /** Largest request body copied (default 1 MiB); a larger one is not sent (`too_large`). */
  maxBodyBytes?: number;
}

/** Outcomes of one side of the mirrored requests: answers, errors (5xx, none) and latency. */
export interface ShadowOutcome {
  requests: number;
  /** Answers with status ≥ 500, or no answer at all. */
  errors: number;
  /** Cumulative counts per bound of LATENCY_BUCKETS_MS, then +Inf. */
  buckets: number[];
}

/** `shadow` in `GET /counts/<model>`. */
export interface RouterShadowCounts extends ShadowCounts {
  /** Copies sent to a shadow lane (admitted ones less `too_large`). */
  sent: number;
  /** Admitted requests whose body was over the copy limit (not sent). */
  too_large: number;
  /** The shadow lanes' answers to the copies (discarded; only counted). */
  candidate: ShadowOutcome;
  /** The routed lanes' answers to the same requests. */
  baseline: ShadowOutcome;
}

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
  /** Mirroring to shadow lanes; absent: none. */
  shadow?: ShadowOptions;
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
  /** Shadow traffic, only when the router mirrors (`shadow` option). */
  shadow?: RouterShadowCounts;
}

/** Requests of one release label, per arm label. */
export type ReleaseCount = Record<ArmLabel, number>;

/** The `baton-arm` value: the arm, or `unknown` when the router is not told arms. */
export type ArmLabel = Arm | "unknown";

/** Header naming the release a forwarded request is served under (`none`: no release yet). */
export const RELEASE_HEADER = "baton-release";
/** Header naming the arm of a forwarded request: `candidate`, `control` or `unknown`. */
export const ARM_HEADER = "baton-arm";

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

const outcome = (): ShadowOutcome => ({
  requests: 0,
  errors: 0,
  buckets: new Array(LATENCY_BUCKETS_MS.length + 1).fill(0),
});

/** Counts one answer (status 0: none) that took `ms`: a unit, a request, maybe an error. */
function observe(o: ShadowSeries, status: number, ms: number): void {
  o.units++;
  o.requests++;
  if (status === 0 || status >= 500) o.errors++;
  o.latencySumMs += ms;
  LATENCY_BUCKETS_MS.forEach((le, b) => {
    if (ms <= le) o.buckets[b]!++;
  });
  o.buckets[LATENCY_BUCKETS_MS.length]!++;
}

/** One side's outcomes summed over its lanes (`GET /counts/<model>`). */
function sumOf(rows: Iterable<ShadowSeries>, arm: Arm): ShadowOutcome {
  const o = outcome();
  for (const r of rows) {
    if (r.labels.arm !== arm) continue;
    o.requests += r.requests;
    o.errors += r.errors;
    r.buckets.forEach((v, b) => {
      o.buckets[b]! += v;
    });
  }
  return o;
}

interface ShadowTally {
  sent: number;
  too_large: number;
  /** Per `<arm>\0<lane>`: the copies' answers (candidate) and the routed lanes' (control). */
  series: Map<string, ShadowSeries>;
}

/** Starts the proxy; resolves once it listens. */
/** A connection the other side closed or reset: what a kept-alive socket's reuse can meet. */
function isReset(err: NodeJS.ErrnoException): boolean {
  return err.code === "ECONNRESET" || err.code === "EPIPE" || err.message === "socket hang up";
}

export async function startRouterProxy(o: RouterProxyOptions): Promise<RouterProxyHandle> {
  const router = new UnitRouter(o.lanes, o.assignment, o.minBatch);
  const mirror = o.shadow ? new ShadowMirror(o.shadow.now) : null;
  const tallies = new Map<string, ShadowTally>();
  const tally = (model: string): ShadowTally => {
    let t = tallies.get(model);
    if (!t) {
      t = { sent: 0, too_large: 0, series: new Map() };
      tallies.set(model, t);
    }
    return t;
  };
  /** The series of `lane`'s answers in `arm` on mirrored requests of `model`, opened at 0. */
  const series = (model: string, arm: Arm, lane: string): ShadowSeries => {
    const rows = tally(model).series;
    const key = `${arm}\u0000${lane}`;
    let r = rows.get(key);
    if (!r) {
      r = {
        labels: { model, lane, arm },
        units: 0,
        requests: 0,
        errors: 0,
        buckets: new Array(LATENCY_BUCKETS_MS.length + 1).fill(0),
        latencySumMs: 0,
      };
      rows.set(key, r);
    }
    return r;
  };
  /** Prometheus text of every model's shadow series (`GET /metrics`). */
  const metricsText = (): string => {
    const rows = [...tallies.values()].flatMap((t) => [...t.series.values()]);
    return `${shadowMetricsLines(rows, LATENCY_BUCKETS_MS).join("\n")}\n`;
  };
  const countsOf = (model: string): RouterCounts => {
    const c = router.counts(model);
    if (!mirror) return c;
    const t = tally(model);
    return {
      ...c,
      shadow: {
        ...mirror.counts(model),
        sent: t.sent,
        too_large: t.too_large,
        candidate: sumOf(t.series.values(), "candidate"),
        baseline: sumOf(t.series.values(), "control"),
      },
    };
  };
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const fail = (res: http.ServerResponse, status: number, code: string, message: string) => {
    if (res.headersSent) return res.destroy();
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { code, message } }));
  };
  /** The shadow lane a request of `model` is copied to, or null; the authorization first. */
  const shadowLane = async (model: string, req: http.IncomingMessage): Promise<string | null> => {
    const s = o.shadow;
    const caps = s?.caps(model);
    if (!s || !mirror || !caps) return null;
    let authorized = false;
    try {
      authorized = (await s.authorize(req.headers)) === true;
    } catch {
      authorized = false;
    }
    const all = o.lanes(model);
    // Every lane's series opens at 0 while a phase is in force, so a rate sees its start.
    for (const l of all) series(model, "control", l.id);
    const lanes = shadowLanes(
      all,
      (l) => s.safe(model, l),
      (l) => s.candidate(model, l),
    );
    for (const l of lanes) series(model, "candidate", l);
    const d = mirror.decide(model, caps, authorized, lanes);
    return "lane" in d ? d.lane : null;
  };
  /** Sends the copy of a mirrored request to `lane` and discards the answer; counts both sides. */
  const sendCopy = (
    model: string,
    lane: string,
    req: http.IncomingMessage,
    path: string,
    body: Buffer,
    baseline: { lane: string; status: number; ms: number },
    labels: Record<string, string>,
  ) => {
    const t = tally(model);
    const base = o.upstream(lane);
    const started = performance.now();
    // Both sides at once, so the arms' counts stay equal at every scrape.
    const done = (status: number) => {
      t.sent++;
      observe(series(model, "control", baseline.lane), baseline.status, baseline.ms);
      observe(series(model, "candidate", lane), status, performance.now() - started);
    };
    if (!base) return done(0);
    const target = new URL(path, base);
    const headers = { ...req.headers, ...labels, [SHADOW_HEADER]: "1", host: target.host };
    delete headers["content-length"];
    delete headers["transfer-encoding"];
    const copy = http.request(
      target,
      {
        method: req.method,
        headers: { ...headers, "content-length": String(body.length) },
        agent,
      },
      (answer) => {
        // Discarded: read to the end only to free the socket and time the answer.
        answer.resume();
        answer.on("end", () => done(answer.statusCode ?? 0));
        answer.on("error", () => done(0));
      },
    );
    copy.setTimeout(10_000, () => copy.destroy(new Error("timed out")));
    copy.on("error", () => done(0));
    copy.end(body);
  };
  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.url === "/metrics" && req.method === "GET") {
      req.resume();
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
      return res.end(metricsText());
    }
    const counts = /^\/counts\/([^/?]+)$/.exec(req.url ?? "");
    if (counts && req.method === "GET") {
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify(countsOf(decodeURIComponent(counts[1]!))));
    }
    const m = /^\/route\/([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(req.url ?? "");
    if (!m) return fail(res, 404, "not_found", "[router] route requests as /route/<model>/<path>");
    const model = decodeURIComponent(m[1]!);
    const header = router.header(router.unit(model));
    const raw = header ? req.headers[header] : undefined;
    const key = (Array.isArray(raw) ? raw[0] : raw)?.trim() || null;
    const pick = router.next(model, key);
    if (!pick) return fail(res, 503, "no_lane", `[router] no lane of ${model} takes traffic`);
    // Decided before the request is forwarded, so a copy can be taken of its body as it flows.
    const shadow = await shadowLane(model, req);
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
    const path = `${m[2] ?? "/"}${m[3] ?? ""}`;
    const target = new URL(path, base);
    // The labels are the router's: a client's own baton-release or baton-arm is replaced.
    const labels = { [RELEASE_HEADER]: release, [ARM_HEADER]: arm };
    router.label(model, release, arm);
    // A mirrored request: its body is kept (up to the limit) and the copy sent once both the
    // body has been read and the routed lane has answered.
    let copy: {
      chunks: Buffer[];
      size: number;
      read: boolean;
      answer?: { status: number; ms: number };
    } | null = shadow ? { chunks: [], size: 0, read: false } : null;
    const limit = o.shadow?.maxBodyBytes ?? 1024 * 1024;
    const started = performance.now();
    const maybeSend = () => {
      if (!shadow || !copy?.read || !copy.answer) return;
      const c = copy;
      copy = null;
      if (c.size > limit) {
        tally(model).too_large++;
        return;
      }
      sendCopy(
        model,
        shadow,
        req,
        path,
        Buffer.concat(c.chunks),
        { lane: pick.lane, ...c.answer! },
        {
          [RELEASE_HEADER]: release,
          [ARM_HEADER]: "candidate",
        },
      );
    };
    if (copy) {
      req.on("data", (chunk: Buffer) => {
        if (!copy) return;
        copy.size += chunk.length;
        if (copy.size <= limit) copy.chunks.push(chunk);
      });
      req.on("end", () => {
        if (copy) copy.read = true;
        maybeSend();
      });
    }
    const answered = (status: number) => {
      if (copy && !copy.answer) copy.answer = { status, ms: performance.now() - started };
      maybeSend();
    };
    // A request without a body that fails on a kept-alive connection the lane closed as it
    // was reused (the lane's idle timeout racing the reuse) is sent once more on a new one, as
    // Node's http docs advise (`request.reusedSocket`); a lane that does not answer a new
    // connection either is unreachable (502).
    const bodiless =
      req.headers["content-length"] === undefined && req.headers["transfer-encoding"] === undefined;
    const send = (retried: boolean) => {
      const up = http.request(
        target,
        { method: req.method, headers: { ...req.headers, ...labels, host: target.host }, agent },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, { ...answer.headers, ...tags });
          answer.on("end", () => answered(answer.statusCode ?? 0));
          answer.pipe(res);
        },
      );
      up.setTimeout(10_000, () => up.destroy(new Error("timed out")));
      up.on("error", (err: NodeJS.ErrnoException) => {
        if (!retried && bodiless && up.reusedSocket && !res.headersSent && isReset(err))
          return send(true);
        answered(0);
        fail(res, 502, "lane_unreachable", `[router] lane ${pick.lane}: ${err.message}`);
      });
      if (bodiless) up.end();
      else req.pipe(up);
    };
    if (bodiless) req.resume();
    send(false);
  };
  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) =>
      fail(
        res,
        500,
        "router_error",
        `[router] ${err instanceof Error ? err.message : String(err)}`,
      ),
    );
  });
  const info = await new Promise<AddressInfo>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port ?? 0, o.host ?? "127.0.0.1", () =>
      resolve(server.address() as AddressInfo),
    );
  });
  return {
    url: `http://${o.host ?? "127.0.0.1"}:${info.port}`,
    counts: countsOf,
    async close() {
      agent.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
