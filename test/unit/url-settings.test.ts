/**
 * Outbound URL settings are checked at start-up, on the Node entry (loadConfig) and the
 * serverless entries (serverlessSettings), by one rule (engine/src/url-settings.ts): https, or
 * http only to loopback (or with the documented BATON_ALLOW_HTTP opt-in); no file:, gopher:,
 * javascript:, data:; no link-local host; no credentials in the URL. Each refusal names the
 * variable and the fix. The Prometheus and control-plane clients do not follow redirects.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpControlPlane } from "../../engine/src/adapters/http-control-plane/index.ts";
import { PrometheusMetricsSource } from "../../engine/src/adapters/prometheus/index.ts";
import { loadConfig } from "../../engine/src/config.ts";
import { BatonError } from "../../engine/src/domain/errors.ts";
import { serverlessSettings } from "../../engine/src/entries/serverless.ts";
import { URL_SETTINGS } from "../../engine/src/url-settings.ts";

const node = {
  BATON_CALLBACK_SECRETS: "s".repeat(32),
  BATON_OPERATOR_TOKEN: "o".repeat(32),
};
const serverless = {
  DATABASE_URL: "postgres://u@127.0.0.1:1/db",
  BATON_PUBLIC_URL: "https://baton.example.org",
  BATON_CALLBACK_SECRETS: "s".repeat(32),
  BATON_OPERATOR_TOKEN: "o".repeat(32),
  BATON_CONTROL_PLANE_URL: "https://cp.example.org",
  BATON_CONTROL_PLANE_TOKEN: "c".repeat(32),
  GITHUB_REPOSITORY: "acme/models",
  GITHUB_TOKEN: "t",
};

/** The bad values of the hostile-input report, and where each must be refused. */
const BAD: [string, RegExp][] = [
  ["file:///etc/passwd", /scheme file: is not allowed/],
  ["gopher://127.0.0.1:6379/_FLUSHALL", /scheme gopher: is not allowed/],
  ["javascript:alert(1)", /scheme javascript: is not allowed/],
  ["data:text/plain,hello", /scheme data: is not allowed/],
  ["http://169.254.169.254/latest/meta-data/", /link-local address 169\.254\.169\.254/],
  ["https://169.254.169.254/", /link-local/],
  ["http://[fe80::1]:9090/", /link-local/],
  ["https://[::ffff:169.254.169.254]/", /link-local/],
  ["https://user:secret@host.example.org/", /carries a user or password/],
  ["http://metrics.example.org:9090", /plain http to metrics\.example\.org, another machine/],
  ["not a url", /is not a URL/],
];

function refusal(read: () => unknown): string {
  try {
    read();
  } catch (e) {
    if (e instanceof BatonError)
      return e.problems.map((p) => `${p.message}; fix: ${p.fix}`).join("\n");
    return (e as Error).message;
  }
  return "accepted";
}

describe.each(Object.keys(URL_SETTINGS))("%s", (name) => {
  it.each(BAD)("refuses %s at start-up, naming the variable and the fix (Node)", (value, why) => {
    const text = refusal(() => loadConfig({ ...node, [name]: value }));
    const line = text.split("\n").find((l) => l.startsWith(name));
    expect(line, text).toMatch(why);
    expect(line).toMatch(/fix: .*https:\/\//);
  });

  it.each(BAD)("refuses %s on the serverless entries too", (value, why) => {
    const text = refusal(() => serverlessSettings({ ...serverless, [name]: value }));
    expect(text).toMatch(new RegExp(`${name} `));
    expect(text).toMatch(why);
  });

  it("accepts https and plain http to loopback", () => {
    for (const ok of ["https://svc.example.org/x", "http://127.0.0.1:9090", "http://[::1]:1/"]) {
      const text = refusal(() =>
        loadConfig({
          ...node,
          [name]: ok,
          ...(name === "BATON_NOTIFY_WEBHOOK_URL"
            ? { BATON_NOTIFY_WEBHOOK_SECRET: "w".repeat(32) }
            : {}),
          ...(name === "BATON_CONTROL_PLANE_URL"
            ? { BATON_CONTROL_PLANE_TOKEN: "c".repeat(32) }
            : {}),
        }),
      );
      expect(text.split("\n").filter((l) => l.startsWith(name))).toEqual([]);
    }
  });

  it(
    URL_SETTINGS[name]?.httpOptIn
      ? "plain http to another machine only with BATON_ALLOW_HTTP naming it"
      : "plain http to another machine never, not even with BATON_ALLOW_HTTP",
    () => {
      const lan = "http://10.0.0.5:8080";
      expect(refusal(() => loadConfig({ ...node, [name]: lan }))).toMatch(
        new RegExp(`${name} is plain http`),
      );
      const opted = refusal(() => loadConfig({ ...node, [name]: lan, BATON_ALLOW_HTTP: name }));
      if (URL_SETTINGS[name]?.httpOptIn) {
        expect(opted.split("\n").filter((l) => l.startsWith(`${name} `))).toEqual([]);
      } else {
        expect(opted).toMatch(/BATON_ALLOW_HTTP names .* which may not be plain http/);
      }
    },
  );
});

describe("clients do not follow redirects", () => {
  let other: Server;
  let redirector: Server;
  let otherHits = 0;
  let base = "";
  beforeAll(async () => {
    other = createServer((_req, res) => {
      otherHits++;
      res.end(JSON.stringify({ status: "success", data: { resultType: "vector", result: [] } }));
    });
    await new Promise<void>((ok) => other.listen(0, "127.0.0.1", ok));
    const to = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    redirector = createServer((req, res) => {
      res.writeHead(307, { location: `${to}${req.url}` }).end();
    });
    await new Promise<void>((ok) => redirector.listen(0, "127.0.0.1", ok));
    base = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((ok) => other.close(ok));
    await new Promise((ok) => redirector.close(ok));
  });

  it("Prometheus: a redirect is a failed query naming the setting; the other origin is never asked", async () => {
    const q = await new PrometheusMetricsSource({ baseUrl: base }).query("up", 1);
    expect(q.ok).toBe(false);
    if (!q.ok)
      expect(q.reason).toMatch(
        /redirect \(307 to http:\/\/127\.0\.0\.1:\d+\/.*BATON_PROMETHEUS_URL/,
      );
    expect(otherHits).toBe(0);
  });

  it("control plane: a redirect is refused naming the setting; the token never reaches the other origin", async () => {
    const cp = new HttpControlPlane({ baseUrl: base, token: "t".repeat(32) });
    const r = await cp.lanes("m");
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toMatch(/redirect \(307 .*BATON_CONTROL_PLANE_URL/);
    expect(otherHits).toBe(0);
  });
});
