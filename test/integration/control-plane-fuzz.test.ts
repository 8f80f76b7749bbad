/**
 * Bad input never gets a 500 from the reference server: random JSON bodies, lane ids, markers and
 * identity headers on every write route get 200/400/404/409/413/422 with an error body.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlaneHandle,
  startControlPlane,
} from "../../engine/src/control-plane/server.ts";

describe("control-plane server: no 500 for bad input", () => {
  let server: ControlPlaneHandle;
  beforeAll(async () => {
    server = await startControlPlane();
  });
  afterAll(() => server.close());

  it("answers random requests with a 4xx or 200, never 5xx", async () => {
    const segment = fc.oneof(
      fc.constantFrom(
        "lane-a",
        "constructor",
        "__proto__",
        "%ZZ",
        "a%2Fb",
        "-x",
        "é",
        "a".repeat(80),
      ),
      fc.string({ minLength: 1, maxLength: 12 }).map(encodeURIComponent),
    );
    const route = fc.oneof(
      segment.map((l) => `/v1/lanes/${l}`),
      segment.map((l) => `/v1/lanes/${l}/weight`),
      segment.map((l) => `/v1/lanes/${l}/capabilities`),
      fc
        .tuple(segment, fc.constantFrom("excluded", "drained", "%E0"))
        .map(([l, m]) => `/v1/lanes/${l}/markers/${m}`),
      segment.map((m) => `/v1/models/${m}/traffic`),
    );
    const body = fc.oneof(
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc.string({ maxLength: 40 }),
      fc
        .record({
          weights: fc.dictionary(
            fc.string({ maxLength: 6 }),
            fc.oneof(fc.integer(), fc.double(), fc.string()),
          ),
        })
        .map((v) => JSON.stringify(v)),
      fc
        .record(
          {
            present: fc.jsonValue(),
            capabilities: fc.jsonValue(),
            advertised: fc.jsonValue(),
            weight: fc.jsonValue(),
            model: fc.jsonValue(),
          },
          { requiredKeys: [] },
        )
        .map((v) => JSON.stringify(v)),
    );
    const header = fc.option(
      fc.oneof(
        fc.constantFrom("1", "0", "-1", "1e3", "99999999999999999999", " 2"),
        fc.string({ maxLength: 10 }).filter((s) => /^[\x21-\x7e]*$/.test(s)),
      ),
      { nil: undefined },
    );
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        route,
        body,
        header,
        header,
        header,
        async (path, text, key, release, generation) => {
          n++;
          const headers: Record<string, string> = {
            "content-type": "application/json",
            authorization: `Bearer ${server.writeToken}`,
          };
          if (key !== undefined) headers["Idempotency-Key"] = key;
          if (release !== undefined) headers["Baton-Release-Id"] = release;
          if (generation !== undefined) headers["Baton-Generation"] = generation;
          for (const method of ["PUT", "GET"]) {
            const res = await fetch(`${server.url}${path}`, {
              method,
              headers,
              body: method === "PUT" ? text : undefined,
            });
            const answer = await res.text();
            expect(res.status, `${method} ${path} ${text} -> ${answer}`).toBeLessThan(500);
            if (res.status >= 400)
              expect(JSON.parse(answer).error.message).toMatch(/^\[control-plane\]/);
          }
        },
      ),
      { numRuns: 200 },
    );
    expect(n).toBe(200);
  });
});
