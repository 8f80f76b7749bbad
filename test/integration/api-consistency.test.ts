/**
 * Inconsistencies a fresh-user review of the HTTP API found, on both stores:
 * - a recipe sent with no content-type: YAML is read as YAML (the body does not start with
 *   `{` or `[`), JSON as JSON; a body that parses as neither, or a content type the engine does
 *   not read (curl -d's form type, text/plain), says which header to send;
 * - "body too complex" (brackets nested deeper than 64, a YAML alias bomb), as YAML, JSON or
 *   with no content-type: one answer, 400 `bad_request` with one problem at `body` naming
 *   line:column and the fix;
 * - an unknown query parameter is refused 400 on every release route (`query.<name>`, the
 *   parameters the route takes in the fix), GET /v1/releases/:id and …/record included, while
 *   what the CLI sends still answers 200.
 * Every refusal writes nothing: no release, no control-plane call, no state change.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify as toYaml } from "yaml";
import {
  createRelease,
  type Harness,
  makeHarness,
  OPERATOR,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

// Several releases of one recipe share the lanes here; lane claims are tested in lane-claims.
process.env.BATON_EXCLUSIVE_LANES = "off";

interface ErrBody {
  error: {
    code: string;
    message: string;
    problems?: { path: string; message: string; fix: string }[];
  };
}

/** POST /v1/releases with `text` as bytes: no content-type header at all (a string gets text/plain). */
function postRaw(h: Harness, text: string, headers: Record<string, string> = {}, query = "") {
  return h.engine.app.request(`/v1/releases${query}`, {
    method: "POST",
    headers: { authorization: `Bearer ${OPERATOR}`, ...headers },
    body: new TextEncoder().encode(text),
  });
}

async function releaseCount(h: Harness): Promise<number> {
  const res = await op(h, "GET", "/v1/releases?limit=200");
  expect(res.status).toBe(200);
  return ((await res.json()) as { releases: unknown[] }).releases.length;
}

async function refused(res: Response, status: number): Promise<ErrBody> {
  const text = await res.text();
  expect(res.status, text.slice(0, 400)).toBe(status);
  expect(text).not.toMatch(/\n\s+at |internal error/);
  return JSON.parse(text) as ErrBody;
}

const ALIAS_BOMB = (() => {
  const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
  for (let i = 0; i < 6; i++) {
    const prev = String.fromCharCode(97 + i);
    const cur = String.fromCharCode(98 + i);
    lines.push(`${cur}: &${cur} [${Array(10).fill(`*${prev}`).join(", ")}]`);
  }
  return `${lines.join("\n")}\n`;
})();
const DEEP_YAML = `name: x\nmodel: ${"[".repeat(10_000)}\n`;
const DEEP_JSON = `{"name": "x", "model": ${"[".repeat(10_000)}}`;

describe.each(STORE_KINDS)("API consistency on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness;
  let id: string;
  beforeAll(async () => {
    if (skip) return;
    h = await makeHarness({ kind, seed: recipe(2) });
    id = await createRelease(h, recipe(2));
  });
  afterAll(async () => {
    await h?.close();
  });

  describe("a recipe with no content-type", () => {
    it.skipIf(skip)(
      "YAML is read as YAML and JSON as JSON: 201, the same manifest as with the header",
      async () => {
        const yaml = await postRaw(h, toYaml(recipe(2)), {}, "?start=false");
        const y = (await yaml.json()) as { id: string; manifest_digest: string };
        expect(yaml.status, JSON.stringify(y)).toBe(201);
        const json = await postRaw(h, JSON.stringify(recipe(2)), {}, "?start=false");
        const j = (await json.json()) as { id: string; manifest_digest: string };
        expect(json.status, JSON.stringify(j)).toBe(201);
        const typed = await op(h, "POST", "/v1/releases?start=false", toYaml(recipe(2)), {
          "content-type": "application/yaml",
        });
        const t = (await typed.json()) as { manifest_digest: string };
        expect(y.manifest_digest).toBe(t.manifest_digest);
        expect(j.manifest_digest).toBe(t.manifest_digest);
        // Stored: the release reads back with the recipe's model.
        const rec = await op(h, "GET", `/v1/releases/${y.id}`);
        expect(rec.status).toBe(200);
        const r = (await rec.json()) as { state: string; manifest: { model: string } };
        expect(r.state).toBe("pending");
        expect(r.manifest.model).toBe(recipe(2).model);
      },
    );

    it.skipIf(skip)(
      "a body that is neither: 400 naming how it was read and the header to send; nothing written",
      async () => {
        const before = await releaseCount(h);
        const calls = h.cp.calls.length;
        const y = await refused(await postRaw(h, "name: [unclosed\nmodel: m\n"), 400);
        expect(y.error.code).toBe("bad_request");
        expect(y.error.problems?.[0]?.path).toBe("body");
        expect(y.error.problems?.[0]?.message).toMatch(/is not valid YAML at line \d+/);
        expect(y.error.problems?.[0]?.message).toMatch(/no content-type/);
        expect(y.error.problems?.[0]?.fix).toMatch(/content-type: application\/yaml/);
        expect(y.error.problems?.[0]?.fix).toMatch(/content-type: application\/json/);

        const j = await refused(await postRaw(h, '{"name": "x",'), 400);
        expect(j.error.problems?.[0]?.message).toMatch(/is not valid JSON/);
        expect(j.error.problems?.[0]?.message).toMatch(/no content-type.*starts with \{/);
        expect(j.error.problems?.[0]?.fix).toMatch(/content-type: application\/json/);

        expect(await releaseCount(h)).toBe(before);
        expect(h.cp.calls.length).toBe(calls);
      },
    );

    it.skipIf(skip)(
      "a content type the engine does not read names the header to send (and curl's default)",
      async () => {
        const plain = await refused(
          await op(h, "POST", "/v1/releases", toYaml(recipe(2)), { "content-type": "text/plain" }),
          400,
        );
        expect(plain.error.problems?.[0]?.path).toBe("content-type");
        expect(plain.error.problems?.[0]?.fix).toMatch(/content-type: application\/yaml/);
        const form = await refused(
          await op(h, "POST", "/v1/releases", toYaml(recipe(2)), {
            "content-type": "application/x-www-form-urlencoded",
          }),
          400,
        );
        expect(form.error.problems?.[0]?.fix).toMatch(/curl/);
        expect(form.error.problems?.[0]?.fix).toMatch(/-H 'content-type: application\/yaml'/);
      },
    );
  });

  describe("a body too complex", () => {
    const cases: [string, string, Record<string, string>][] = [
      ["deep YAML", DEEP_YAML, { "content-type": "application/yaml" }],
      ["deep JSON", DEEP_JSON, { "content-type": "application/json" }],
      ["deep YAML, no content-type", DEEP_YAML, {}],
      ["deep JSON, no content-type", DEEP_JSON, {}],
      ["a YAML alias bomb", ALIAS_BOMB, { "content-type": "application/yaml" }],
      ["a YAML alias bomb, no content-type", ALIAS_BOMB, {}],
    ];
    it.skipIf(skip)(
      "nesting and alias bombs: one answer, 400 bad_request at body with line:column and a fix; nothing written",
      async () => {
        const before = await releaseCount(h);
        const calls = h.cp.calls.length;
        for (const [what, text, headers] of cases) {
          const e = await refused(await postRaw(h, text, headers), 400);
          expect(e.error.code, what).toBe("bad_request");
          expect(e.error.message, what).toMatch(/^\[recipe\] request body:\d+:\d+: /);
          expect(e.error.message, what).toMatch(/nested deeper than 64|expands into too much/);
          expect(e.error.problems?.length, what).toBe(1);
          const p = e.error.problems?.[0];
          expect(p?.path, what).toBe("body");
          expect(p?.message, what).toBe(e.error.message);
          expect(p?.fix.length, what).toBeGreaterThan(20);
        }
        // The signed-start form (recipe as text inside JSON) answers the same.
        const signed = await refused(
          await op(h, "POST", "/v1/releases", { recipe: ALIAS_BOMB }),
          400,
        );
        expect(signed.error.problems?.[0]?.path).toBe("body.recipe");
        expect(await releaseCount(h)).toBe(before);
        expect(h.cp.calls.length).toBe(calls);
        expect((await h.engine.app.request("/healthz")).status).toBe(200);
      },
    );
  });

  describe("unknown query parameters", () => {
    it.skipIf(skip)(
      "GET /v1/releases/:id and …/record: 400 naming the parameter; the route takes none",
      async () => {
        for (const url of [`/v1/releases/${id}?verbose=1`, `/v1/releases/${id}/record?x=`]) {
          const e = await refused(await op(h, "GET", url), 400);
          expect(e.error.code).toBe("bad_request");
          const name = url.includes("verbose") ? "verbose" : "x";
          expect(e.error.problems?.[0]?.path).toBe(`query.${name}`);
          expect(e.error.message).toContain(`"${name}"`);
          expect(e.error.problems?.[0]?.fix).toMatch(/takes no query parameters/);
        }
        // Paging belongs to …/history: the fix says so.
        const paged = await refused(await op(h, "GET", `/v1/releases/${id}?limit=5`), 400);
        expect(paged.error.problems?.[0]?.fix).toMatch(/\/history\?cursor=.*limit=/);
        // What the CLI and dashboard send still answers.
        expect((await op(h, "GET", `/v1/releases/${id}`)).status).toBe(200);
        expect((await op(h, "GET", `/v1/releases/${id}/record`)).status).toBe(200);
      },
    );

    it.skipIf(skip)(
      "every route that takes some names them all; an operator verb changes nothing",
      async () => {
        const cases: [string, string, string, RegExp][] = [
          ["GET", "/v1/releases?page=2", "page", /takes only state, limit, before/],
          ["GET", `/v1/releases/${id}/history?offset=3`, "offset", /takes only cursor, limit/],
          ["POST", "/v1/releases?dry_run=1", "dry_run", /takes only start, exposure/],
          ["POST", `/v1/releases/${id}/pause?reason=x`, "reason", /takes no query parameters/],
          ["POST", `/v1/releases/${id}/abort?force=1`, "force", /takes no query parameters/],
        ];
        const before = await releaseCount(h);
        for (const [method, url, name, fix] of cases) {
          const body = method === "POST" ? (url.includes("?dry") ? recipe(2) : {}) : undefined;
          const e = await refused(await op(h, method, url, body), 400);
          expect(e.error.problems?.[0]?.path, url).toBe(`query.${name}`);
          expect(e.error.problems?.[0]?.message, url).toMatch(/is not a parameter of/);
          expect(e.error.problems?.[0]?.fix, url).toMatch(fix);
        }
        expect(await releaseCount(h)).toBe(before);
        const rec = (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as {
          state: string;
        };
        expect(rec.state).toBe("running");
        // The CLI's list query still answers.
        expect((await op(h, "GET", "/v1/releases?state=running&limit=5")).status).toBe(200);
      },
    );
  });
});
