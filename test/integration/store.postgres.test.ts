/**
 * The store contract on a real Postgres server (BATON_TEST_DATABASE_URL). Each test gets its
 * own schema (search_path), dropped afterwards, so parallel test files never collide.
 * Without the variable the suite is skipped with a message, unless CI=true (then it fails).
 */
import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { postgresMigrations } from "../../engine/src/adapters/postgres/migrations.ts";
import { openPostgresStore } from "../../engine/src/adapters/postgres/postgres-store.ts";
import { openStore } from "../../engine/src/adapters/store-factory.ts";
import { pgAdmin, postgresStoreFactory, testSchemaName } from "../contract/postgres-harness.ts";
import { makeRelease, storeContract } from "../contract/store.contract.ts";

const url = process.env.BATON_TEST_DATABASE_URL;

if (!url) {
  const why = "BATON_TEST_DATABASE_URL is not set; start one with scripts/ci/pg-start.sh";
  if (process.env.CI === "true") {
    it("Postgres store contract", () => {
      throw new Error(`[test] ${why} (required when CI=true)`);
    });
  } else {
    it.skip(`Postgres store contract skipped: ${why}`, () => {});
  }
} else {
  const connectionString = url;

  const admin = (statement: string) => pgAdmin(connectionString, statement);

  storeContract(
    "postgres",
    postgresStoreFactory(() => connectionString),
  );

  describe("Postgres specifics", () => {
    it("column types: checks and raw callback as text (verbatim), doc as json, effects as jsonb", async () => {
      const schema = testSchemaName();
      const store = openPostgresStore({ connectionString, schema });
      try {
        await store.migrate();
        const client = new pg.Client({ connectionString });
        await client.connect();
        const { rows } = await client.query(
          `SELECT table_name || '.' || column_name AS col, data_type FROM information_schema.columns
           WHERE table_schema = $1 AND column_name IN ('doc', 'checks', 'raw_callback', 'effect', 'data')
           ORDER BY 1`,
          [schema],
        );
        await client.end();
        expect(Object.fromEntries(rows.map((r) => [r.col, r.data_type]))).toEqual({
          "attempt_results.checks": "text",
          "attempt_results.raw_callback": "text",
          "gate_evidence.doc": "jsonb",
          "history.data": "jsonb",
          "outbox.effect": "jsonb",
          "releases.doc": "json",
        });
      } finally {
        await store.close();
        await admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      }
    });

    it("engines migrating the same empty schema together apply each migration once", async () => {
      const schema = testSchemaName();
      const stores = [1, 2, 3].map(() => openPostgresStore({ connectionString, schema, max: 2 }));
      try {
        await Promise.all(stores.map((s) => s.migrate()));
        const client = new pg.Client({ connectionString });
        await client.connect();
        const { rows } = await client.query(`SELECT name FROM ${schema}.baton_migration`);
        await client.end();
        // Each migration once, in order (the list grows; its names come from the adapter).
        expect(rows).toEqual(
          Object.keys(postgresMigrations)
            .sort()
            .map((name) => ({ name })),
        );
      } finally {
        for (const s of stores) await s.close();
        await admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      }
    });

    it("migrating an up-to-date schema is one read: no transaction, no lock", async () => {
      const schema = testSchemaName();
      const store = openPostgresStore({ connectionString, schema, max: 1 });
      const query = vi.spyOn(pg.Client.prototype, "query");
      try {
        await store.migrate();
        expect(query.mock.calls.length).toBeGreaterThan(3); // the locked path, creating it all
        query.mockClear();
        await store.migrate();
        expect(
          query.mock.calls.map((c) => String((c[0] as { text?: string }).text ?? c[0])),
        ).toEqual([expect.stringMatching(/^select name from baton_migration$/i)]);
      } finally {
        query.mockRestore();
        await store.close();
        await admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      }
    });

    it("openStore with a postgres:// DATABASE_URL selects Postgres", async () => {
      const schema = testSchemaName();
      const withSchema = `${connectionString}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
      await admin(`CREATE SCHEMA ${schema}`);
      try {
        const store = await openStore({ databaseUrl: withSchema, dataDir: "/nonexistent" });
        await store.createRelease(makeRelease(5), [], [], 0);
        expect(await store.nextReleaseNumber()).toBe(1);
        await store.close();
        const client = new pg.Client({ connectionString });
        await client.connect();
        const { rows } = await client.query(`SELECT id FROM ${schema}.releases`);
        await client.end();
        expect(rows).toEqual([{ id: "r5" }]);
      } finally {
        await admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      }
    });
  });
}
