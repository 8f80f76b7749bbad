/**
 * A worker that runs the store contract (test/contract/store.contract.ts) inside workerd
 * against Postgres over TCP sockets (pg + pg-cloudflare), the way the Workers entry uses it.
 * Bundled by scripts/build-worker.mjs with `vitest` aliased to mini-vitest.ts.
 * `GET /list` → the tests' names; `GET /run?i=N` → runs test N in that request (its stores
 * open and close inside it: Workers share no connection between requests) and answers
 * `{"name","ok","error"?}`.
 */
import { postgresStoreFactory } from "../contract/postgres-harness.ts";
import { storeContract } from "../contract/store.contract.ts";
import { collected, expect } from "./mini-vitest.ts";

let databaseUrl = "";

storeContract(
  "postgres in workerd",
  postgresStoreFactory(() => databaseUrl, "baton_wd_"),
);

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
