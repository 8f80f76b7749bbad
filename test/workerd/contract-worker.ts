/**
 * A worker that runs the store contract (test/contract/store.contract.ts) inside workerd
 * against Postgres over TCP sockets (pg + pg-cloudflare), the way the Workers entry uses it.
 * Bundled by scripts/build-worker.mjs with `vitest` aliased to mini-vitest.ts.
 * `GET /list` → the tests' names; `GET /run?i=N` → runs test N in that request (its stores
 * open and close inside it: Workers share no connection between requests) and answers
 * `{"name","ok","error"?}`.
 */
import pg from "pg";
import { PostgresStore } from "../../engine/src/adapters/postgres/postgres-store.ts";
import type { Store } from "../../engine/src/ports/store.ts";
import { storeContract } from "../contract/store.contract.ts";
import { collected, expect } from "./mini-vitest.ts";

let databaseUrl = "";

async function admin(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

function schemaName(): string {
  const b = crypto.getRandomValues(new Uint8Array(6));
  return `baton_wd_${[...b].map((x) => x.toString(16).padStart(2, "0")).join("")}`;
}

storeContract("postgres in workerd", async () => {
  const schema = schemaName();
  const open = async (connectionString = databaseUrl) => {
    const s = new PostgresStore({ connectionString, schema, max: 4 });
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
      const role = `${schema}_ro`;
      await admin(`CREATE ROLE ${role} LOGIN`);
      await admin(`ALTER ROLE ${role} SET default_transaction_read_only = on`);
      await admin(`GRANT ALL ON SCHEMA ${schema} TO ${role}`);
      await admin(`GRANT ALL ON ALL TABLES IN SCHEMA ${schema} TO ${role}`);
      roles.push(role);
      const u = new URL(databaseUrl);
      u.username = role;
      const s = new PostgresStore({ connectionString: u.toString(), schema, max: 2 });
      stores.push(s);
      return s;
    },
    dispose: async () => {
      for (const s of stores) await s.close().catch(() => {});
      await admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      for (const r of roles) await admin(`DROP ROLE IF EXISTS ${r}`);
    },
  };
});

export default {
  async fetch(req: Request, env: { DATABASE_URL: string }): Promise<Response> {
    databaseUrl = env.DATABASE_URL;
    const url = new URL(req.url);
    if (url.pathname === "/list") return Response.json(collected.map((t) => t.name));
    if (url.pathname === "/selfcheck") {
      // The assertions bite here too: a false one throws, a resolving `.rejects` fails.
      const threw = async (f: () => unknown) => {
        try {
          await f();
          return false;
        } catch {
          return true;
        }
      };
      return Response.json({
        toBe: await threw(() => expect(1).toBe(2)),
        toEqual: await threw(() => expect({ a: [1] }).toEqual({ a: [2] })),
        rejects: await threw(() => expect(Promise.resolve(1)).rejects.toThrow()),
        passes: !(await threw(() => expect({ a: [1] }).toEqual({ a: [1] }))),
      });
    }
    const t = collected[Number(url.searchParams.get("i"))];
    if (!t) return Response.json({ error: "no such test" }, { status: 404 });
    try {
      await t.run();
      return Response.json({ name: t.name, ok: true });
    } catch (e) {
      const err = e as Error;
      return Response.json({
        name: t.name,
        ok: false,
        error: `${err?.name}: ${err?.message}\n${String(err?.stack ?? "").slice(0, 1500)}`,
      });
    }
  },
};
