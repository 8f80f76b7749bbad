/**
 * The Workers bundle's Hono is the `hono/quick` preset's (scripts/build-worker.mjs
 * HONO_PER_EVENT): its routers must answer every route of the engine's app, the dashboard's
 * included, as the default preset's do on the Node server. Each route's path, with its
 * parameters filled in, is matched by both router sets over the same routes in the same order.
 */
import { rmSync } from "node:fs";
import type { Router } from "hono/router";
import { LinearRouter } from "hono/router/linear-router";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { SmartRouter } from "hono/router/smart-router";
import { TrieRouter } from "hono/router/trie-router";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, makeHarness } from "../integration/service-harness.ts";

/** A concrete path for a route pattern: each `:param` (with or without a pattern) a value. */
function samplePath(pattern: string): string {
  return pattern
    .replace(/:([A-Za-z_]+)\{[^}]*\}/g, "p1")
    .replace(/:([A-Za-z_]+)\??/g, (_m, name: string) => `${name}-1`)
    .replace(/\/\*$/, "/rest")
    .replace(/^\*$/, "/any");
}

/** What a router set matches for `method path`: the routes' indexes and their parameters. */
function matched(router: Router<number>, method: string, path: string): unknown {
  const [handlers, stash] = router.match(method, path) as [
    [number, Record<string, unknown>][],
    unknown[] | undefined,
  ];
  return handlers.map(([i, params]) => [
    i,
    stash
      ? Object.fromEntries(Object.entries(params).map(([k, v]) => [k, stash[v as number]]))
      : params,
  ]);
}

describe("the Workers bundle's Hono routers", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness();
  });
  afterAll(async () => {
    await h.close();
    rmSync(h.dir, { recursive: true, force: true });
  });

  it("match every route of the engine's app as the default routers do", () => {
    const routes = h.engine.app.routes;
    expect(routes.length).toBeGreaterThan(50);
    const usual = new SmartRouter<number>({ routers: [new RegExpRouter(), new TrieRouter()] });
    const quick = new SmartRouter<number>({ routers: [new LinearRouter(), new TrieRouter()] });
    routes.forEach((r, i) => {
      usual.add(r.method, r.path, i);
      quick.add(r.method, r.path, i);
    });
    const paths = new Set([...routes.map((r) => samplePath(r.path)), "/nothing/here", "/v1/x"]);
    let compared = 0;
    for (const path of paths) {
      for (const method of ["GET", "POST", "HEAD", "DELETE"]) {
        expect(matched(quick, method, path), `${method} ${path}`).toEqual(
          matched(usual, method, path),
        );
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(200);
  });
});
