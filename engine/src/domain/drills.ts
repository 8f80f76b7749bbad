/**
 * Drill records and the drill policy (docs/recovery-actions.md "Drills"). A drill rehearses a
 * model's recovery (roll back to the last known good, restore state, verify, roll forward) and
 * its record says when, whether it passed, and the RTO and RPO it measured. The engine keeps
 * them in one book (engine state `drill_book`, newest last, at most `DRILLS_KEPT` per model).
 * A recipe's `policy.drill_max_age_days` says how old a model's last passed drill may be when a
 * release of it starts; `policy.drill_stale` says what happens otherwise: `warn` (default: the
 * release starts, its history says so) or `refuse` (409 `drill_required`).
 */
import * as z from "zod";
import type { Manifest } from "./types.ts";

/** Drills kept per model (oldest dropped first). */
export const DRILLS_KEPT = 50;

/** The body of `POST /v1/models/:model/drills`: one drill's outcome and measures. */
export const DrillBody = z
  .object({
    drill: z
      .string({ error: "must name the drill, e.g. d1796612813844" })
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "must be 1-64 letters, digits, '.', '_' or '-'"),
    passed: z.boolean({ error: "must be true or false: did every check of the drill pass" }),
    rto_ms: z.number().min(0).nullable().describe("decision to verified recovery, ms"),
    rpo_ms: z.number().min(0).nullable().describe("restore point to the last lost write, ms"),
    rows_lost: z.number().int().min(0).nullable(),
    restored: z.boolean(),
    verified: z.boolean(),
    release: z.string().max(64).optional(),
    problems: z.array(z.string().max(500)).max(20).default([]),
    actor: z.string().max(128).optional(),
  })
  .strict();
export type DrillBody = z.infer<typeof DrillBody>;

/** One stored drill: the body, the model, who recorded it and when (epoch ms). */
export interface DrillRecord extends Omit<DrillBody, "actor"> {
  model: string;
  by: string;
  at: number;
}

/** The engine's drill book: every model's drills, oldest first. */
export interface DrillBook {
  drills: DrillRecord[];
}

/** The stored value as a book (absent or malformed: empty). */
export function drillBookOf(value: unknown): DrillBook {
  const drills = (value as { drills?: unknown } | null | undefined)?.drills;
  return { drills: Array.isArray(drills) ? (drills as DrillRecord[]) : [] };
}

/** The book with `rec` added, keeping at most `DRILLS_KEPT` of its model. */
export function withDrill(book: DrillBook, rec: DrillRecord): DrillBook {
  const mine = book.drills.filter((d) => d.model === rec.model);
  const drop = new Set(mine.slice(0, Math.max(0, mine.length + 1 - DRILLS_KEPT)));
  return { drills: [...book.drills.filter((d) => !drop.has(d)), rec] };
}

/** `model`'s drills, newest first. */
export function drillsOf(book: DrillBook, model: string): DrillRecord[] {
  return book.drills.filter((d) => d.model === model).reverse();
}

/** What the drill policy says about a start of `manifest` now: nothing, a warning, a refusal. */
export interface DrillVerdict {
  refuse: boolean;
  message: string;
  fix: string;
}

/**
 * Judges the model's last passed drill against the manifest's `drill_policy`: null when the
 * manifest has none or the drill is recent enough.
 */
export function drillVerdict(
  manifest: Manifest,
  book: DrillBook,
  now: number,
): DrillVerdict | null {
  const p = manifest.drill_policy;
  if (!p) return null;
  const last = drillsOf(book, manifest.model).find((d) => d.passed);
  const maxMs = p.max_age_days * 86_400_000;
  if (last && now - last.at <= maxMs) return null;
  const age = last
    ? `its last passed drill (${last.drill}) is ${Math.floor((now - last.at) / 86_400_000)} days old`
    : "it has no passed drill";
  return {
    refuse: p.on_stale === "refuse",
    message: `model ${manifest.model}: ${age}; the recipe's policy.drill_max_age_days is ${p.max_age_days}`,
    fix: `rehearse its recovery and record the drill (npm run drill on the demo; POST /v1/models/${manifest.model}/drills), or raise policy.drill_max_age_days`,
  };
}
