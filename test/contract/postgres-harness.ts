/**
 * The Postgres store harness of the store contract, shared by Node
 * (`test/integration/store.postgres.test.ts`) and workerd (`test/workerd/contract-worker.ts`):
 * each harness gets its own schema (search_path), dropped with any role it made, so parallel
 * test files never collide. Uses only `pg` and Web Crypto, so it bundles for workerd.
 */
import pg from "pg";
import { PostgresStore } from "../../engine/src/adapters/postgres/postgres-store.ts";
import type { Store } from "../../engine/src/ports/store.ts";
import type { StoreFactory } from "./store.contract.ts";

/** Runs one statement on its own connection (schema and role set-up and clean-up). */
export async function pgAdmin(connectionString: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** A fresh schema name: `prefix` then 12 hex digits. */
export function testSchemaName(prefix = "baton_test_"): string {
  const b = crypto.getRandomValues(new Uint8Array(6));
  return `${prefix}${[...b].map((x) => x.toString(16).padStart(2, "0")).join("")}`;
}

/**
 * A store-contract factory on the Postgres server at `connectionString()` (read per harness,
 * so a worker can learn it from its first request). `schemaPrefix` names the schemas it makes.
 */
export function postgresStoreFactory(
  connectionString: () => string,
  schemaPrefix = "baton_test_",
): StoreFactory {
  return async () => {
    const url = connectionString();
    const schema = testSchemaName(schemaPrefix);
    const open = async () => {
      const s = new PostgresStore({ connectionString: url, schema, max: 4 });
      await s.migrate();
      return s;
    };
    const stores: Store[] = [await open()];
    const roles: string[] = [];
    return {
      store: stores[0]!,
      openPeer: async () => {
        const s = await open();
        stores.push(s);
        return s;
      },
      openReadOnlyPeer: async () => {
        // A role whose every transaction is read-only, with full rights on the schema: its
        // writes fail as a read-only (or full) database's do, not for want of a grant.
        const role = `${schema}_ro`;
        await pgAdmin(url, `CREATE ROLE ${role} LOGIN`);
        await pgAdmin(url, `ALTER ROLE ${role} SET default_transaction_read_only = on`);
        await pgAdmin(url, `GRANT ALL ON SCHEMA ${schema} TO ${role}`);
        await pgAdmin(url, `GRANT ALL ON ALL TABLES IN SCHEMA ${schema} TO ${role}`);
        roles.push(role);
        const u = new URL(url);
        u.username = role;
        const s = new PostgresStore({ connectionString: u.toString(), schema, max: 2 });
        stores.push(s);
        return s;
      },
      dispose: async () => {
        for (const s of stores) await s.close().catch(() => {});
        await pgAdmin(url, `DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        for (const r of roles) await pgAdmin(url, `DROP ROLE IF EXISTS ${r}`);
      },
    };
  };
}
