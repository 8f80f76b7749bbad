/**
 * The engine's data directory (BATON_DATA_DIR): SQLite store, embedded control plane, the
 * local runner's work files. Checked once at start, so a directory that cannot hold files
 * stops the engine with one line naming the variable instead of failing later (Node's
 * recursive mkdir loops for ever under a read-only pseudo file system such as /proc).
 */
import { chmodSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { BatonError } from "../domain/errors.ts";
import { PRIVATE_DIR_MODE } from "./private-file.ts";

/**
 * Creates `dir` if missing, makes it 0700 (its owner's only), and proves a file can be
 * written and removed in it.
 * @throws BatonError (bad_request) naming BATON_DATA_DIR, the path, the OS error and the fix.
 */
export function prepareDataDir(dir: string): void {
  try {
    makeDirs(dir);
    // The folder holds the store, runners' logs and keys: its owner's only.
    chmodSync(resolve(dir), PRIVATE_DIR_MODE);
    proveWritable(dir);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const message = `BATON_DATA_DIR ${dir} cannot hold the engine's files (${err.code ?? err.message})`;
    const fix =
      "set BATON_DATA_DIR to a directory this user can write (it is created if missing), e.g. BATON_DATA_DIR=./.baton";
    throw new BatonError(
      "bad_request",
      `[engine] invalid configuration:\n  - ${message}; fix: ${fix}`,
      [{ path: "BATON_DATA_DIR", message, fix }],
    );
  }
}

/**
 * Creates `dir` and its missing parents, one level at a time (at most one `mkdir` per path
 * component): `mkdirSync(…, { recursive: true })` never returns under a pseudo file system such
 * as /proc (it spins, and no signal handler can run meanwhile). Use this instead of it.
 * @param mode mode of the folders it creates (default 0o777 less the umask).
 * @throws the file system's error (with its `code`, e.g. ENOENT, EACCES, ENOTDIR) when a level
 *   cannot be created.
 */
export function makeDirs(dir: string, mode?: number): void {
  const parts = resolve(dir).split(sep).filter(Boolean);
  for (let i = 1; i <= parts.length; i++) {
    try {
      mkdirSync(sep + parts.slice(0, i).join(sep), mode);
    } catch (m) {
      if ((m as NodeJS.ErrnoException).code !== "EEXIST") throw m;
    }
  }
}

/**
 * Proves a file can be written and removed in the existing folder `dir`.
 * @throws the file system's error (with its `code`) when it cannot.
 */
export function proveWritable(dir: string): void {
  const probe = join(dir, `.baton-write-check-${process.pid}`);
  writeFileSync(probe, "");
  rmSync(probe, { force: true });
}

/**
 * Why a file cannot be written at `file` (the OS error code, e.g. `ENOENT`, or `EISDIR` for a
 * folder), or null when it is no folder and its folder takes a new file. Writes only a probe
 * file beside it, removed at once.
 */
export function unwritableFile(file: string): string | null {
  try {
    if (existsSync(file) && statSync(file).isDirectory()) return "EISDIR: it is a folder";
    proveWritable(dirname(file));
    return null;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return err.code ?? err.message;
  }
}

/**
 * One line for a file that cannot be written, or null when it can (`unwritableFile`):
 * `<prefix> <setting> cannot be written (<OS error>); fix: name a file in a folder this user can
 * write, e.g. <example>`. `setting` is how the user named the file (`--record /x/y`,
 * `BATON_DRILL_RECORD=/x/y`), `example` the same setting with a file that works.
 */
export function unwritableFileProblem(
  prefix: string,
  file: string,
  setting: string,
  example: string,
): string | null {
  const why = unwritableFile(file);
  return why === null
    ? null
    : `${prefix} ${setting} cannot be written (${why}); fix: name a file in a folder this user can write, e.g. ${example}`;
}
