/**
 * What a runner step's result files prove about the machine ("nothing undone that
 * never happened"). Pure. Conservative by construction: only an explicit record that the tool
 * never reached a remote shell counts; anything else (a phase that ran, is running, was
 * cancelled, an unreadable or empty checks.json) may have taken effect.
 */

import { failedCheckIn } from "../protocol/messages.ts";
import { storableText } from "./storable-text.ts";

/** Failure classes of `connect` that happen before any remote command (scripts/lib/ssh.ts). */
export const NO_SESSION_CLASSES: ReadonlySet<string> = new Set([
  "connect_failed",
  "connect_timeout",
  "host_key_mismatch",
  "auth_failed",
]);

/**
 * True when `checks` (checks.json as the tool wrote it) proves that no remote command ran:
 * a non-empty array whose every record is either `not_run`, a failed `connect` whose `class`
 * is one of `NO_SESSION_CLASSES`, a failed `arguments` check (the tool refused its
 * arguments before connecting) or a failed `ssh-key` check (the action refused
 * its key input before starting the tool); and `overall` is `fail`. The seed (`[]`), a `connect` that
 * succeeded, or any phase with another status is not proof.
 */
export function provesNothingRan(overall: "pass" | "fail", checks: unknown): boolean {
  if (overall !== "fail" || !Array.isArray(checks) || checks.length === 0) return false;
  return checks.every((c) => {
    if (c === null || typeof c !== "object" || Array.isArray(c)) return false;
    const rec = c as { name?: unknown; status?: unknown; class?: unknown };
    if (rec.status === "not_run") return true;
    if (rec.name === "connect")
      return (
        (rec.status === "failed" || rec.status === "timeout") &&
        typeof rec.class === "string" &&
        NO_SESSION_CLASSES.has(rec.class)
      );
    if (rec.name === "arguments") return rec.status === "failed";
    // The action stopped before starting the tool: its SSH key input was refused (empty, not a
    // key, encrypted without passphrase). (A `tool_not_found` is no proof: a tool that ran
    // may exit 127 too.)
    if (rec.name === "ssh-key") return rec.status === "failed";
    return false;
  });
}

/**
 * The first failing check of a result, as people need it in a headline: which check, its
 * HTTP answer and body excerpt (a failed health probe), its message and exit code. Built by
 * the service from checks.json (`failingCheckOf`) and carried on the callback event, so the
 * step run's error names the cause instead of the runner's bare status.
 */
export interface FailingCheck {
  /** Check name (`health`, `connect`, `pull` …) as the tool recorded it. */
  name: string;
  /** The check's status word (`failed`, `timeout` …). */
  status: string;
  /** The check's exit code (the tool's record, as the dashboard's check row shows it); null if none. */
  exit_code: number | null;
  /** HTTP status of a failed probe, when recorded. */
  http_status: number | null;
  /** Response body excerpt (at most `EXCERPT_MAX` characters), when recorded. */
  excerpt: string | null;
  /** The check's message (at most `EXCERPT_MAX` characters), when recorded. */
  message: string | null;
}

/** Longest body excerpt / message kept on the event and in the step run's error, characters. */
export const EXCERPT_MAX = 240;

const OK_STATUSES: ReadonlySet<string> = new Set([
  "pass",
  "passed",
  "ok",
  "success",
  "succeeded",
  "skipped",
]);

function clip(v: unknown): string | null {
  if (typeof v !== "string") return null;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are dropped
  const s = v.replace(/[\u0000-\u001f\u007f]+/g, " ").trim();
  if (!s) return null;
  return s.length > EXCERPT_MAX ? `${s.slice(0, EXCERPT_MAX - 1)}…` : s;
}

function whole(v: unknown): number | null {
  return typeof v === "number" && Number.isInteger(v) ? v : null;
}

/**
 * The check of `checks` (checks.json as written) that failed the result, or null.
 * With `overall` fail: the first check whose status is not a pass and not `not_run` (falling
 * back to a `not_run` one); null when `checks` is not an array or nothing failed. With
 * `overall` pass: what `failedCheckIn` finds (a check whose status says it failed, or
 * checks.json that cannot be judged: missing, not an array, an item not a record), which makes
 * the result a failure. Pure; never throws on any JSON.
 */
export function failingCheckOf(overall: "pass" | "fail", checks: unknown): FailingCheck | null {
  let rec: Record<string, unknown> | undefined;
  if (overall === "pass") rec = failedCheckIn(checks) ?? undefined;
  else if (!Array.isArray(checks)) return null;
  else {
    const recs = checks.filter(
      (c): c is Record<string, unknown> =>
        c !== null &&
        typeof c === "object" &&
        !Array.isArray(c) &&
        typeof c.status === "string" &&
        !OK_STATUSES.has(c.status.toLowerCase()),
    );
    rec = recs.find((c) => c.status !== "not_run") ?? recs[0];
  }
  if (!rec) return null;
  const name = clip(rec.name) ?? clip(rec.phase) ?? "check";
  return {
    name: name.slice(0, 60),
    status: String(rec.status).slice(0, 40),
    exit_code: whole(rec.exit_code) ?? whole(rec.remote_exit_code),
    http_status: whole(rec.http_status),
    excerpt: clip(rec.body) ?? clip(rec.response_body) ?? clip(rec.excerpt),
    message: clip(rec.message),
  };
}

/**
 * One line for people: `health check on lane-a answered 503: model not loaded: CUDA OOM
 * (exit code 1)`, `connect check on lane-b timeout: ssh: connect timed out (exit code 255)`.
 */
export function failingCheckText(c: FailingCheck, lane: string | null): string {
  const where = `${c.name} check${lane ? ` on ${lane}` : ""}`;
  const what =
    c.http_status !== null
      ? `answered ${c.http_status}${c.excerpt ? `: ${c.excerpt}` : c.message ? `: ${c.message}` : ""}`
      : `${c.status}${c.message ? `: ${c.message}` : c.excerpt ? `: ${c.excerpt}` : ""}`;
  return `${where} ${what}${c.exit_code !== null ? ` (exit code ${c.exit_code})` : ""}`;
}

/**
 * The images the target reported as running, in checks.json order: every check record's
 * `image` field (deploy.sh reports the container's image as the runtime sees it,
 * `name@sha256:<hex>`), cut to 300 characters and made storable (`storableText`). Records
 * without one are skipped; anything that is not an array gives [].
 */
export function reportedImages(checks: unknown): string[] {
  if (!Array.isArray(checks)) return [];
  const out: string[] = [];
  for (const c of checks) {
    if (c === null || typeof c !== "object" || Array.isArray(c)) continue;
    const image = (c as { image?: unknown }).image;
    // Storable in every store and short: the text may end up in the step run's error.
    if (typeof image === "string" && image.length > 0) out.push(storableText(image.slice(0, 300)));
  }
  return out;
}

/** The `sha256:<hex>` digest of an image reference, or null when it is not pinned by digest. */
export function digestOf(image: string): string | null {
  const m = /@(sha256:[0-9a-f]{64})$/.exec(image.trim());
  return m ? m[1]! : null;
}

/**
 * Compares what the target reports it runs with the image a runner step was to leave running
 * (its action's `args.image`). Returns null when they agree or nothing was reported (an older
 * tool, or a step that failed before the image was read); otherwise the failure reason, naming
 * the lane, the reported and the expected digest. The last report counts (the final phase).
 */
export function imageMismatch(
  lane: string,
  expected: string,
  reported: readonly string[],
): string | null {
  const last = reported[reported.length - 1];
  if (last === undefined) return null;
  const want = digestOf(expected);
  const got = digestOf(last);
  if (want !== null && got === want) return null;
  return `the target reports lane ${lane} running ${got ?? `${last} (not pinned by digest)`}, expected ${want ?? expected}: the deploy did not leave the manifest's image running`;
}
