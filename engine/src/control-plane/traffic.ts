/**
 * The router as a traffic generator (docs/gate.md "Where the numbers come from"): for the demo
 * and the tests it draws assignment units, routes each stickily to a lane by a hash of its id
 * over the model's current weights (so a unit stays on one lane, hence one arm, for as long as
 * the weights hold), and records per-lane, per-image outcomes from error rates and latency
 * distributions that can be set per image. It exposes the counters and a latency histogram in
 * the Prometheus text format (`GET /metrics`), so the Prometheus adapter reads it like any
 * service, and the embedded metrics source reads the same counters in process; a shadow
 * phase's mirrored requests as `baton_shadow_*` (shadow-metrics.ts).
 *
 * Release labels (docs/control-plane.md "Release labels"): with `release`, every request is
 * labelled with the release the model's traffic is under, counted per label where the router
 * forwards it and where the lane serves it (the lane echoes the label), both exposed as counters
 * and read by the embedded metrics source (`releaseCounts`).
 *
 * Latency is log-normal: exp(N(log median, σ²)) ms. Seeded, so a run can be replayed.
 */
import type { ControlPlaneCore } from "./core.ts";
import { ObservedRelease } from "./observed-release.ts";
import { type Draws, seededNormal, seededUniform } from "./random.ts";
import { unitPosition } from "./router.ts";
import { escapeLabel, shadowMetricsLines } from "./shadow-metrics.ts";
import { type ShadowCaps, type ShadowCounts, ShadowMirror, shadowLanes } from "./shadow-mirror.ts";

/** A shadow phase for the generator: its caps and the lanes declared shadow-safe. */
export interface GeneratorShadow {
  caps: ShadowCaps;
  safe: ReadonlySet<string>;
}

/** Outcome model of one image. */
export interface ImageProfile {
  /** Share of requests that fail, 0..1. */
  errorRate: number;
  /** Median latency, ms (> 0). */
  latencyMedianMs: number;
  /** σ of log latency (≥ 0). */
  latencySigma: number;
  /** ms added to every request's latency (a slower candidate, e.g. 400); default 0. */
  latencyAddMs?: number;
}

/** Default outcome model: 1% errors, 80 ms median latency. */
export const DEFAULT_PROFILE: ImageProfile = {
  errorRate: 0.01,
  latencyMedianMs: 80,
  latencySigma: 0.6,
};

/**
 * Upper bounds (ms) of the latency histogram's buckets; `+Inf` is implied. Finer between 100
 * ms and 1 s, where the tail of the default profile lies, so that a quantile metric (a p99 at
 * the buckets' resolution) can tell a 400 ms regression from the baseline.
 */
export const LATENCY_BUCKETS_MS = [
  5, 10, 25, 50, 100, 150, 200, 250, 300, 400, 500, 600, 800, 1000, 2500, 5000,
] as const;

/** Cumulative counts of one lane and image since the generator started. */
export interface ArmCounters {
  lane: string;
  image: string;
  units: number;
  requests: number;
  errors: number;
  /** Per bound of LATENCY_BUCKETS_MS, then +Inf: cumulative counts. */
  buckets: number[];
  latencySumMs: number;
}

export interface TrafficOptions {
  model: string;
  /**
   * The release the model's traffic is under now (`ObservedRelease.of`, router-proxy.ts): the
   * router labels every request with it (`baton-release`; `none` before any release) and the
   * lanes echo the label in their metrics. Default: read from the control plane's history
   * (`ObservedRelease`): the release of the latest change to the model or its lanes.
   */
  release?: (model: string) => string | null;
  /** Requests each unit makes (1 for `request` assignment). Default 1. */
  requestsPerUnit?: number;
  seed?: number;
}

export { unitPosition };

/** See the module comment. */
export class TrafficGenerator {
  private readonly laneImages = new Map<string, string>();
  private readonly profiles = new Map<string, ImageProfile>();
  private readonly counters = new Map<string, ArmCounters>();
  private candidate: string | null = null;
  private readonly routerWeights = new Map<string, number>();
  private nextUnit = 0;
  private readonly uniform: Draws;
  private readonly normal: Draws;
  private timer: NodeJS.Timeout | null = null;
  /** Requests the router forwarded per release label. */
  private readonly routerReleases = new Map<string, number>();
  /** Requests each lane counted per release label it echoed (`""`: it dropped the label). */
  private readonly laneReleases = new Map<string, Map<string, number>>();
  /** Mutant lanes, for tests: they serve but drop the release label from their metrics. */
  private readonly dropsLabel = new Set<string>();

  private readonly release: (model: string) => string | null;
  private shadow: GeneratorShadow | null = null;
  private readonly mirror = new ShadowMirror();
  /** Outcomes of mirrored requests: `<lane>\0<image>` of the shadow lane or the routed lane. */
  private readonly shadowCounters = new Map<string, ArmCounters>();

  constructor(
    private readonly core: ControlPlaneCore,
    private readonly o: TrafficOptions,
  ) {
    const seed = o.seed ?? 1;
    const observed = new ObservedRelease(
      (q) => core.history(q),
      (m) => core.lanes(m),
    );
    this.release = o.release ?? ((m) => observed.of(m));
    this.uniform = seededUniform(seed);
    this.normal = seededNormal(seed + 1);
  }

  /**
   * The image lane `lane` serves now; opens its counters at 0 (so rates see the start), and
   * its shadow series too while a shadow phase is in force.
   */
  setLaneImage(lane: string, image: string): void {
    this.laneImages.set(lane, image);
    this.arm(lane, image);
    if (this.shadow) this.arm(lane, image, this.shadowCounters);
  }

  /** The image labelled `arm="candidate"`; every other image is `control`. */
  setCandidate(image: string | null): void {
    this.candidate = image;
  }

  /**
   * A router fault, for tests: the router sends lane `lane` the share `weight` (0–100) of the
   * model's traffic whatever weight the control plane holds (a stale or partial config push:
   * the control plane reads back the planned split, the router serves another). `null` heals.
   */
  setRouterFault(lane: string, weight: number | null): void {
    if (weight === null) this.routerWeights.delete(lane);
    else this.routerWeights.set(lane, weight);
  }

  /**
   * A mutant lane, for tests: lane `lane` serves as before but its metrics drop the
   * `baton-release` label it was sent (counted as unlabelled), so the lanes' count for a release
   * falls short of the router's. `false` heals.
   */
  setLaneDropsLabel(lane: string, drops: boolean): void {
    if (drops) this.dropsLabel.add(lane);
    else this.dropsLabel.delete(lane);
  }

  /**
   * Requests labelled `release`: as the router counted them when it forwarded them, and as the
   * lanes counted them by the label they echoed. Equal unless a lane lost or changed labels.
   */
  releaseCounts(release: string): { router: number; lanes: number } {
    let lanes = 0;
    for (const m of this.laneReleases.values()) lanes += m.get(release) ?? 0;
    return { router: this.routerReleases.get(release) ?? 0, lanes };
  }

  /**
   * The shadow phase in force (docs/control-plane.md "The router as a shadow router"), or null:
   * while set, requests are mirrored by the {@link ShadowMirror} rule to the shadow-safe lanes
   * serving the candidate at weight 0; each copy's outcome is drawn from the candidate's
   * profile and counted apart ({@link shadowSnapshot}) beside the routed lane's outcome of the
   * same request. Users' counters are unchanged: a copy's answer is discarded.
   */
  setShadow(shadow: GeneratorShadow | null): void {
    this.shadow = shadow;
    // Every lane's shadow series opens at 0, so a rate over the phase sees its start.
    if (shadow)
      for (const [lane, image] of this.laneImages) this.arm(lane, image, this.shadowCounters);
  }

  /** What the mirror counted: requests seen, mirrored, skipped, per lane. */
  shadowCounts(): ShadowCounts {
    return this.mirror.counts(this.o.model);
  }

  /**
   * Outcomes of the mirrored requests: rows of the shadow lanes (candidate image) and of the
   * lanes that answered the same requests for the users (their image).
   */
  shadowSnapshot(): ArmCounters[] {
    return [...this.shadowCounters.values()].map((c) => ({ ...c, buckets: [...c.buckets] }));
  }

  /** Outcome model of `image` (DEFAULT_PROFILE unless set). */
  setProfile(image: string, profile: Partial<ImageProfile>): void {
    this.profiles.set(image, { ...(this.profiles.get(image) ?? DEFAULT_PROFILE), ...profile });
  }

  private arm(lane: string, image: string, rows = this.counters): ArmCounters {
    const key = `${lane}\u0000${image}`;
    let c = rows.get(key);
    if (!c) {
      c = {
        lane,
        image,
        units: 0,
        requests: 0,
        errors: 0,
        buckets: new Array(LATENCY_BUCKETS_MS.length + 1).fill(0),
        latencySumMs: 0,
      };
      rows.set(key, c);
    }
    return c;
  }

  /**
   * Sends `units` new units through the model's current weights. Units on a lane with no
   * known image, or when no lane takes traffic, are dropped (counted nowhere).
   */
  send(units: number): void {
    const lanes = this.core
      .lanes(this.o.model)
      .map((l) => {
        const forced = this.routerWeights.get(l.id);
        return forced === undefined ? l : { ...l, weight: forced };
      })
      .filter((l) => !l.excluded && l.weight > 0)
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    const total = lanes.reduce((s, l) => s + l.weight, 0);
    if (total === 0) return;
    const perUnit = this.o.requestsPerUnit ?? 1;
    const label = this.release(this.o.model) ?? "none";
    for (let i = 0; i < units; i++) {
      const x = unitPosition(`${this.o.model}/${this.nextUnit++}`) * total;
      let acc = 0;
      let lane = lanes[lanes.length - 1]!;
      for (const l of lanes) {
        acc += l.weight;
        if (x < acc) {
          lane = l;
          break;
        }
      }
      const image = this.laneImages.get(lane.id);
      if (!image) continue;
      const c = this.arm(lane.id, image);
      c.units++;
      // The router labels what it forwards; the lane echoes the label it received.
      this.routerReleases.set(label, (this.routerReleases.get(label) ?? 0) + perUnit);
      let seen = this.laneReleases.get(lane.id);
      if (!seen) {
        seen = new Map();
        this.laneReleases.set(lane.id, seen);
      }
      const echoed = this.dropsLabel.has(lane.id) ? "" : label;
      seen.set(echoed, (seen.get(echoed) ?? 0) + perUnit);
      for (let r = 0; r < perUnit; r++) {
        const answered = this.serve(c, image);
        const copy = this.mirrorTo();
        if (copy === null) continue;
        // The pair: the routed lane's outcome of this request, and the shadow lane's of its copy.
        const base = this.arm(lane.id, image, this.shadowCounters);
        const shadow = this.arm(copy, this.laneImages.get(copy) ?? "", this.shadowCounters);
        base.units++;
        shadow.units++;
        this.count(base, answered.error, answered.ms);
        this.serve(shadow, shadow.image);
      }
    }
  }

  /** The shadow lane one request is copied to, or null (no shadow phase, or a rule refused). */
  private mirrorTo(): string | null {
    const s = this.shadow;
    if (!s || !this.candidate) return null;
    const lanes = shadowLanes(
      this.core.lanes(this.o.model),
      (l) => s.safe.has(l),
      (l) => this.laneImages.get(l) === this.candidate,
    );
    // The generator's requests are its own: every one is authorized.
    const d = this.mirror.decide(this.o.model, s.caps, true, lanes);
    return "lane" in d ? d.lane : null;
  }

  /** Draws one request's outcome from `image`'s profile into `c`. */
  private serve(c: ArmCounters, image: string): { error: boolean; ms: number } {
    const p = this.profiles.get(image) ?? DEFAULT_PROFILE;
    const error = this.uniform() < p.errorRate;
    const ms =
      (p.latencyAddMs ?? 0) +
      Math.exp(Math.log(p.latencyMedianMs) + p.latencySigma * this.normal());
    this.count(c, error, ms);
    return { error, ms };
  }

  private count(c: ArmCounters, error: boolean, ms: number): void {
    c.requests++;
    if (error) c.errors++;
    c.latencySumMs += ms;
    for (let b = 0; b < LATENCY_BUCKETS_MS.length; b++) {
      if (ms <= LATENCY_BUCKETS_MS[b]!) c.buckets[b]!++;
    }
    c.buckets[LATENCY_BUCKETS_MS.length]!++;
  }

  /** Sends `unitsPerTick` units every `tickMs` until `stop()`. The timer does not hold the process. */
  start(unitsPerTick: number, tickMs = 100): void {
    this.stop();
    this.timer = setInterval(() => this.send(unitsPerTick), tickMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** A copy of every lane's and image's counters. */
  snapshot(): ArmCounters[] {
    return [...this.counters.values()].map((c) => ({ ...c, buckets: [...c.buckets] }));
  }

  /** The counters in the Prometheus text exposition format (version 0.0.4). */
  metricsText(): string {
    const rows = this.snapshot();
    const labels = (c: ArmCounters) =>
      `model="${escapeLabel(this.o.model)}",lane="${escapeLabel(c.lane)}",image="${escapeLabel(c.image)}",arm="${c.image === this.candidate ? "candidate" : "control"}"`;
    const out: string[] = [];
    const counter = (name: string, help: string, v: (c: ArmCounters) => number) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      for (const c of rows) out.push(`${name}{${labels(c)}} ${v(c)}`);
    };
    counter(
      "baton_arm_units_total",
      "Assignment units routed, by the lane and image that served them.",
      (c) => c.units,
    );
    counter("baton_arm_requests_total", "Requests served, by lane and image.", (c) => c.requests);
    counter("baton_arm_errors_total", "Requests that failed, by lane and image.", (c) => c.errors);
    out.push(
      "# HELP baton_arm_latency_ms Request latency in ms, by lane and image.",
      "# TYPE baton_arm_latency_ms histogram",
    );
    for (const c of rows) {
      LATENCY_BUCKETS_MS.forEach((le, b) => {
        out.push(`baton_arm_latency_ms_bucket{${labels(c)},le="${le}"} ${c.buckets[b]}`);
      });
      out.push(`baton_arm_latency_ms_bucket{${labels(c)},le="+Inf"} ${c.requests}`);
      out.push(`baton_arm_latency_ms_sum{${labels(c)}} ${c.latencySumMs.toFixed(3)}`);
      out.push(`baton_arm_latency_ms_count{${labels(c)}} ${c.requests}`);
    }
    out.push(
      '# HELP baton_release_requests_total Requests served, by the lane and the release label it echoed (release="": the lane dropped it).',
      "# TYPE baton_release_requests_total counter",
    );
    for (const [lane, seen] of this.laneReleases)
      for (const [release, n] of seen)
        out.push(
          `baton_release_requests_total{model="${escapeLabel(this.o.model)}",lane="${escapeLabel(lane)}",release="${escapeLabel(release)}"} ${n}`,
        );
    out.push(
      "# HELP baton_router_release_requests_total Requests the router forwarded, by the release label it sent.",
      "# TYPE baton_router_release_requests_total counter",
    );
    for (const [release, n] of this.routerReleases)
      out.push(
        `baton_router_release_requests_total{model="${escapeLabel(this.o.model)}",release="${escapeLabel(release)}"} ${n}`,
      );
    // The shadow phase's pairs: the shadow lanes' answers to the copies (the candidate's image)
    // and the routed lanes' answers to the same requests, labelled as the users' traffic above.
    out.push(
      ...shadowMetricsLines(
        this.shadowSnapshot().map((c) => ({
          labels: {
            model: this.o.model,
            lane: c.lane,
            image: c.image,
            arm: c.image === this.candidate ? "candidate" : "control",
          },
          units: c.units,
          requests: c.requests,
          errors: c.errors,
          buckets: c.buckets,
          latencySumMs: c.latencySumMs,
        })),
        LATENCY_BUCKETS_MS,
      ),
    );
    return `${out.join("\n")}\n`;
  }
}
