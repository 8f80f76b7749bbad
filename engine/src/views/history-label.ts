/**
 * What the release page's timeline says about one history entry. The label is built from the
 * entry's outcome and kind (`accepted`, `callback refused: late`, `abort refused`), never from
 * the operator's own words: a refused abort's data holds the abort's `reason` ("aborted by
 * operator"), which says why the operator asked, not why the engine said no.
 */
import type { HistoryEntry, Json } from "../domain/types.ts";

/** Words of the engine's refusal messages, most specific first. */
const REASON_WORDS = [
  "bad credential",
  "payload mismatch",
  "no longer applies",
  "late",
  "fenced",
  "duplicate",
  "stale",
  "forged",
  "ignored",
];

/** Each refusal word as a whole word or phrase ("late", never the start of "latency"). */
const REASON_PATTERNS = REASON_WORDS.map((w) => ({ w, re: new RegExp(`\\b${w}\\b`) }));

/**
 * Why an entry was refused: `data.code`; for the engine's own entries (a runner's callback or
 * preflight, a read, a dispatch) then `data.reason` and a word of the engine's message; null
 * when none says. An operator's action (`OPERATOR_ISSUED_KINDS`) is labelled by its code only:
 * its `reason` and its message quote the operator's own words.
 */
export function refusalReason(e: HistoryEntry): string | null {
  const d = e.data;
  const operators = OPERATOR_ISSUED_KINDS.has(e.kind);
  if (d && typeof d === "object" && !Array.isArray(d)) {
    const code: Json | undefined = d.code;
    if (typeof code === "string" && code) return code;
    const reason: Json | undefined = d.reason;
    if (typeof reason === "string" && reason.trim() && !operators) return reason;
  }
  if (operators) return null;
  const m = e.message.toLowerCase();
  return REASON_PATTERNS.find((p) => p.re.test(m))?.w ?? null;
}

/** The timeline's outcome label: `accepted`, or `<kind> refused[: <reason>]`. */
export function historyLabel(e: HistoryEntry): string {
  if (e.outcome !== "refused") return "accepted";
  const why = refusalReason(e);
  return why ? `${e.kind} refused: ${why}` : `${e.kind} refused`;
}

/**
 * A reason read once: the engine stores `aborted by <actor>: <reason>` and the API's default
 * reason is itself `aborted by operator`, which would read "aborted by operator: aborted by
 * operator". Drops a `: <text>` that only repeats what comes before it.
 */
export function readOnce(text: string): string {
  return text
    .replace(/\bby (\w+): aborted by \1\b/g, "by $1")
    .replace(/([^:();]+): \1(?=$|[);,.])/g, "$1");
}

/** History kinds that are an operator's decision (not the engine's). */
export const OPERATOR_EVENTS: ReadonlySet<string> = new Set([
  "abort",
  "resume",
  "retry",
  "resolve",
  "abandon",
  "promote",
  "pause",
  "release",
  "confirm_restore",
  "verify",
]);

/**
 * History kinds an operator issues (directly, the dashboard or the CLI): a refusal of one of
 * these is the engine answering a person, and is always shown as such.
 */
export const OPERATOR_ISSUED_KINDS: ReadonlySet<string> = new Set([
  ...OPERATOR_EVENTS,
  "rollback",
  "roll_forward",
  "start",
]);

/**
 * A refused entry the engine records for itself: a runner's late, duplicate or fenced
 * callback or preflight, a deadline or an outcome that no longer applies, a notice or
 * deployment status not delivered. It changed nothing and no person asked for it. A refusal
 * of an operator's action (`OPERATOR_ISSUED_KINDS`) is never housekeeping.
 */
export function isHousekeeping(e: HistoryEntry): boolean {
  return e.outcome === "refused" && !OPERATOR_ISSUED_KINDS.has(e.kind);
}

/** What each housekeeping kind is, for people. */
const WHAT: Record<string, string> = {
  callback: "callback",
  preflight: "preflight",
  dispatch_accepted: "dispatch answer (GitHub or the local runner)",
  dispatch_failed: "dispatch failure report",
  applied: "control-plane outcome",
  observed: "control-plane read",
  gate: "gate evaluation",
  verified: "verification reading",
  notice: "notice",
  deployment: "GitHub deployment status",
};

/** A refusal reason as an adjective (`late callback`), or null when it reads as none. */
const ADJECTIVE: Record<string, string | null> = {
  late: "late",
  duplicate: "duplicate",
  fenced: "fenced (superseded attempt's)",
  stale: "stale",
  "no longer applies": "stale",
  forged: "forged",
  "bad credential": "badly signed",
  bad_credential: "badly signed",
  "bad signature": "badly signed",
  "payload mismatch": "mismatched",
  conflicting_callback: "conflicting",
  ignored: null,
};

/**
 * One plain-language line for a housekeeping entry (`isHousekeeping`), e.g. `late callback
 * from attempt 1 refused`, `stale callback deadline of sr_3_2_f ignored`; the entry's own
 * message (without its `[engine]` tag) for notices and deployment statuses, which say it.
 */
export function housekeepingLine(e: HistoryEntry): string {
  const bare = readOnce(e.message.replace(/^\[[a-z-]+\] /, ""));
  if (e.kind === "notice" || e.kind === "deployment") return bare;
  const d = e.data && typeof e.data === "object" && !Array.isArray(e.data) ? e.data : {};
  const why = refusalReason(e);
  const adjective = why && why in ADJECTIVE ? ADJECTIVE[why] : why;
  const deadline =
    e.kind === "deadline" && typeof d.kind === "string" ? `${d.kind} deadline` : null;
  const what = deadline ?? WHAT[e.kind] ?? e.kind.replaceAll("_", " ");
  const attempt = /\battempt (\d+)\b/.exec(e.message)?.[1];
  const of = e.step_run_id ? ` for ${e.step_run_id}` : "";
  const from = attempt && e.kind !== "deadline" ? ` from attempt ${attempt}` : "";
  const verb =
    why === "ignored" || /\bignored\b|nothing to do/.test(e.message) ? "ignored" : "refused";
  return `${adjective ? `${adjective} ` : ""}${what}${from}${of} ${verb}; it changed nothing`;
}
