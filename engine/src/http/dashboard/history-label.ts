/**
 * What the release page's timeline says about one history entry. The label is built from the
 * entry's outcome and kind (`accepted`, `callback refused: late`, `abort refused`), never from
 * the operator's own words: a refused abort's data holds the abort's `reason` ("aborted by
 * operator"), which says why the operator asked, not why the engine said no.
 */
import type { HistoryEntry, Json } from "../../domain/types.ts";

/** Event kinds whose `data.reason` is the operator's text, not a refusal reason. */
const OPERATOR_KINDS = new Set(["abort", "resume", "retry", "start"]);

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

/**
 * Why an entry was refused: `data.code`, then `data.reason` (except for operator actions,
 * where it is the operator's text), then a word of the engine's message; null when none says.
 */
export function refusalReason(e: HistoryEntry): string | null {
  const d = e.data;
  if (d && typeof d === "object" && !Array.isArray(d)) {
    const code: Json | undefined = d.code;
    if (typeof code === "string" && code) return code;
    const reason: Json | undefined = d.reason;
    if (typeof reason === "string" && reason && !OPERATOR_KINDS.has(e.kind)) return reason;
  }
  const m = e.message.toLowerCase();
  return REASON_WORDS.find((w) => m.includes(w)) ?? null;
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
