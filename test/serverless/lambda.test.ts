/**
 * The AWS Lambda entry, invoked as Lambda invokes it: API Gateway HTTP API events (payload
 * format 2.0) for every request and EventBridge "Scheduled Event"s for the schedule, in the
 * shapes AWS documents, against a real Postgres, the GitHub stand-in and the reference control
 * plane over HTTP. Nothing runs between invocations: each opens and closes its own connections.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handler, isScheduledEvent } from "../../engine/src/entries/lambda.ts";
import {
  driveRelease,
  MODEL,
  type Send,
  type ServerlessWorld,
  startServerlessWorld,
} from "../support/serverless-world.ts";

const PG = process.env.BATON_TEST_DATABASE_URL;
const DOMAIN = "r4nd0m1d.execute-api.eu-west-1.amazonaws.com";

/** An API Gateway HTTP API event, payload format 2.0 (AWS docs, "Working with AWS Lambda proxy integrations for HTTP APIs"). */
function apiGatewayV2(
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
) {
  const now = Date.now();
  return {
    version: "2.0",
    routeKey: "$default",
    rawPath: path,
    rawQueryString: "",
    headers: {
      host: DOMAIN,
      "user-agent": "baton-test",
      "x-forwarded-proto": "https",
      ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
    },
    requestContext: {
      accountId: "123456789012",
      apiId: "r4nd0m1d",
      domainName: DOMAIN,
      domainPrefix: "r4nd0m1d",
      http: { method, path, protocol: "HTTP/1.1", sourceIp: "192.0.2.10", userAgent: "baton-test" },
      requestId: randomUUID(),
      routeKey: "$default",
      stage: "$default",
      time: new Date(now).toUTCString(),
      timeEpoch: now,
    },
    ...(body === undefined ? {} : { body }),
    isBase64Encoded: false,
  };
}

/** An EventBridge schedule rule's event (AWS docs, "Amazon EventBridge events": Scheduled Event). */
function scheduledEvent() {
  return {
    version: "0",
    id: randomUUID(),
    "detail-type": "Scheduled Event",
    source: "aws.events",
    account: "123456789012",
    time: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    region: "eu-west-1",
    resources: ["arn:aws:events:eu-west-1:123456789012:rule/baton-tick"],
    detail: {},
  };
}

describe.skipIf(!PG && process.env.CI !== "true")("Lambda entry", () => {
  let world: ServerlessWorld;
  const saved = { ...process.env };
  const send: Send = async (method, path, body, headers) => {
    const r = (await handler(apiGatewayV2(method, path, body, headers) as never)) as {
      statusCode: number;
      body: string;
    };
    return { status: r.statusCode, body: r.body };
  };
  const tick = async () => {
    const r = (await handler(scheduledEvent() as never)) as { performed: number; failed: number };
    expect(typeof r.performed).toBe("number");
  };

  beforeAll(async () => {
    world = await startServerlessWorld(`https://${DOMAIN}`);
    Object.assign(process.env, world.env);
  }, 60_000);

  afterAll(async () => {
    process.env = saved;
    await world?.close();
  });

  it("tells a scheduled event from an HTTP event", () => {
    expect(isScheduledEvent(scheduledEvent())).toBe(true);
    expect(isScheduledEvent(apiGatewayV2("GET", "/healthz"))).toBe(false);
  });

  it("answers GET /healthz 200 through an API Gateway v2 event; a bad setting is a 503 naming it", async () => {
    expect((await send("GET", "/healthz")).status).toBe(200);
    process.env.BATON_OPERATOR_TOKEN = "short";
    try {
      const r = await send("GET", "/healthz");
      expect(r.status).toBe(503);
      expect(r.body).toContain("BATON_OPERATOR_TOKEN");
    } finally {
      process.env.BATON_OPERATOR_TOKEN = world.env.BATON_OPERATOR_TOKEN;
    }
  });

  it("a database that does not answer is a 503 with Retry-After, not a 500; a scheduled event fails", async () => {
    process.env.DATABASE_URL = "postgres://postgres@127.0.0.1:1/nowhere";
    try {
      const r = (await handler(apiGatewayV2("GET", "/healthz") as never)) as {
        statusCode: number;
        headers: Record<string, string>;
      };
      expect(r.statusCode).toBe(503);
      await expect(handler(scheduledEvent() as never)).rejects.toThrow();
    } finally {
      process.env.DATABASE_URL = world.env.DATABASE_URL;
    }
  });

  it("a release driven by API Gateway events and scheduled events succeeds", async () => {
    const r = await driveRelease(world, send, tick);
    expect(r.state).toBe("succeeded");
    expect(r.ticks).toBeGreaterThan(0);
    const counts = world.cp.core.applicationCounts();
    expect(
      Object.keys(counts).filter((k) => k.startsWith(`${r.id}:`) && k.endsWith("fwd:traffic=100")),
    ).toHaveLength(1);
    expect(Object.values(counts).every((n) => n === 1)).toBe(true);
    expect(world.cp.core.lanes(MODEL).every((l) => !l.excluded)).toBe(true);
  }, 120_000);

  it("with BATON_GITHUB_DEPLOYMENTS, a release shows on GitHub's Deployments page (in_progress, then success)", async () => {
    process.env.BATON_GITHUB_DEPLOYMENTS = "production";
    try {
      const before = world.github.deployments.length;
      const r = await driveRelease(world, send, tick);
      expect(r.state).toBe("succeeded");
      // The statuses are outbox effects: the schedule's ticks deliver what is still due.
      for (let i = 0; i < 10; i++) {
        const d = world.github.deployments.slice(before);
        if (d.length === 1 && d[0]!.statuses.at(-1)?.state === "success") break;
        await tick();
      }
      const mine = world.github.deployments.slice(before);
      expect(mine).toHaveLength(1);
      expect(mine[0]!.environment).toBe("production");
      expect((mine[0]!.payload as { baton: { release_id: string } }).baton.release_id).toBe(r.id);
      expect(mine[0]!.statuses.map((x) => x.state)).toEqual(["in_progress", "success"]);
      expect(world.github.openapiProblems).toEqual([]);
    } finally {
      delete process.env.BATON_GITHUB_DEPLOYMENTS;
    }
  }, 120_000);

  it("a release whose second wave fails is rolled back to the observed baseline", async () => {
    const before = world.cp.core.lanes(MODEL).map((l) => [l.id, l.weight]);
    const r = await driveRelease(world, send, tick, { failWave: 1 });
    expect(r.state).toBe("rolled_back");
    expect(world.cp.core.lanes(MODEL).map((l) => [l.id, l.weight])).toEqual(before);
    expect(
      Object.keys(world.cp.core.applicationCounts()).some(
        (k) => k.startsWith(`${r.id}:`) && k.includes(":bwd:"),
      ),
    ).toBe(true);
  }, 120_000);
});
