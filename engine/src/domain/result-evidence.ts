/**
 * What a runner step's result files prove about the machine (issue 9 "Nothing undone that
 * never happened"). Pure. Conservative by construction: only an explicit record that the tool
 * never reached a remote shell counts; anything else (a phase that ran, is running, was
 * cancelled, an unreadable or empty checks.json) may have taken effect.
 */

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
 * is one of `NO_SESSION_CLASSES`, or a failed `arguments` check (the tool refused its
 * arguments before connecting); and `overall` is `fail`. The seed (`[]`), a `connect` that
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
    return false;
  });
}
