/**
 * Reaches, on purpose, each piece of code scripts/build-worker.mjs leaves out of the Workers
 * bundle, and builds one ordinary query and one zod parse beside them. Bundled the way the
 * Worker is (test/serverless/worker-bundle.test.ts), so each stub's message can be read.
 */

import { Octokit } from "@octokit/core";
import { parser } from "@prometheus-io/lezer-promql";
import { Hono } from "hono";
import { CreateTableNode, Kysely, PostgresDialect, PostgresQueryCompiler, TableNode } from "kysely";
import pg from "pg";
import sasl from "pg/lib/crypto/sasl.js";
import { CST, Document, parse as parseYaml } from "yaml";
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
    // The compiler's method for a node only the schema builder makes, reached without it.
    compileCreateTable: () =>
      new PostgresQueryCompiler().compileQuery(CreateTableNode.create(TableNode.create("t")), {
        queryId: "q",
      }),
    toJSONSchema: () => z.toJSONSchema(z.string()),
    schemaToJSONSchema: () => z.string().toJSONSchema(),
    yamlStringify: () => new Document({ a: 1 }).toString(),
    graphql: () => new Octokit({ auth: "t" }).graphql("{ viewer { login } }"),
    // The recipe reader refuses `%YAML 1.1` before the YAML library would load its schema.
    yaml11: () => parseYaml("%YAML 1.1\n---\na: yes\n"),
    yamlJsonSchema: () => parseYaml("a: 1\n", { schema: "json" }),
    // The recipe reader classifies tokens with CST.tokenType and edits or prints no CST.
    yamlCstVisit: () =>
      CST.visit({ type: "document", offset: 0, start: [], value: undefined }, () => {}),
    // No engine source calls `.ipv6` (scripts/build-worker.mjs ZOD_METHODS).
    zodMethod: () => z.string().ipv6(),
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

/**
 * The stubs reached only inside a request or an authentication exchange, each message by name:
 * Hono's `app.mount()` (in the request it serves) and pg's SCRAM channel binding (a server
 * asking for `SCRAM-SHA-256-PLUS` on a socket that has a peer certificate).
 */
export async function reachUnreachableLater(): Promise<Record<string, string>> {
  const app = new Hono();
  app.mount("/other", () => new Response("other"));
  app.onError((e) => new Response(e.message, { status: 500 }));
  const mount = await (await app.request("/other/x")).text();
  const stream = { getPeerCertificate: () => ({ raw: new Uint8Array(8) }) };
  const session = sasl.startSession(["SCRAM-SHA-256-PLUS"], stream);
  const channelBinding = await sasl
    .continueSession(session, "pw", `r=${session.clientNonce}server,s=c2FsdA==,i=1`, stream)
    .then(
      () => "did not throw",
      (e: unknown) => (e instanceof Error ? e.message : String(e)),
    );
  return { mount, channelBinding };
}

/**
 * What the Worker keeps reading the same way beside the stubs: a PromQL parse tree (node names,
 * without the grammar's highlighting styles), a YAML document read to a value, pg's text
 * parsers (a timestamp, a bigint array) and pg's answer for a password file (none).
 */
export async function ordinaryReading(): Promise<{
  promqlTree: string;
  yaml: unknown;
  timestamp: string;
  bigints: unknown;
  pgpassPassword: unknown;
}> {
  const promqlTree = parser
    .parse('sum(rate(http_requests_total{job=~"a|b"}[5m])) by (le)')
    .toString();
  const yaml = parseYaml("a: [1, 2]\nb: {c: x}\n");
  const ts = pg.types.getTypeParser(1184, "text")("2026-12-07 00:00:00+00") as Date;
  const bigints = pg.types.getTypeParser(1016 as never, "text")("{1,2}");
  // No password given and none in the connection string: pg asks pgpass, as on a server that
  // wants one; on Workers there is no file, so none is found.
  const client = new pg.Client({ host: "127.0.0.1", user: "u", database: "d" });
  const pgpassPassword = await new Promise((resolve) =>
    (client as unknown as { _getPassword(cb: () => void): void })._getPassword(() =>
      resolve((client as unknown as { password: unknown }).password),
    ),
  );
  return { promqlTree, yaml, timestamp: ts.toISOString(), bigints, pgpassPassword };
}
