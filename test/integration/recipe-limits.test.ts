/**
 * A recipe nested deeper than the limit (100,000 `[`, a 200 KB file) gets a
 * clear problem, never an out-of-memory crash: 400 `bad_request` naming the body from the engine
 * (which stays up; the same answer as an alias bomb, test/integration/api-consistency), exit 1
 * from `baton check` (never 134).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { baton } from "../cli/run-baton.ts";
import {
  type Harness,
  makeHarness,
  OPERATOR,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const DEEP_YAML = `name: x\nmodel: ${"[".repeat(100_000)}\n`;
const DEEP_JSON = `{"name": "x", "model": ${"[".repeat(100_000)}}`;
const dir = mkdtempSync(path.join(tmpdir(), "baton-deep-"));
let h: Harness | null = null;
afterAll(async () => {
  await h?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("deeply nested recipes", () => {
  it("the engine answers 400 naming the nesting, for YAML and JSON, and stays up", async () => {
    h = await makeHarness({ seed: recipe(2) });
    for (const [text, type] of [
      [DEEP_YAML, "application/yaml"],
      [DEEP_JSON, "application/json"],
    ] as const) {
      const res = await h.engine.app.request("/v1/releases", {
        method: "POST",
        headers: { authorization: `Bearer ${OPERATOR}`, "content-type": type },
        body: text,
      });
      expect(res.status, type).toBe(400);
      const b = (await res.json()) as {
        error: { code: string; message: string; problems: { path: string; fix: string }[] };
      };
      expect(b.error.code).toBe("bad_request");
      expect(b.error.problems[0]?.path).toBe("body");
      expect(b.error.message).toMatch(/nest(s|ed|ing) deeper than 64/);
      expect(b.error.problems[0]?.fix).toBeTruthy();
    }
    expect((await h.engine.app.request("/healthz")).status).toBe(200);
  });

  it("baton check lists the problem and exits 1", async () => {
    const file = path.join(dir, "deep.yaml");
    writeFileSync(file, DEEP_YAML);
    const r = await baton(["check", file]);
    expect(r.code).toBe(1);
    expect(r.stdout + r.stderr).toMatch(/nest(s|ed|ing) deeper than 64/);
    expect(r.stdout + r.stderr).not.toMatch(/FATAL|out of memory|\n\s+at /);
  }, 60_000);
});

describe("duplicate keys", () => {
  it("a JSON recipe with a key twice is 400 naming the key", async () => {
    h ??= await makeHarness({ seed: recipe(2) });
    const text = JSON.stringify(recipe(2)).replace(/^\{/, '{"image":"first",');
    const res = await h.engine.app.request("/v1/releases", {
      method: "POST",
      headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/json" },
      body: text,
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/duplicate key \\"image\\"/);
  });

  it("a YAML recipe with a key twice is 400 naming the key and its line", async () => {
    h ??= await makeHarness({ seed: recipe(2) });
    const text = `model: other\n${stringify(recipe(2))}`;
    const res = await h.engine.app.request("/v1/releases", {
      method: "POST",
      headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/yaml" },
      body: text,
    });
    expect(res.status).toBe(400);
    const body = await res.text();
    expect(body).toMatch(/duplicate key \\"model\\" at line \d+/);
    expect(body).not.toContain("Map keys must be unique");
  });
});

describe.each(STORE_KINDS)("recipes too complex to read, on %s", (kind) => {
  if (skipStore(kind)) {
    it.skip("Postgres: BATON_TEST_DATABASE_URL is not set", () => {});
    return;
  }
  const post = (g: Harness, path: string, body: string, type: string) =>
    g.engine.app.request(path, {
      method: "POST",
      headers: { authorization: `Bearer ${OPERATOR}`, "content-type": type },
      body,
    });

  it('"- " and "? " x 1000 (2 KB): 400 naming the nesting limit, as YAML, wrapped, and twice; the engine stays up and writes nothing', async () => {
    const g = await makeHarness({ kind, seed: recipe(2) });
    try {
      for (const text of [`${"- ".repeat(1000)}x`, `${"? ".repeat(1000)}x`]) {
        for (let i = 0; i < 2; i++) {
          for (const [body, type, path] of [
            [text, "application/yaml", "body"],
            [JSON.stringify({ recipe: text }), "application/json", "body.recipe"],
          ] as const) {
            const res = await post(g, "/v1/releases", body, type);
            expect(res.status).toBe(400);
            const b = (await res.json()) as {
              error: { message: string; problems: { path: string }[] };
            };
            expect(b.error.message).toMatch(/too complex to read: .*nested deeper than 64 levels/);
            expect(b.error.problems[0]?.path).toBe(path);
          }
        }
      }
      expect(await g.store.listReleases({ limit: 10 })).toEqual([]);
      expect((await g.engine.app.request("/healthz")).status).toBe(200);
    } finally {
      await g.close();
    }
  });

  it("/roll-forward of a release that does not exist: 404 before the body is read", async () => {
    const g = await makeHarness({ kind, seed: recipe(2) });
    try {
      const res = await post(
        g,
        "/v1/releases/r404/roll-forward",
        `${"? ".repeat(1000)}x`,
        "application/yaml",
      );
      expect(res.status).toBe(404);
      expect(await res.text()).toMatch(/release r404 does not exist/);
    } finally {
      await g.close();
    }
  });
});
