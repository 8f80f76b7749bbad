/**
 * Drift detection on the serverless entries (docs/drift.md "Serverless"), on the real runtimes
 * and a real Postgres: the Workers bundle in workerd (Cron Trigger `scheduled` events) and the
 * Lambda handler (EventBridge "Scheduled Event"s). No engine process lives between events, so
 * the interval is kept by the store's `drift` lease (an observing event takes it for one
 * interval less the slack and never gives it back) and the last observation and its counters
 * are kept in the store, where a later event's `GET /metrics` reads them.
 *
 * After a succeeded release, a lane's weight is changed by hand at the control plane. "The
 * interval has passed" is arranged by ending the lease in the database (the tests run with a
 * 10-minute interval, so nothing depends on how fast the machine is): the next scheduled
 * event records the drift in the release's history (desired vs observed) and `/metrics`
 * (promtool-checked) exports it; events within the interval do not observe. A control plane
 * that refuses, hangs or is gone during the event: the event ends normally, the failure is
 * counted in the store, the read is made once per interval, the last observation stays.
 */
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Miniflare } from "miniflare";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { handler } from "../../engine/src/entries/lambda.ts";
import { eventLeaseMs } from "../../engine/src/service/drift.ts";
import { type LanesServer, startLanesServer } from "../support/lanes-server.ts";
import {
  buildWorkerBundle,
  cronTrigger,
  driveRelease,
  MODEL,
  type Send,
  type ServerlessWorld,
  startServerlessWorld,
  startWorkerd,
  type Workerd,
  workerdRuntime,
} from "../support/serverless-world.ts";

const PG = process.env.BATON_TEST_DATABASE_URL;
/** The drift interval the engines run with: 10 minutes, far longer than any test step. */
const INTERVAL = 600_000;

/** One query on the world's database (a fresh connection, closed after). */
async function sql(url: string | undefined, text: string): Promise<Record<string, unknown>[]> {
  if (!url) throw new Error("[test] the world has no DATABASE_URL");
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text)).rows as Record<string, unknown>[];
  } finally {
    await c.end();
  }
}

/** How the tests reach one platform's engine. */
interface Platform {
  send: Send;
  /** One scheduled event; throws when it ends otherwise than normally. */
  tick(): Promise<void>;
  /** One scheduled event with the control plane at `url` (the rest of the settings as is). */
  tickWith(url: string): Promise<void>;
}

/** The scenario, shared by both platforms; `p()` is ready once their `beforeAll` ran. */
function driftScenario(name: string, w: () => ServerlessWorld, p: () => Platform): void {
  const auth = () => ({ authorization: `Bearer ${w().operatorToken}` });
  /** "The interval has passed": the lease's end moved into the past. */
  const intervalPasses = () =>
    sql(w().env.DATABASE_URL, "UPDATE leases SET until = 0 WHERE name = 'drift'");
  const leaseUntil = async () =>
    Number(
      (await sql(w().env.DATABASE_URL, "SELECT until FROM leases WHERE name = 'drift'"))[0]?.until,
    );
  const scrape = async (): Promise<string[]> => {
    const r = await p().send("GET", "/metrics", undefined, auth());
    expect(r.status).toBe(200);
    execFileSync("promtool", ["check", "metrics"], { input: r.body, timeout: 30_000 });
    return r.body.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
  };
  const metric = async (line: string): Promise<number | null> => {
    const found = (await scrape()).find((l) => l.startsWith(`${line} `));
    return found === undefined ? null : Number(found.slice(line.length + 1));
  };
  const driftEntries = async (id: string) => {
    const r = await p().send("GET", `/v1/releases/${id}/history?limit=500`, undefined, auth());
    expect(r.status).toBe(200);
    return (
      JSON.parse(r.body) as { entries: { kind: string; data: unknown; message: string }[] }
    ).entries.filter((e) => e.kind === "drift" || e.kind === "drift_cleared");
  };
  let releaseId = "";

  it(`${name}: a lane changed by hand after a succeeded release is recorded at the next scheduled event past the interval, exported on /metrics; events within the interval do not observe`, async () => {
    const r = await driveRelease(w(), p().send, () => p().tick());
    expect(r.state).toBe("succeeded");
    releaseId = r.id;
    const cp = w().cp.core;
    const lanes = cp.lanes(MODEL);
    expect(lanes.map((l) => [l.id, l.weight])).toEqual([
      ["sl-0", 50],
      ["sl-1", 50],
    ]);
    // By hand, outside any release: 40 / 60.
    cp.seed(lanes.map((l) => ({ ...l, weight: l.id === "sl-0" ? 40 : 60 })));
    expect(cp.lanes(MODEL).map((l) => l.weight)).toEqual([40, 60]);

    await intervalPasses();
    const t0 = Date.now();
    await p().tick();
    const t1 = Date.now();

    // History of the release that left the lanes: desired vs observed per lane.
    const entries = await driftEntries(r.id);
    expect(entries.map((e) => e.kind)).toEqual(["drift"]);
    const data = entries[0]?.data as {
      model: string;
      lanes: { id: string; fields: string[]; desired: unknown; observed: unknown }[];
    };
    expect(data.model).toBe(MODEL);
    expect(data.lanes).toEqual([
      { id: "sl-0", fields: ["weight"], desired: { weight: 50 }, observed: { weight: 40 } },
      { id: "sl-1", fields: ["weight"], desired: { weight: 50 }, observed: { weight: 60 } },
    ]);
    expect(entries[0]?.message).toContain("sl-0 weight desired 50 observed 40");
    const rec = await p().send("GET", `/v1/releases/${r.id}`, undefined, auth());
    expect((JSON.parse(rec.body) as { drift: unknown }).drift).not.toBeNull();

    // The lease marks the next observation: one interval (less the slack) from the event.
    const until = await leaseUntil();
    expect(until).toBeGreaterThanOrEqual(t0 + eventLeaseMs(INTERVAL));
    expect(until).toBeLessThanOrEqual(t1 + eventLeaseMs(INTERVAL));

    // /metrics (another event, another core) exports what the store keeps.
    const lines = await scrape();
    for (const l of [
      `baton_lane_drift{model="${MODEL}",lane="sl-0",field="weight"} 1`,
      `baton_lane_drift{model="${MODEL}",lane="sl-1",field="weight"} 1`,
      `baton_drift_lanes{model="${MODEL}"} 2`,
      `baton_lane_weight_percent{model="${MODEL}",lane="sl-0",state="desired"} 50`,
      `baton_lane_weight_percent{model="${MODEL}",lane="sl-0",state="observed"} 40`,
      `baton_lane_weight_percent{model="${MODEL}",lane="sl-1",state="observed"} 60`,
      `baton_serving_images{model="${MODEL}"} 1`,
      `baton_mixed_version{model="${MODEL}",wave="1"} 0`,
      `baton_mixed_version{model="${MODEL}",wave="2"} 0`,
      `baton_drift_observation_interval_seconds ${INTERVAL / 1000}`,
    ]) {
      expect(lines).toContain(l);
    }
    const last = await metric("baton_drift_last_observed_timestamp_seconds");
    expect(last).toBeGreaterThanOrEqual(Math.floor(t0 / 1000));
    expect(last).toBeLessThanOrEqual(Math.ceil(t1 / 1000));
    const observations = await metric("baton_drift_observations_total");
    // One during the release (its model skipped: in flight), one now.
    expect(observations).toBe(2);

    // More events within the interval (a cron every minute): no observation, no new entry.
    for (let i = 0; i < 3; i++) await p().tick();
    expect(await metric("baton_drift_observations_total")).toBe(observations);
    expect(await leaseUntil()).toBe(until);
    expect((await driftEntries(r.id)).length).toBe(1);
  }, 240_000);

  it(`${name}: a control plane that refuses, hangs or is gone during a scheduled event: the event ends normally, once per interval, counted; the last observation stays`, async () => {
    expect(releaseId).not.toBe("");
    const lastBefore = await metric("baton_drift_last_observed_timestamp_seconds");
    const observations = await metric("baton_drift_observations_total");
    let srv: LanesServer | null = await startLanesServer(new MemoryControlPlane({ model: MODEL }));
    const reads = () => srv?.received.filter((x) => x.startsWith("/v1/lanes")).length ?? 0;
    try {
      // 503: one read, counted as a control_plane failure; the next events leave it be.
      srv.mode = "error";
      await intervalPasses();
      await p().tickWith(srv.url);
      expect(reads()).toBe(1);
      expect(await metric('baton_drift_observation_failures_total{reason="control_plane"}')).toBe(
        1,
      );
      await p().tickWith(srv.url);
      await p().tickWith(srv.url);
      expect(reads()).toBe(1);

      // Hangs: given up at the read's timeout, the request closed, counted as a timeout.
      srv.mode = "hang";
      await intervalPasses();
      await p().tickWith(srv.url);
      expect(reads()).toBe(2);
      for (let i = 0; i < 100 && srv.held() > 0; i++)
        await new Promise((ok) => setTimeout(ok, 100));
      expect(srv.held()).toBe(0);
      expect(await metric('baton_drift_observation_failures_total{reason="timeout"}')).toBe(1);

      // Gone (connection refused).
      const url = srv.url;
      await srv.close();
      srv = null;
      await intervalPasses();
      await p().tickWith(url);
      expect(await metric('baton_drift_observation_failures_total{reason="control_plane"}')).toBe(
        2,
      );
    } finally {
      await srv?.close();
    }
    // The failures are kept with the reason and message of the last one.
    const kept = await sql(
      w().env.DATABASE_URL,
      "SELECT value FROM engine_state WHERE name = 'drift'",
    );
    const state = JSON.parse(String(kept[0]?.value)) as {
      lastFailure: { reason: string; message: string };
    };
    expect(state.lastFailure.reason).toBe("control_plane");
    expect(state.lastFailure.message).not.toBe("");
    // What the last successful observation saw is still exported; nothing new in history.
    expect(await metric("baton_drift_observations_total")).toBe(observations);
    expect(await metric("baton_drift_last_observed_timestamp_seconds")).toBe(lastBefore);
    expect(await scrape()).toContain(
      `baton_lane_drift{model="${MODEL}",lane="sl-0",field="weight"} 1`,
    );
    expect((await driftEntries(releaseId)).map((e) => e.kind)).toEqual(["drift"]);

    // The control plane back, the lanes as the release left them: cleared at the next interval.
    const cp = w().cp.core;
    cp.seed(cp.lanes(MODEL).map((l) => ({ ...l, weight: 50 })));
    await intervalPasses();
    await p().tick();
    expect((await driftEntries(releaseId)).map((e) => e.kind)).toEqual(["drift", "drift_cleared"]);
    expect(await metric(`baton_drift_lanes{model="${MODEL}"}`)).toBe(0);
    expect(await scrape()).not.toContain(
      `baton_lane_drift{model="${MODEL}",lane="sl-0",field="weight"} 1`,
    );
  }, 240_000);
}

describe.skipIf(!PG && process.env.CI !== "true")(
  "serverless drift: Workers entry in workerd",
  () => {
    const PUBLIC_URL = "https://baton.example.workers.dev";
    let dir: string;
    let bundle: string;
    let world: ServerlessWorld;
    let workerd: Workerd;
    /** A second runtime on the same database, its control plane elsewhere (set per event). */
    const others = new Map<string, Miniflare>();

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "baton-worker-drift-"));
      bundle = buildWorkerBundle(dir);
      world = await startServerlessWorld(PUBLIC_URL);
      workerd = await startWorkerd(
        bundle,
        { ...world.env, BATON_DRIFT_INTERVAL_MS: String(INTERVAL) },
        PUBLIC_URL,
      );
    }, 120_000);

    afterAll(async () => {
      for (const mf of others.values()) await mf.dispose();
      await workerd?.dispose();
      await world?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    driftScenario(
      "workerd",
      () => world,
      () => ({
        send: workerd.send,
        tick: workerd.tick,
        tickWith: async (url) => {
          let mf = others.get(url);
          if (!mf) {
            mf = workerdRuntime(bundle, {
              ...world.env,
              BATON_DRIFT_INTERVAL_MS: String(INTERVAL),
              BATON_CONTROL_PLANE_URL: url,
            });
            others.set(url, mf);
          }
          const r = await (await cronTrigger(mf))();
          expect(r.outcome).toBe("ok");
        },
      }),
    );
  },
);

describe.skipIf(!PG && process.env.CI !== "true")("serverless drift: Lambda entry", () => {
  const DOMAIN = "r4nd0m1d.execute-api.eu-west-1.amazonaws.com";
  let world: ServerlessWorld;
  const saved = { ...process.env };

  /** An API Gateway HTTP API event (payload format 2.0), as lambda.test.ts sends. */
  const httpEvent = (
    method: string,
    path: string,
    body?: string,
    h: Record<string, string> = {},
  ) => {
    const [rawPath, rawQueryString = ""] = path.split("?");
    return {
      version: "2.0",
      routeKey: "$default",
      rawPath,
      rawQueryString,
      headers: { host: DOMAIN, "x-forwarded-proto": "https", ...h },
      requestContext: {
        domainName: DOMAIN,
        http: { method, path: rawPath, protocol: "HTTP/1.1", sourceIp: "192.0.2.10" },
        requestId: randomUUID(),
        routeKey: "$default",
        stage: "$default",
        timeEpoch: Date.now(),
      },
      ...(body === undefined ? {} : { body }),
      isBase64Encoded: false,
    };
  };
  const scheduledEvent = () => ({
    version: "0",
    id: randomUUID(),
    "detail-type": "Scheduled Event",
    source: "aws.events",
    time: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    resources: ["arn:aws:events:eu-west-1:123456789012:rule/baton-tick"],
    detail: {},
  });
  /** A Lambda context with `ms` of the invocation left. */
  const context = (ms: number) => ({ getRemainingTimeInMillis: () => ms }) as never;
  const send: Send = async (method, path, body, headers) => {
    const r = (await handler(httpEvent(method, path, body, headers) as never)) as {
      statusCode: number;
      body: string;
    };
    return { status: r.statusCode, body: r.body };
  };
  const tick = async () => {
    const r = (await handler(scheduledEvent() as never, context(60_000))) as { performed: number };
    expect(typeof r.performed).toBe("number");
  };

  beforeAll(async () => {
    world = await startServerlessWorld(`https://${DOMAIN}`);
    Object.assign(process.env, world.env, { BATON_DRIFT_INTERVAL_MS: String(INTERVAL) });
  }, 60_000);

  afterAll(async () => {
    process.env = saved;
    await world?.close();
  });

  driftScenario(
    "Lambda",
    () => world,
    () => ({
      send,
      tick,
      tickWith: async (url) => {
        process.env.BATON_CONTROL_PLANE_URL = url;
        try {
          await tick();
        } finally {
          process.env.BATON_CONTROL_PLANE_URL = world.env.BATON_CONTROL_PLANE_URL;
        }
      },
    }),
  );

  it("Lambda: with under a second of the invocation left the observation waits for the next event; a short budget shortens the read", async () => {
    const db = world.env.DATABASE_URL;
    const obs = async () => {
      const r = await send("GET", "/metrics", undefined, {
        authorization: `Bearer ${world.operatorToken}`,
      });
      const line = r.body.split("\n").find((l) => l.startsWith("baton_drift_observations_total "));
      return Number(line?.split(" ")[1]);
    };
    const failures = async () => {
      const v = await sql(db, "SELECT value FROM engine_state WHERE name = 'drift'");
      return (JSON.parse(String(v[0]?.value)) as { failures: { timeout: number } }).failures;
    };
    const before = await obs();
    await sql(db, "UPDATE leases SET until = 0 WHERE name = 'drift'");
    // 2.5 s left, 2 s kept for closing: 0.5 s for drift, under the 1 s minimum.
    await handler(scheduledEvent() as never, context(2_500));
    expect(await obs()).toBe(before);
    const until = await sql(db, "SELECT until FROM leases WHERE name = 'drift'");
    expect(Number(until[0]?.until)).toBe(0);
    // 4 s left: the hanging read is given up within the budget (a timeout), not at 5 s.
    const srv = await startLanesServer(new MemoryControlPlane({ model: MODEL }));
    srv.mode = "hang";
    const timeoutsBefore = (await failures()).timeout;
    process.env.BATON_CONTROL_PLANE_URL = srv.url;
    try {
      await handler(scheduledEvent() as never, context(4_000));
    } finally {
      process.env.BATON_CONTROL_PLANE_URL = world.env.BATON_CONTROL_PLANE_URL;
      await srv.close();
    }
    expect((await failures()).timeout).toBe(timeoutsBefore + 1);
    const kept = await sql(db, "SELECT value FROM engine_state WHERE name = 'drift'");
    const message = (JSON.parse(String(kept[0]?.value)) as { lastFailure: { message: string } })
      .lastFailure.message;
    const given = Number(/no answer within (\d+) ms/.exec(message)?.[1]);
    expect(given).toBeGreaterThan(0);
    expect(given).toBeLessThan(5_000);
    expect(srv.received.filter((x) => x.startsWith("/v1/lanes"))).toHaveLength(1);
    // Then the next event with time observes.
    await sql(db, "UPDATE leases SET until = 0 WHERE name = 'drift'");
    await tick();
    expect(await obs()).toBe(before + 1);
  }, 120_000);
});
