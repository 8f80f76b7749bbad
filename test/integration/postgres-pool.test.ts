/**
 * The store's `pg` pool on a real Postgres server (BATON_TEST_DATABASE_URL): every connection
 * starts with generic plans and the store's schema, set in the startup message, so pg never
 * sees a query sent to a client that is still busy (which it warns "will be removed in
 * pg@9.0"). pg gives that warning once per process, so this file's first connections are the
 * ones watched.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, sessionOptions } from "../../engine/src/adapters/postgres/pool.ts";
import { pgAdmin, testSchemaName } from "../contract/postgres-harness.ts";

const url = process.env.BATON_TEST_DATABASE_URL;

describe("session options", () => {
  it("generic plans first, then the connection string's options, then the schema", () => {
    expect(sessionOptions(undefined, undefined)).toBe("-c plan_cache_mode=force_generic_plan");
    expect(sessionOptions("-c statement_timeout=5000", "s1")).toBe(
      "-c plan_cache_mode=force_generic_plan -c statement_timeout=5000 -c search_path=s1",
    );
    expect(sessionOptions("", "s1")).toBe(
      "-c plan_cache_mode=force_generic_plan -c search_path=s1",
    );
  });
});

describe.skipIf(!url && process.env.CI !== "true")("the store's Postgres pool", () => {
  const connectionString = url as string;
  const schema = testSchemaName();
  const warnings: Error[] = [];
  const onWarning = (w: Error) => warnings.push(w);

  beforeAll(async () => {
    process.on("warning", onWarning);
    await pgAdmin(connectionString, `CREATE SCHEMA ${schema}`);
  });
  afterAll(async () => {
    process.off("warning", onWarning);
    await pgAdmin(connectionString, `DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  });

  it("new connections have generic plans and the schema, and pg warns of nothing", async () => {
    const pool = createPool({ connectionString, schema, max: 3 });
    try {
      // Three queries at once on an empty pool: three new connections, each used at once.
      const [plans, path, again] = await Promise.all([
        pool.query("SHOW plan_cache_mode"),
        pool.query("SHOW search_path"),
        pool.query("SHOW plan_cache_mode"),
      ]);
      expect(pool.totalCount).toBe(3);
      expect(plans.rows).toEqual([{ plan_cache_mode: "force_generic_plan" }]);
      expect(again.rows).toEqual([{ plan_cache_mode: "force_generic_plan" }]);
      expect(path.rows).toEqual([{ search_path: schema }]);
    } finally {
      await pool.end();
    }
    // process.emitWarning delivers its 'warning' event on the next tick.
    await new Promise((r) => setImmediate(r));
    expect(warnings.map((w) => `${w.name}: ${w.message}`)).toEqual([]);
  });

  it("keeps the connection string's own options beside the store's", async () => {
    const withOptions = `${connectionString}${connectionString.includes("?") ? "&" : "?"}options=${encodeURIComponent("-c statement_timeout=12345")}`;
    const pool = createPool({ connectionString: withOptions, schema, max: 1 });
    try {
      const { rows } = await pool.query(
        "SELECT current_setting('statement_timeout') AS timeout, current_setting('plan_cache_mode') AS plans, current_setting('search_path') AS path",
      );
      expect(rows).toEqual([{ timeout: "12345ms", plans: "force_generic_plan", path: schema }]);
    } finally {
      await pool.end();
    }
  });
});
