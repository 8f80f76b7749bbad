/**
 * Bad input for every route of the HTTP API, on both stores: 400 naming the field (or
 * 401/404/409/413/422), never a 500, and one error body shape. Also: forged credentials are recorded as refused,
 * the log tail is cut with the marker, checks are stored verbatim, YAML recipes are accepted.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify as toYaml } from "yaml";
import { signBody } from "../../engine/src/protocol/credential.ts";
import { LOG_TRUNCATED_MARKER } from "../../engine/src/protocol/messages.ts";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  firstDispatch,
  getRecord,
  type Harness,
  makeHarness,
  OPERATOR,
  op,
  preflightBody,
  preflightUrl,
  recipe,
  SECRET,
  STORE_KINDS,
  signedPost,
  skipStore,
  VIEWER,
} from "./service-harness.ts";

// These tests stack releases of one recipe on one lane set; the one-release-per-lane rule
// is tested in test/integration/lane-claims.test.ts.
process.env.BATON_EXCLUSIVE_LANES = "off";

describe.each(STORE_KINDS)("HTTP errors on %s", (kind) => {
  const skip = skipStore(kind);
  if (skip) {
    it.skip("Postgres: BATON_TEST_DATABASE_URL is not set", () => {});
    return;
  }

  let h: Harness;
  let id: string;
  beforeAll(async () => {
    h = await makeHarness({ kind, seed: recipe(2) });
    id = await createRelease(h, recipe(2));
    await firstDispatch(h);
  });
  afterAll(async () => {
    await h?.close();
  });

  interface ErrBody {
    error: {
      code: string;
      message: string;
      problems?: { path: string; message: string; fix: string }[];
    };
  }

  async function expectError(res: Response, status: number, path?: string): Promise<ErrBody> {
    expect(res.status).toBe(status);
    const body = (await res.json()) as ErrBody;
    expect(typeof body.error.code).toBe("string");
    expect(body.error.message).toMatch(/^\[(engine|recipe)\]/);
    if (path) expect(body.error.problems?.map((p) => p.path)).toContain(path);
    for (const p of body.error.problems ?? []) expect(p.fix.length).toBeGreaterThan(0);
    return body;
  }

  const req = (method: string, url: string, init: RequestInit = {}) =>
    Promise.resolve(h.engine.app.request(url, { method, ...init }));

  describe("authentication of operator and read routes", () => {
    it("missing or wrong token on an operator route: 401; the viewer token: 403 forbidden", async () => {
      await expectError(await req("POST", "/v1/releases", { body: "{}" }), 401);
      const wrong = await expectError(
        await req("POST", "/v1/releases", {
          headers: { authorization: "Bearer nope" },
          body: "{}",
        }),
        401,
      );
      expect(wrong.error.code).toBe("unauthorized");
      expect(wrong.error.message).toContain("BATON_OPERATOR_TOKEN");
      const viewer = await expectError(
        await req("POST", `/v1/releases/${id}/abort`, {
          headers: { authorization: `Bearer ${VIEWER}` },
        }),
        403,
      );
      expect(viewer.error).toEqual({
        code: "forbidden",
        message:
          "[engine] the viewer token only reads; abort needs the operator token (BATON_OPERATOR_TOKEN)",
      });
      for (const action of ["resume"]) {
        const r = await expectError(
          await req("POST", `/v1/releases/${id}/${action}`, {
            headers: { authorization: `Bearer ${VIEWER}` },
          }),
          403,
        );
        expect(r.error.message).toContain(`${action} needs the operator token`);
      }
      const start = await expectError(
        await req("POST", "/v1/releases", {
          headers: { authorization: `Bearer ${VIEWER}` },
          body: "{}",
        }),
        403,
      );
      expect(start.error.message).toContain("POST /v1/releases needs the operator token");
      await expectError(await req("POST", "/v1/tick"), 401);
    });
    it("reads accept the viewer token and the operator token", async () => {
      for (const t of [VIEWER, OPERATOR]) {
        const r = await req("GET", `/v1/releases/${id}`, {
          headers: { authorization: `Bearer ${t}` },
        });
        expect(r.status).toBe(200);
      }
      await expectError(await req("GET", "/v1/releases"), 401);
    });
  });

  describe("POST /v1/releases", () => {
    it("bad JSON, bad YAML, unsupported content type, empty body: 400 naming the field", async () => {
      await expectError(await op(h, "POST", "/v1/releases", "{nope"), 400, "body");
      await expectError(
        await op(h, "POST", "/v1/releases", "name: [unclosed", {
          "content-type": "application/yaml",
        }),
        400,
        "body",
      );
      await expectError(
        await op(h, "POST", "/v1/releases", "x", { "content-type": "text/plain" }),
        400,
        "content-type",
      );
      await expectError(await op(h, "POST", "/v1/releases", ""), 400, "body");
      await expectError(
        await op(h, "POST", "/v1/releases?start=maybe", recipe(2)),
        400,
        "query.start",
      );
    });
    it("a YAML body with a tag: 400 naming the tag, line and column", async () => {
      const yaml = `name: x\nmodel: !!python/object:os.system rm\n`;
      const body = await expectError(
        await h.engine.app.request("/v1/releases", {
          method: "POST",
          headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/yaml" },
          body: yaml,
        }),
        400,
      );
      expect(body.error.message).toContain(
        "request body:2:8: the YAML tag `!!python/object:os.system` is not allowed",
      );
      expect(body.error.problems?.[0]?.fix).toContain("recipes are plain YAML: no tags");
    });
    it("a recipe failing its contract: 422 with every problem", async () => {
      const bad = { ...recipe(2), image: "ghcr.io/acme/summarizer:latest", lanes: [] };
      const body = await expectError(await op(h, "POST", "/v1/releases", bad), 422);
      expect(body.error.problems!.length).toBeGreaterThanOrEqual(2);
      expect(body.error.problems!.map((p) => p.path)).toContain("image");
    });
    it("YAML with content-type application/yaml: 201 with id and manifest_digest", async () => {
      const res = await op(h, "POST", "/v1/releases", toYaml(recipe(2)), {
        "content-type": "application/yaml",
      });
      expect(res.status).toBe(201);
      const b = (await res.json()) as { id: string; manifest_digest: string };
      expect(b.id).toMatch(/^r[0-9]+$/);
      expect(b.manifest_digest).toMatch(/^[0-9a-f]{64}$/);
    });
    it("a body over 1 MiB: 413", async () => {
      await expectError(
        await op(h, "POST", "/v1/releases", `"${"x".repeat(1024 * 1024 + 10)}"`),
        413,
      );
    });
  });

  describe("GET /v1/releases and /v1/releases/:id", () => {
    it("bad query values: 400 naming them", async () => {
      await expectError(await op(h, "GET", "/v1/releases?state=bogus"), 400, "query.state");
      await expectError(await op(h, "GET", "/v1/releases?limit=0"), 400, "query.limit");
      await expectError(await op(h, "GET", "/v1/releases?limit=abc"), 400, "query.limit");
      await expectError(await op(h, "GET", "/v1/releases?colour=red"), 400, "query.colour");
      // One rule for every numeric query parameter: decimal digits only, in range.
      const loose = ["0x10", "1e1", "0b11", "0o7", "", "%20", "%205", "5.0", "-1", "+5"];
      for (const v of loose) {
        for (const url of [
          `/v1/releases/${id}/history?cursor=${v}`,
          `/v1/releases/${id}/history?limit=${v}`,
          `/v1/releases?limit=${v}`,
          `/v1/releases?before=${v}`,
        ]) {
          const name = /[?&](\w+)=/.exec(url)?.[1] ?? "";
          const body = await expectError(await op(h, "GET", url), 400, `query.${name}`);
          expect(body.error.message).toMatch(/decimal digits only/);
        }
      }
      expect((await op(h, "GET", `/v1/releases/${id}/history?cursor=0&limit=5`)).status).toBe(200);
      expect((await op(h, "GET", "/v1/releases?before=1764662400000")).status).toBe(200);
      const ok = await op(h, "GET", "/v1/releases?state=running&limit=5");
      expect(ok.status).toBe(200);
      expect(
        ((await ok.json()) as { releases: { id: string }[] }).releases.map((r) => r.id),
      ).toContain(id);
    });
    it("a query parameter given twice: 400 naming it, on every route (API and dashboard)", async () => {
      const cases: [string, string, string][] = [
        ["GET", "/v1/releases?limit=1&limit=2", "limit"],
        ["GET", `/v1/releases/${id}/history?cursor=a&cursor=b`, "cursor"],
        ["GET", `/v1/releases/${id}?x=1&x=1`, "x"],
        ["POST", "/v1/releases?start=false&start=true", "start"],
        ["POST", `/v1/releases/${id}/resume?a=1&b=2&a=3`, "a"],
        ["GET", "/releases?state=running&state=failed", "state"],
        ["GET", "/healthz?v=1&v=2", "v"],
      ];
      for (const [method, url, name] of cases) {
        const body = await expectError(await op(h, method, url), 400, `query.${name}`);
        expect(body.error.code).toBe("bad_request");
        expect(body.error.message).toContain(`${name} given twice; give it once`);
        expect(body.error.problems?.[0]?.fix).toMatch(new RegExp(`give ${name} once`));
      }
      // An empty and a percent-encoded twin are the same name.
      await expectError(await op(h, "GET", "/v1/releases?limit=&limit=3"), 400, "query.limit");
      await expectError(await op(h, "GET", "/v1/releases?lim%69t=1&limit=3"), 400, "query.limit");
      // One of each is fine.
      expect((await op(h, "GET", "/v1/releases?state=running&limit=5")).status).toBe(200);
    });
    it("a malformed id is 400 naming id, an unknown one 404", async () => {
      await expectError(await op(h, "GET", "/v1/releases/bogus"), 400, "id");
      await expectError(await op(h, "GET", "/v1/releases/r99999"), 404);
    });
    it("the record carries state, hwm, step runs with attempts, history", async () => {
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("running");
      expect(typeof rec.high_water_mark).toBe("number");
      expect(rec.step_runs.length).toBeGreaterThan(0);
      expect(rec.history[0]?.kind).toBe("created");
    });
  });

  describe("operator actions", () => {
    it("abort: bad id, bad body, unknown field, unknown release", async () => {
      await expectError(await op(h, "POST", "/v1/releases/x1/abort"), 400, "id");
      await expectError(await op(h, "POST", "/v1/releases/r1/abort", "not json"), 400, "body");
      await expectError(
        await op(h, "POST", `/v1/releases/${id}/abort`, { reason: 5 }),
        400,
        "body.reason",
      );
      await expectError(await op(h, "POST", `/v1/releases/${id}/abort`, { why: "x" }), 400, "body");
      await expectError(await op(h, "POST", "/v1/releases/r99999/abort"), 404);
    });
    it("resume: bad id 400, unknown 404, a running release 409", async () => {
      await expectError(await op(h, "POST", "/v1/releases/%20/resume"), 400, "id");
      await expectError(await op(h, "POST", "/v1/releases/r99999/resume"), 404);
      await expectError(await op(h, "POST", `/v1/releases/${id}/resume`), 409);
    });
    it("retry: bad step run id 400, unknown 404, a step run not waiting 409", async () => {
      await expectError(await op(h, "POST", "/v1/releases/step-runs/sr_x/retry"), 400, "id");
      await expectError(await op(h, "POST", "/v1/releases/step-runs/sr_99999_0_f/retry"), 404);
      await expectError(
        await op(h, "POST", `/v1/releases/step-runs/sr_${id.slice(1)}_0_f/retry`),
        409,
      );
    });
    it("tick and healthz answer; unknown routes are JSON 404s", async () => {
      expect((await op(h, "POST", "/v1/tick")).status).toBe(200);
      const hz = await req("GET", "/healthz");
      expect(hz.status).toBe(200);
      expect(await hz.json()).toEqual({ ok: true });
      await expectError(await req("GET", "/v1/nothing-here"), 404);
    });
  });

  describe("preflight and callback", () => {
    const sr = () => `sr_${id.slice(1)}_2_f`;

    it("bad credentials get one identical 401 body and are recorded as refused, once a minute per kind", async () => {
      const body = callbackBody(sr(), { run_id: "1", run_attempt: 1 });
      const now = h.clock.now();
      const variants: Record<string, string>[] = [
        {},
        signBody("wrong-secret-0123456789abcdef", body, now),
        signBody(SECRET, body, now - 10 * 60 * 1000), // expired (replayed later)
        { "x-baton-signature": "sha256=zz", "x-baton-timestamp": "1" },
      ];
      const texts = new Set<string>();
      for (const headers of variants) {
        for (const url of [callbackUrl(sr()), preflightUrl(sr())]) {
          const res = await req("POST", url, { headers, body });
          expect(res.status).toBe(401);
          texts.add(await res.text());
        }
      }
      expect(texts.size).toBe(1);
      const rec = await getRecord(h, id);
      const refused = rec.history.filter(
        (x) => x.outcome === "refused" && /bad credential/.test(x.message),
      );
      // One row per kind a minute (refusal-log.ts), each counting what it stands for.
      expect(refused.length).toBe(2);
      expect(refused.map((x) => (x.data as { requests: number }).requests)).toEqual([1, 1]);
      h.clock.advance(60_000);
      await req("POST", callbackUrl(sr()), { headers: variants[1]!, body });
      const again = (await getRecord(h, id)).history.filter(
        (x) => x.outcome === "refused" && /bad credential/.test(x.message),
      );
      expect(again.length).toBe(3);
      expect((again.at(-1)!.data as { requests: number }).requests).toBe(variants.length);
    });

    it("signed but malformed bodies: 400 naming the field", async () => {
      await expectError(await signedPost(h, callbackUrl(sr()), "{not json"), 400, "body");
      await expectError(
        await signedPost(h, callbackUrl(sr()), new Uint8Array([0x7b, 0xff, 0x7d])),
        400,
        "body",
      );
      await expectError(
        await signedPost(
          h,
          callbackUrl(sr()),
          JSON.stringify({ step_run_id: sr(), overall: "pass" }),
        ),
        400,
        "body.run_id",
      );
      await expectError(
        await signedPost(
          h,
          callbackUrl(sr()),
          callbackBody(sr(), { run_id: "1", run_attempt: 1 }, "pass", { overall: "maybe" }),
        ),
        400,
        "body.overall",
      );
      await expectError(
        await signedPost(h, preflightUrl(sr()), JSON.stringify({ step_run_id: sr(), extra: 1 })),
        400,
        "body.release_id",
      );
      // A body of another step run is a credential for that step run, not this one: 401
      // (test/integration/step-run-binding.test.ts).
      const other = await expectError(
        await signedPost(
          h,
          callbackUrl(sr()),
          callbackBody(`sr_${id.slice(1)}_3_f`, { run_id: "1", run_attempt: 1 }),
        ),
        401,
      );
      expect(other.error.code).toBe("unauthorized");
      await expectError(await signedPost(h, callbackUrl("sr_bad"), "{}"), 400, "id");
    });

    it("a callback to a control-plane step run: 422 illegal_transition, naming its kind", async () => {
      const cpStep = `sr_${id.slice(1)}_0_f`;
      const body = await expectError(
        await signedPost(
          h,
          callbackUrl(cpStep),
          callbackBody(cpStep, { run_id: "434343", run_attempt: 1 }),
        ),
        422,
      );
      expect(body.error.code).toBe("illegal_transition");
      expect(body.error.message).toContain("it is a control-plane step run");
    });

    it("unknown step run: 404; a callback with no attempt: 409", async () => {
      const p = h.dispatcher.accepted[0]!;
      const pre = JSON.parse(preflightBody(p, { run_id: "1", run_attempt: 1 }));
      const unknown = JSON.stringify({ ...pre, step_run_id: "sr_99999_1_f", release_id: "r99999" });
      await expectError(await signedPost(h, preflightUrl("sr_99999_1_f"), unknown), 404);
      await expectError(
        await signedPost(
          h,
          callbackUrl(sr()),
          callbackBody(sr(), { run_id: "424242", run_attempt: 1 }),
        ),
        409,
      );
    });

    it("callback bodies over 1 MiB: 413", async () => {
      const big = callbackBody(sr(), { run_id: "1", run_attempt: 1 }, "pass", {
        log: "x".repeat(1024 * 1024),
      });
      await expectError(await signedPost(h, callbackUrl(sr()), big), 413);
    });

    it("a log over 256 KiB is cut with the marker; checks are stored verbatim", async () => {
      const p = h.dispatcher.accepted[0]!;
      const run = { run_id: "9191", run_attempt: 1 };
      expect((await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run))).status).toBe(
        200,
      );
      const checks = { weird: [1, "two", { three: null }], ünï: true };
      const log = `${"a".repeat(300 * 1024)}\nTHE END é\n`;
      const res = await signedPost(
        h,
        callbackUrl(p.step_run_id),
        callbackBody(p.step_run_id, run, "pass", { checks, log }),
      );
      expect(res.status).toBe(200);
      const rec = await getRecord(h, id);
      const ar = rec.attempt_results.find((a) => a.step_run_id === p.step_run_id)!;
      expect(ar.checks).toEqual(checks);
      expect(ar.log_truncated).toBe(true);
      expect(ar.log.startsWith(LOG_TRUNCATED_MARKER)).toBe(true);
      expect(ar.log.endsWith("THE END é\n")).toBe(true);
      expect(Buffer.byteLength(ar.log, "utf8")).toBeLessThanOrEqual(256 * 1024);
    });
  });
});
