/**
 * The Workers bundles' sizes against their budgets (WORKER_BUNDLE_BUDGET_BYTES for the engine
 * Worker, DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES for the dashboard Worker, declared in
 * scripts/build-worker.mjs): every module written, bytes as uploaded. Needs no database.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  breakdown,
  buildWorker,
  DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES,
  WORKER_BUNDLE_BUDGET_BYTES,
  WORKER_ENTRIES,
} from "../../scripts/build-worker.mjs";

/** The dashboard's own modules (engine/src/http/dashboard/), as esbuild names its inputs. */
const DASHBOARD_MODULE = /^engine\/src\/http\/dashboard\//;

describe("Workers bundle size", () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-worker-bundle-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("the engine Worker is within its budget, counting every module the build writes, and holds no dashboard module", async () => {
    const built = await buildWorker(join(dir, "worker.mjs"));
    const written = readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
    expect(built.bytes).toBe(written);
    const text = readFileSync(join(dir, "worker.mjs"), "utf8");
    // zod's compiled object parser never runs on Workers (no `new Function`): not built in.
    expect(text).not.toContain("$ZodObjectJIT");
    // zod's helpers are bundled one by one: one no zod code in the bundle calls is left out.
    expect(text).not.toContain("Invalid hex string length");
    // The per-event app routes with hono/quick's routers, nothing to build at its first match.
    expect(text).toContain('"LinearRouter"');
    expect(text).not.toContain('"RegExpRouter"');
    const largest = breakdown(built.metafile)
      .slice(0, 8)
      .map((p) => `${p.name} ${p.bytes}`)
      .join(", ");
    expect(
      built.bytes,
      `the engine Worker's bundle is ${built.bytes} bytes, over its budget of ${WORKER_BUNDLE_BUDGET_BYTES} (largest: ${largest}; node scripts/build-worker.mjs --analyze)`,
    ).toBeLessThanOrEqual(WORKER_BUNDLE_BUDGET_BYTES);
    // The entry injects no dashboard (core.ts imports none): not one of its modules is bundled.
    const inputs = Object.keys(built.metafile.inputs);
    expect(inputs.some((p) => p.startsWith("engine/src/core.ts"))).toBe(true);
    expect(inputs.filter((p) => DASHBOARD_MODULE.test(p))).toEqual([]);
    expect(inputs.some((p) => /node_modules\/hono\/dist\/jsx\//.test(p))).toBe(false);
  }, 60_000);

  it("the dashboard Worker is within its budget, holds the dashboard and no API route", async () => {
    const built = await buildWorker(join(dir, "dashboard.mjs"), {
      entry: WORKER_ENTRIES.dashboard,
    });
    const inputs = Object.keys(built.metafile.inputs);
    expect(inputs).toContain("engine/src/http/dashboard/index.tsx");
    // The entry passes no API (core.ts and http/app.ts import none): no route module is bundled.
    expect(inputs.filter((p) => /^engine\/src\/http\/(routes\/|api-routes\.ts)/.test(p))).toEqual(
      [],
    );
    expect(
      built.bytes,
      `the dashboard Worker's bundle is ${built.bytes} bytes, over its budget of ${DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES} (node scripts/build-worker.mjs --dashboard --analyze)`,
    ).toBeLessThanOrEqual(DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES);
  }, 60_000);

  it("leaves out only code the Worker cannot reach, each stub failing by name if reached", async () => {
    const out = join(dir, "unreachable.mjs");
    await buildWorker(out, { entry: "test/workerd/unreachable-entry.ts" });
    const m = await import(pathToFileURL(out).href);
    const thrown: Record<string, string> = m.reachUnreachable();
    const later: Record<string, string> = await m.reachUnreachableLater();
    expect(Object.keys(thrown)).toHaveLength(16);
    expect(Object.keys(later)).toHaveLength(2);
    for (const [name, message] of Object.entries({ ...thrown, ...later })) {
      expect(message, name).toMatch(
        /^\[(store|engine)\] .* is not built into the Workers bundle|are not built into the Workers bundle/,
      );
    }
    expect(thrown.mergeInto).toContain("MERGE");
    expect(thrown.withSchema).toContain("withSchema");
    expect(thrown.toJSONSchema).toContain("toJSONSchema");
    expect(thrown.yamlStringify).toContain("YAML library's stringifier");
    expect(thrown.graphql).toContain("GraphQL");
    expect(thrown.compileCreateTable).toBe(
      "[store] Kysely's compiler for the nodes of the schema builder (db.schema) (visitCreateTable) is not built into the Workers bundle: the store's queries use none of them",
    );
    expect(thrown.yaml11).toContain("YAML 1.1 and JSON schemas");
    expect(thrown.yamlJsonSchema).toContain("YAML 1.1 and JSON schemas");
    expect(thrown.yamlCstVisit).toContain("YAML library's CST helpers");
    expect(thrown.zodMethod).toBe(
      "[engine] zod's .ipv6() is not built into the Workers bundle: no engine source calls it (scripts/build-worker.mjs)",
    );
    expect(later.mount).toContain("app.mount()");
    expect(later.channelBinding).toContain("SCRAM-SHA-256-PLUS");
    expect(m.ordinaryWork()).toEqual({
      sql: 'insert into "t" ("a", "b") values ($1, $2) on conflict ("a") do update set "b" = $3 returning "a"',
      parsed: { a: 1, b: "x" },
    });
  }, 60_000);

  it("reads PromQL, YAML and Postgres values as the unbundled libraries do, beside the stubs", async () => {
    const out = join(dir, "reading.mjs");
    await buildWorker(out, { entry: "test/workerd/unreachable-entry.ts" });
    const bundled = await (await import(pathToFileURL(out).href)).ordinaryReading();
    const { ordinaryReading } = await import("../workerd/unreachable-entry.ts");
    const { pgpassPassword, ...rest } = await ordinaryReading();
    // The PromQL tree without the highlighting styles, the YAML value without the stringifier,
    // pg's text parsers without the binary ones: the same as the full libraries give.
    expect(bundled).toEqual({ ...rest, pgpassPassword: null });
    expect(bundled.promqlTree).toMatch(/^PromQL\(AggregateExpr\(/);
    expect(pgpassPassword === null || typeof pgpassPassword === "string").toBe(true);
  }, 60_000);

  it("builds the PromQL parser at its first parse, not when the Worker loads", async () => {
    const out = join(dir, "lazy-promql.mjs");
    await buildWorker(out, {
      entry: "test/workerd/unreachable-entry.ts",
      alias: { "@lezer/lr": resolve("test/workerd/counting-lezer-lr.ts") },
    });
    const counter = globalThis as { batonLezerParsersBuilt?: number };
    delete counter.batonLezerParsersBuilt;
    const m = await import(pathToFileURL(out).href);
    expect(counter.batonLezerParsersBuilt ?? 0).toBe(0);
    const first = await m.ordinaryReading();
    expect(first.promqlTree).toMatch(/^PromQL\(AggregateExpr\(/);
    expect(counter.batonLezerParsersBuilt).toBe(1);
    await m.ordinaryReading();
    expect(counter.batonLezerParsersBuilt).toBe(1);
  }, 60_000);
});
