/**
 * Store errors: messages start with `[store]`, name the operation and say what happened to the
 * data (a failed write wrote nothing), with the driver error kept as `cause`.
 */

/** Wraps a driver error from a transaction that was rolled back. */
export function writeFailed(what: string, err: unknown): Error {
  const msg = err instanceof Error ? err.message : String(err);
  return new Error(`[store] ${what} failed and was rolled back; nothing was written: ${msg}`, {
    cause: err,
  });
}

/** Refuses a commit whose new version does not follow the expected one (a caller bug). */
export function checkNextVersion(id: string, expected: number, next: number): void {
  if (next !== expected + 1) {
    throw new Error(
      `[store] commit of release ${id}: release.resource_version must be expected_version + 1 ` +
        `(got ${next}, expected ${expected + 1}); set it from the loaded release`,
    );
  }
}

/** Thrown by every method once `close()` was called. */
export function closedError(): Error {
  return new Error("[store] the store is closed; open a new one with openStore()");
}
