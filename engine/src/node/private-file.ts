/**
 * SQLite files readable and writable by their owner only: they hold runners' logs, callback
 * bodies and release records. The database file is created 0600 before SQLite opens it, and
 * SQLite creates its `-wal`, `-shm` and `-journal` files with the database file's mode; files
 * left by an older engine are set to 0600 too. The folder that holds them is made 0700
 * (`privateDir`).
 */
import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";

/** File mode of the engine's SQLite files. */
export const PRIVATE_FILE_MODE = 0o600;
/** Mode of the engine's data folder. */
export const PRIVATE_DIR_MODE = 0o700;

/** Creates `file` empty if missing and sets it and its SQLite companions to 0600. */
export function privateSqliteFile(file: string): void {
  if (file === ":memory:" || file === "") return;
  closeSync(openSync(file, "a", PRIVATE_FILE_MODE));
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) {
    try {
      chmodSync(f, PRIVATE_FILE_MODE);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
  }
}

/** Creates `dir` (and its parents) if missing and sets `dir` itself to 0700. */
export function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  chmodSync(dir, PRIVATE_DIR_MODE);
}
