/**
 * Reaches, on purpose, each piece of code scripts/build-worker.mjs leaves out of the Workers
 * bundle, and builds one ordinary query and one zod parse beside them. Bundled the way the
 * Worker is (test/serverless/worker-bundle.test.ts), so each stub's message can be read.
 */
import { Kysely, PostgresDialect } from "kysely";
import * as z from "zod";

/** What each unreachable piece threw when reached (the message), by name. */
export function reachUnreachable(): Record<string, string> {
  // Never connects: only builds and compiles queries.
  const db = new Kysely<Record<string, { a: number }>>({
    dialect: new PostgresDialect({ pool: {} as never }),
  });
  const tries: Record<string, () => unknown> = {
    schema: () => db.schema,
    withSchema: () => db.withSchema("s"),
    mergeInto: () => db.mergeInto("t"),
    introspection: () => db.introspection,
    case: () =>
      db.selectFrom("t").select((eb) => eb.case().when("a", "=", 1).then(2).end().as("c")),
    jsonPath: () =>
      db.selectFrom("t").select((eb) =>
        eb
          .ref("a", "->")
          .key("k" as never)
          .as("j"),
      ),
    over: () => db.selectFrom("t").select((eb) => eb.fn.count("a").over().as("n")),
    toJSONSchema: () => z.toJSONSchema(z.string()),
    schemaToJSONSchema: () => z.string().toJSONSchema(),
  };
  const out: Record<string, string> = {};
  for (const [name, run] of Object.entries(tries)) {
    try {
      run();
      out[name] = "did not throw";
    } catch (e) {
      out[name] = e instanceof Error ? e.message : String(e);
    }
  }
  return out;
}

/** An ordinary query's SQL and an ordinary zod parse: what the Worker does keep working. */
export function ordinaryWork(): { sql: string; parsed: unknown } {
  const db = new Kysely<Record<string, { a: number; b: string }>>({
    dialect: new PostgresDialect({ pool: {} as never }),
  });
  const q = db
    .insertInto("t")
    .values({ a: 1, b: "x" })
    .onConflict((oc) => oc.column("a").doUpdateSet({ b: "y" }))
    .returning("a")
    .compile();
  const parsed = z.object({ a: z.number().int(), b: z.string().min(1) }).parse({ a: 1, b: "x" });
  return { sql: q.sql, parsed };
}
