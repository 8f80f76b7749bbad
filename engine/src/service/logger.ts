/** The engine's log: what the service, the reconciler and the housekeeping write to. */

/** Minimal logger; `console` fits. */
export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string, err?: unknown): void;
}

/** A logger that drops everything (hand-built services in tests). */
export const silentLog: Logger = { info() {}, warn() {}, error() {} };
