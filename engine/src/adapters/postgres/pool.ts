/**
 * A `pg` Pool configured for the store: int8 columns (epoch ms, ids, counts) parsed to JS
 * numbers (safe up to 2^53, i.e. for epoch ms until year 287396), and an optional schema put
 * first on the search path (tests use one schema per suite so parallel files do not collide).
 */
import pg from "pg";

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
  const pool = new pg.Pool({
    connectionString: opts.connectionString,
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? POOL_TIMEOUTS.connectMs,
    query_timeout: opts.queryTimeoutMs ?? POOL_TIMEOUTS.queryMs,
    keepAlive: true,
    ...(opts.schema ? { options: `-c search_path=${opts.schema}` } : {}),
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        oid === INT8_OID
          ? (v: string) => Number(v)
          : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
    },
  });
  // The store's named statements (commit, claim) look rows up by key or by the due index:
  // one plan fits every parameter. Postgres would plan each of them afresh for the first
  // five runs on every new connection (custom plans, ~0.3 ms each for the commit); the pool
  // opens connections again after idle periods, so that cost recurs. Queued before the
  // connection's first query (node-postgres runs a client's queries in order).
  // An idle client whose server went away (restart, failover) is reported here; unhandled, the
  // 'error' event would kill the engine process. The pool drops that client and the next query
  // connects afresh; queries in flight fail on their own and are retried by their callers.
  pool.on("error", () => {});
  pool.on("connect", (client) => {
    // A connection that dies while its client is checked out (a query timed out, the network
    // dropped) emits 'error' on that client; unheard, it would kill the engine. Its queries
    // fail on their own (and are retried by their callers); the pool replaces the client.
    client.on("error", () => {});
    client.query("SET plan_cache_mode = force_generic_plan").catch(() => {});
  });
  return pool;
}
