/**
 * A `pg` Pool configured for the store: int8 columns (epoch ms, ids, counts) parsed to JS
 * numbers (safe up to 2^53, i.e. for epoch ms until year 287396), generic plans for the
 * store's prepared statements, and an optional schema put first on the search path (tests use
 * one schema per suite so parallel files do not collide).
 */
import pg from "pg";
import { parse } from "pg-connection-string";

const INT8_OID = 20;

export interface PoolOptions {
  /** `postgres://user:pass@host:port/db`. */
  connectionString: string;
  /** Schema for every table; created by `migrate()` if missing. Default: the server's search path. */
  schema?: string;
  /** Pool size (connections). Default 10. */
  max?: number;
  /**
   * How long to wait for a connection (TCP + authentication) before failing, in ms. Default
   * 5,000: a database that accepts TCP but never answers fails fast instead of hanging.
   */
  connectTimeoutMs?: number;
  /**
   * How long any one query may wait for its answer, in ms (pg's client-side `query_timeout`).
   * Default 30,000: a database that stops answering (frozen, partitioned) makes requests fail
   * with 503 instead of hanging. Migrations wait on an advisory lock within the same limit.
   */
  queryTimeoutMs?: number;
}

/** Defaults of `PoolOptions`' timeouts (ms). */
export const POOL_TIMEOUTS = { connectMs: 5_000, queryMs: 30_000 } as const;

/** Throws `[store] …` if `schema` is not a plain identifier. */
export function createPool(opts: PoolOptions): pg.Pool {
  if (opts.schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(opts.schema)) {
    throw new Error(
      `[store] schema "${opts.schema}" is not a plain identifier; use lower-case letters, digits and _`,
    );
  }
  // The connection string's fields, as pg itself would merge them over the config; taken apart
  // here so that its `options` (if any) are joined with the store's instead of replacing them.
  const fromUrl = parse(opts.connectionString);
  const pool = new pg.Pool({
    ...(fromUrl as pg.PoolConfig),
    options: sessionOptions(fromUrl.options, opts.schema),
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? POOL_TIMEOUTS.connectMs,
    query_timeout: opts.queryTimeoutMs ?? POOL_TIMEOUTS.queryMs,
    keepAlive: true,
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        oid === INT8_OID
          ? (v: string) => Number(v)
          : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client whose server went away (restart, failover) is reported here; unhandled, the
  // 'error' event would kill the engine process. The pool drops that client and the next query
  // connects afresh; queries in flight fail on their own and are retried by their callers.
  pool.on("error", () => {});
  pool.on("connect", (client) => {
    // A connection that dies while its client is checked out (a query timed out, the network
    // dropped) emits 'error' on that client; unheard, it would kill the engine. Its queries
    // fail on their own (and are retried by their callers); the pool replaces the client.
    client.on("error", () => {});
  });
  return pool;
}

/**
 * The session settings every connection starts with, as Postgres `options` (sent in the
 * startup message, so they hold before the first query and cost no round trip):
 * - `plan_cache_mode=force_generic_plan`: the store's named statements (commit, claim) look
 *   rows up by key or by the due index, so one plan fits every parameter; Postgres would
 *   otherwise plan each afresh for its first five runs on every new connection (custom plans,
 *   ~0.3 ms each for the commit), and the pool opens connections again after idle periods.
 * - then the connection string's own `options`, which may override the above;
 * - then `search_path=<schema>` when the store has a schema, which nothing overrides.
 */
export function sessionOptions(fromUrl: string | undefined, schema: string | undefined): string {
  return [
    "-c plan_cache_mode=force_generic_plan",
    fromUrl,
    schema === undefined ? undefined : `-c search_path=${schema}`,
  ]
    .filter((o) => o !== undefined && o !== "")
    .join(" ");
}
