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
}

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
    client.query("SET plan_cache_mode = force_generic_plan").catch(() => {});
  });
  return pool;
}
