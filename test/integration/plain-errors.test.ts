/**
 * Refusals a new user met, on both stores: each names the field and says what to do, in
 * plain words (no zod text such as "Invalid input: expected object, received array", no bare
 * "see docs/engine.md"). The list query's bounds, a verb's body that is not a JSON object
 * (one shared parser for every verb), an acceptance that expired already, a YAML alias bomb.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createRelease,
  drive,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

interface ErrBody {
  error: {
    code: string;
    message: string;
    problems?: { path: string; message: string; fix: string }[];
  };
}

/** No zod wording and no fix that only points at the docs. */
function plain(body: ErrBody): void {
  const text = JSON.stringify(body);
  expect(text).not.toMatch(/Invalid input|Unrecognized key|received (array|number|NaN)/);
  for (const p of body.error.problems ?? []) {
    expect(p.fix).not.toMatch(/^see docs\/engine\.md$/);
    expect(p.fix.length).toBeGreaterThan(10);
  }
}

const VERBS = [
  "pause",
  "promote",
  "release",
  "abort",
  "accept",
  "abandon",
  "confirm-restore",
  "rollback",
];

describe.each(STORE_KINDS)("plain refusals on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness;
  let running: string;
  let closed: string;
  beforeAll(async () => {
    if (skip) return;
    h = await makeHarness({ kind, seed: recipe(2) });
    closed = await createRelease(h, recipe(2));
    await drive(h);
    running = await createRelease(h, recipe(2));
  });
  afterAll(async () => {
    await h?.close();
  });

  it.skipIf(skip)(
    "GET /v1/releases?limit=99999 and ?before=zzz name the field and the fix",
    async () => {
      const limit = await op(h, "GET", "/v1/releases?limit=99999");
      expect(limit.status).toBe(400);
      const l = (await limit.json()) as ErrBody;
      plain(l);
      expect(l.error.problems?.[0]).toMatchObject({
        path: "query.limit",
        message: "must be a whole number written in decimal digits only, 1..200",
      });
      expect(l.error.problems?.[0]?.fix).toMatch(
        /1 to 200 .*before=<created_at of the last release/,
      );

      // Not digits: one problem, without a second one about the count of digits.
      const letters = await op(h, "GET", "/v1/releases?limit=abc");
      expect(letters.status).toBe(400);
      const lt = (await letters.json()) as ErrBody;
      expect(lt.error.problems?.map((p) => p.message)).toEqual([
        "must be a whole number written in decimal digits only, 1..200",
      ]);

      // Digits, but too many to be exact: said as such, not as "not digits".
      const long = await op(h, "GET", `/v1/releases?limit=${"9".repeat(23)}`);
      expect(long.status).toBe(400);
      const lg = (await long.json()) as ErrBody;
      plain(lg);
      expect(lg.error.problems?.[0]?.message).toBe(
        "must be a whole number written in decimal digits only, 1..200; it has more than 15 digits",
      );

      const before = await op(h, "GET", "/v1/releases?before=zzz");
      expect(before.status).toBe(400);
      const b = (await before.json()) as ErrBody;
      plain(b);
      expect(b.error.problems?.[0]?.path).toBe("query.before");
      expect(b.error.problems?.[0]?.message).toMatch(/epoch milliseconds/);
      expect(b.error.problems?.[0]?.fix).toMatch(
        /created_at \(epoch milliseconds.*or leave before out/,
      );

      const unknown = (await (await op(h, "GET", "/v1/releases?page=2")).json()) as ErrBody;
      plain(unknown);
      expect(unknown.error.problems?.[0]).toMatchObject({
        path: "query.page",
        message: '"page" is not a parameter of GET /v1/releases',
      });
      expect(unknown.error.problems?.[0]?.fix).toBe(
        'remove "page" from the URL; GET /v1/releases takes only state, limit, before',
      );

      const cursor = (await (
        await op(h, "GET", `/v1/releases/${running}/history?cursor=zz`)
      ).json()) as ErrBody;
      plain(cursor);
      expect(cursor.error.problems?.[0]?.fix).toMatch(/next_cursor/);
    },
  );

  it.skipIf(skip)(
    "a JSON array, number or string as any verb's body: 400 'is an array, not a JSON object' with an example",
    async () => {
      for (const verb of VERBS) {
        for (const [body, kindWords] of [
          ["[]", "an array"],
          ["42", "the number 42"],
          ['"pause"', "a string"],
          ["null", "null"],
        ] as const) {
          const res = await op(
            h,
            "POST",
            `/v1/releases/${verb === "accept" || verb === "rollback" ? closed : running}/${verb}`,
            body,
          );
          expect(res.status, `${verb} ${body}`).toBe(400);
          const e = (await res.json()) as ErrBody;
          plain(e);
          expect(e.error.message).toBe(
            `[engine] bad ${verb} body: body: is ${kindWords}, not a JSON object`,
          );
          expect(e.error.problems?.[0]?.fix).toMatch(/^send a JSON object such as \{"/);
        }
      }
      const unknown = (await (
        await op(h, "POST", `/v1/releases/${running}/pause`, { reson: "x" })
      ).json()) as ErrBody;
      plain(unknown);
      expect(unknown.error.problems?.[0]).toMatchObject({
        path: "body",
        message: 'has the unknown field "reson"',
        fix: 'remove "reson"; body takes only reason, actor',
      });
      // Nothing changed: the release still runs.
      expect(
        ((await (await op(h, "GET", `/v1/releases/${running}`)).json()) as { state: string }).state,
      ).toBe("running");
    },
  );

  it.skipIf(skip)(
    "an acceptance whose expiry is in the past: 422 naming expires_at, with a future example",
    async () => {
      const res = await op(h, "POST", `/v1/releases/${closed}/accept`, {
        by: "alice",
        expires_at: "2001-01-01T00:00:00Z",
      });
      expect(res.status).toBe(422);
      const e = (await res.json()) as ErrBody;
      expect(e.error.code).toBe("bad_expiry");
      expect(e.error.message).toMatch(
        /^\[engine\] body\.expires_at 2001-01-01T00:00:00\.000Z is in the past/,
      );
      expect(e.error.problems?.[0]?.path).toBe("body.expires_at");
      expect(e.error.problems?.[0]?.fix).toMatch(
        /^give a time after now, e\.g\. \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ .*leave body\.expires_at out/,
      );
      // No acceptance was recorded.
      const rec = (await (await op(h, "GET", `/v1/releases/${closed}/record`)).json()) as {
        acceptance?: unknown;
      };
      expect(rec.acceptance ?? null).toBeNull();
      const noBody = (await (
        await op(h, "POST", `/v1/releases/${closed}/accept`)
      ).json()) as ErrBody;
      plain(noBody);
      expect(noBody.error.problems?.[0]?.path).toBe("body.by");
    },
  );

  it.skipIf(skip)(
    "a YAML alias bomb sent as the recipe names line:column and says not to use aliases",
    async () => {
      const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
      for (let i = 0; i < 6; i++) {
        const prev = String.fromCharCode(97 + i);
        const cur = String.fromCharCode(98 + i);
        lines.push(`${cur}: &${cur} [${Array(10).fill(`*${prev}`).join(", ")}]`);
      }
      const res = await op(h, "POST", "/v1/releases", `${lines.join("\n")}\n`, {
        "content-type": "application/yaml",
      });
      expect(res.status).toBe(400);
      const e = (await res.json()) as ErrBody;
      expect(e.error.message).toMatch(
        /^\[recipe\] request body:\d+:\d+: the alias \*[a-g] expands into too much/,
      );
      expect(e.error.problems?.[0]?.fix).toMatch(/Do not use anchors and aliases .* at most 100/);
    },
  );
});
