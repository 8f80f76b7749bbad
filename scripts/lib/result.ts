/**
 * The four result files (docs/glossary.md): `status`, `overall`, `checks.json`, `log`.
 * Writes are atomic (temp file + rename) so a crash never leaves a half-written file.
 */
import { appendFileSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { RESULT_FILES, RESULT_SEED } from "../../engine/src/protocol/messages.ts";

/** One check record as the tools write it into checks.json. `duration_ms` in ms. */
export interface Check {
  name: string;
  status: string;
  exit_code?: number | null;
  signal?: string | null;
  duration_ms?: number;
  message?: string;
  class?: string;
  [extra: string]: unknown;
}

function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode: 0o644 });
  renameSync(tmp, path);
}

/** Creates `dir` (recursively) and writes the seed: not_run / fail / [] / empty log. */
export function seedResults(dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeAtomic(join(dir, RESULT_FILES.status), `${RESULT_SEED.status}\n`);
  writeAtomic(join(dir, RESULT_FILES.overall), `${RESULT_SEED.overall}\n`);
  writeAtomic(join(dir, RESULT_FILES.checks), RESULT_SEED.checks);
  writeAtomic(join(dir, RESULT_FILES.log), RESULT_SEED.log);
}

/** Writes status (one word) and overall. */
export function writeOutcome(dir: string, status: string, overall: "pass" | "fail"): void {
  writeAtomic(join(dir, RESULT_FILES.status), `${status}\n`);
  writeAtomic(join(dir, RESULT_FILES.overall), `${overall}\n`);
}

/** Writes checks.json (pretty JSON array). */
export function writeChecks(dir: string, checks: readonly Check[]): void {
  writeAtomic(join(dir, RESULT_FILES.checks), `${JSON.stringify(checks, null, 2)}\n`);
}

/** Appends text to the log (a newline is added when missing). */
export function appendLog(dir: string, text: string): void {
  appendFileSync(join(dir, RESULT_FILES.log), text.endsWith("\n") ? text : `${text}\n`);
}

/** What the four files say. `checksText` is checks.json verbatim; `checks` its parse or null. */
export interface Results {
  status: string;
  overall: "pass" | "fail";
  checksText: string;
  checks: unknown;
  checksValid: boolean;
  log: string;
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return fallback;
  }
}

/**
 * Reads the four files. Missing files read as their seed; a status that is not one word reads
 * as `failed`; an overall other than exactly `pass` reads as `fail` (no falsy value ever passes).
 */
export function readResults(dir: string): Results {
  const statusRaw = readOr(join(dir, RESULT_FILES.status), "not_run").trim();
  const status = /^[a-z_]{1,40}$/.test(statusRaw) ? statusRaw : "failed";
  const overall =
    readOr(join(dir, RESULT_FILES.overall), "fail").trim() === "pass" ? "pass" : "fail";
  const checksText = readOr(join(dir, RESULT_FILES.checks), "[]");
  let checks: unknown = null;
  let checksValid = false;
  try {
    checks = JSON.parse(checksText);
    checksValid = true;
  } catch {
    checks = null;
  }
  return {
    status,
    overall,
    checksText,
    checks,
    checksValid,
    log: readOr(join(dir, RESULT_FILES.log), ""),
  };
}
