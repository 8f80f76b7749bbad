/**
 * Picks the store adapter from configuration; the only place outside the adapters that
 * knows a dialect exists (docs/storage.md). `DATABASE_URL=postgres://…` selects Postgres; unset
 * selects the embedded SQLite file `<dataDir>/baton.sqlite`; `':memory:'` is for unit tests.
 */
import { join } from "node:path";
import { privateDir } from "../node/private-file.ts";
import type { Store } from "../ports/store.ts";
import { openPostgresStore } from "./postgres/postgres-store.ts";
import { openSqliteStore } from "./sqlite/sqlite-store.ts";

export type StoreConfig = { databaseUrl?: string; dataDir: string } | ":memory:";

/**
 * Opens and migrates the store. Throws `[store] DATABASE_URL …` for a URL that is not
 * `postgres://` / `postgresql://` (the message never repeats the password), and the driver's
 * error, prefixed `[store]`, when the database cannot be opened or migrated.
 */
export async function openStore(config: StoreConfig): Promise<Store> {
  const store = pick(config);
  try {
    await store.migrate();
  } catch (err) {
    await store.close().catch(() => {});
    throw err instanceof Error && err.message.startsWith("[store]")
      ? err
      : new Error(`[store] could not open the database: ${String(err)}`, { cause: err });
  }
  return store;
}

function pick(config: StoreConfig): Store {
  if (config === ":memory:") return openSqliteStore(":memory:");
  const url = config.databaseUrl?.trim();
  if (url) {
    if (!/^postgres(ql)?:\/\//.test(url)) {
      const scheme = url.split(":")[0] ?? "";
      throw new Error(
        `[store] DATABASE_URL must start with postgres:// or postgresql:// (got "${scheme}:…"); ` +
          `unset it to use SQLite in ${config.dataDir}`,
      );
    }
    return openPostgresStore({ connectionString: url });
  }
  privateDir(config.dataDir);
  return openSqliteStore(join(config.dataDir, "baton.sqlite"));
}
