/**
 * Drill records and the drill policy (docs/recovery-actions.md "Drills"). A drill rehearses a
 * model's recovery (roll back to the last known good, restore state, verify, roll forward) and
 * its record says when, whether it passed, and the RTO and RPO it measured. The engine keeps
 * them in one book (engine state `drill_book`, newest last, at most `DRILLS_KEPT` per model).
 * A recipe's `policy.drill_max_age_days` says how old a model's last passed drill may be when a
 * release of it starts; `policy.drill_stale` says what happens otherwise: `warn` (default: the
 * release starts, its history says so) or `refuse` (409 `drill_required`). `policy.drill_every_days`
 * sets the drill schedule: once the last passed drill is older, the model's newest succeeded
 * release holds a "drill due" entry (`drillDue`, written by service/drill-schedule.ts).
 */
import * as z from "zod";
import { ReleaseIdText } from "../protocol/ids.ts";
import { lazySchema } from "../protocol/lazy-schema.ts";
import type { Problem } from "./errors.ts";
import { asObject } from "./json.ts";
import type { HistoryEntry, Json, Manifest } from "./types.ts";
import { ReasonField } from "./verbs.ts";

const DAY_MS = 86_400_000;

/** Drills kept per model (oldest dropped first). */
export const DRILLS_KEPT = 50;

/**
 * Rows were lost but no RPO was measured: a restore that lost `rows_lost` rows lost some time of
 * writes (`rpo_ms > 0`). `npm run drill` counts it as a problem; a passed drill cannot hold it.
 */
export function lostRowsWithoutRpo(rowsLost: number | null, rpoMs: number | null): boolean {
  return (rowsLost ?? 0) > 0 && !((rpoMs ?? 0) > 0);
}

/**
 * A passed drill's results must agree with "passed": restored and verified, no problems, every
 * measure given, and rows lost only with an RPO. Each problem names its field and the fix.
 */
export function passedDrillProblems(b: {
  passed: boolean;
  restored: boolean;
  verified: boolean;
  problems: readonly string[];
  rto_ms: number | null;
  rpo_ms: number | null;
  rows_lost: number | null;
}): { field: string; message: string }[] {
  if (!b.passed) return [];
  const out: { field: string; message: string }[] = [];
  const failed = "; a drill whose check failed is recorded with passed: false";
  if (!b.restored)
    out.push({ field: "restored", message: `is false, but passed is true${failed}` });
  if (!b.verified)
    out.push({ field: "verified", message: `is false, but passed is true${failed}` });
  if (b.problems.length > 0)
    out.push({
      field: "problems",
      message: `lists ${b.problems.length} problem(s), but passed is true${failed}`,
    });
  for (const f of ["rto_ms", "rpo_ms", "rows_lost"] as const)
    if (b[f] === null)
      out.push({
        field: f,
        message: `is null, but a passed drill measured it: give the number (a drill that did not measure it is recorded with passed: false)`,
      });
  if (lostRowsWithoutRpo(b.rows_lost, b.rpo_ms))
    out.push({
      field: "rpo_ms",
      message: `is ${b.rpo_ms}, but rows_lost is ${b.rows_lost}: lost rows mean lost time of writes, so rpo_ms must be more than 0 (or record the drill with passed: false)`,
    });
  return out;
}

/**
 * The prefix of the ids of the engine's own rehearsals (`rh<decided_at, epoch ms>`,
 * `rehearsalDrillId`). A posted drill's id may not start with it, in either case, so that a
 * reader of the drill book tells a rehearsal from a recorded drill by its id.
 */
export const REHEARSAL_DRILL_PREFIX = "rh";

/** The id of the engine's rehearsal decided at `decidedAt` (epoch ms): `rh1796634000000`. */
export function rehearsalDrillId(decidedAt: number): string {
  return `${REHEARSAL_DRILL_PREFIX}${decidedAt}`;
}

/**
 * The body of `POST /v1/models/:model/drills`: one drill's outcome and measures. `model`, when
 * given (`npm run drill`'s file carries it), must be the model of the path (the route checks);
 * a passed drill's results must agree (`passedDrillProblems`).
 */
export const DrillBody = lazySchema(() =>
  z
    .object({
      model: z.string().max(64).optional().describe("the drilled model; must be the path's model"),
      drill: z
        .string({ error: "must name the drill, e.g. d1796612813844" })
        .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "must be 1-64 letters, digits, '.', '_' or '-'")
        .refine((id) => !id.toLowerCase().startsWith(REHEARSAL_DRILL_PREFIX), {
          message: `starts with "${REHEARSAL_DRILL_PREFIX}", which names the engine's own rehearsals (${REHEARSAL_DRILL_PREFIX}<epoch ms>, baton drill <model> --rehearse)`,
          params: {
            fix: `give the drill an id of its own such as d1796612813844 (npm run drill names each run d<epoch ms>), not starting with "${REHEARSAL_DRILL_PREFIX}"`,
          },
        }),
      passed: z.boolean({ error: "must be true or false: did every check of the drill pass" }),
      rto_ms: z.number().min(0).nullable().describe("decision to verified recovery, ms"),
      rpo_ms: z.number().min(0).nullable().describe("restore point to the last lost write, ms"),
      rows_lost: z.number().int().min(0).nullable(),
      restored: z.boolean(),
      verified: z.boolean(),
      release: ReleaseIdText.optional().describe("the drilled release of the model, e.g. r1"),
      problems: z.array(z.string().max(500)).max(20).default([]),
      actor: z.string().max(128).optional(),
      reason: ReasonField.optional().describe("why the drill was run or recorded (kept with it)"),
      at: z
        .number({ error: "must be when the drill ran, in epoch ms, e.g. 1796621040722" })
        .int("must be a whole number of epoch ms")
        .min(0)
        .optional()
        .describe(
          "when the drill ran (epoch ms); default: when it is recorded; never later than that",
        ),
    })
    .strict()
    .superRefine((b, ctx) => {
      for (const p of passedDrillProblems(b))
        ctx.addIssue({ code: "custom", path: [p.field], message: p.message });
    }),
);
export type DrillBody = z.infer<typeof DrillBody>;

/**
 * One stored drill: the body, the model, who recorded it, when it ran (`at`, epoch ms; its age is
 * counted from it) and when it was recorded (`recorded_at`).
 */
export interface DrillRecord extends Omit<DrillBody, "actor" | "at" | "model"> {
  model: string;
  by: string;
  at: number;
  recorded_at?: number;
}

/**
 * One line for a drill in an open incident's timeline: `rehearsal rh… passed: RTO 812 ms, RPO 0
 * ms, rows lost 0 (release r4); reason: …` (a recorded drill says `drill`; a failed one its first
 * problem).
 */
export function drillLine(d: DrillRecord): string {
  const kind = d.drill.toLowerCase().startsWith(REHEARSAL_DRILL_PREFIX) ? "rehearsal" : "drill";
  const ms = (v: number | null) => (v === null ? "not measured" : `${v} ms`);
  const measures = `RTO ${ms(d.rto_ms)}, RPO ${ms(d.rpo_ms)}, rows lost ${d.rows_lost ?? "not counted"}`;
  return `${kind} ${d.drill} of ${d.model} ${d.passed ? "passed" : "FAILED"}: ${measures}${d.release ? ` (release ${d.release})` : ""}${d.problems.length ? `; first problem: ${d.problems[0]}` : ""}${d.reason ? `; reason: ${d.reason}` : ""}`;
}

/** Slack allowed between a drill's `at` and the engine's clock (a runner's clock skew), ms. */
export const DRILL_CLOCK_SKEW_MS = 5 * 60_000;

/**
 * The record of `body` recorded now on `book`, or why not: `at` later than now (beyond the
 * skew), or the drill's id already recorded for `model` with other results. The same drill
 * recorded again (a retried request) is the stored record, unchanged.
 */
export function drillToRecord(
  book: DrillBook,
  model: string,
  body: DrillBody,
  by: string,
  now: number,
): { record: DrillRecord; fresh: boolean } | { problem: Problem } {
  const { actor: _given, at, model: _named, ...rest } = body;
  if (at !== undefined && at > now + DRILL_CLOCK_SKEW_MS)
    return {
      problem: {
        path: "body.at",
        message: `the drill's time ${new Date(at).toISOString()} is later than the engine's clock (${new Date(now).toISOString()})`,
        fix: "give the time the drill ran (epoch ms), or leave `at` out to record it as now",
      },
    };
  const record: DrillRecord = { ...rest, model, by, at: at ?? now, recorded_at: now };
  const same = book.drills.find((d) => d.model === model && d.drill === body.drill);
  if (!same) return { record, fresh: true };
  const results = (d: DrillRecord) =>
    JSON.stringify([
      d.passed,
      d.rto_ms,
      d.rpo_ms,
      d.rows_lost,
      d.restored,
      d.verified,
      d.release ?? null,
    ]);
  if (results(same) === results(record) && (at === undefined || at === same.at))
    return { record: same, fresh: false };
  return {
    problem: {
      path: "body.drill",
      message: `drill ${body.drill} of model ${model} is recorded already (ran ${new Date(same.at).toISOString()}, by ${same.by}) with other results`,
      fix: "a drill is recorded once: give a new drill its own id (npm run drill names each run d<epoch ms>)",
    },
  };
}

/**
 * The lanes of a model marked for recovery drills (recipe lane `drill: true`), as the model's
 * newest succeeded release (`release`, its last known good) compiled them: the only lanes a
 * rehearsed recovery may touch.
 */
export interface DrillLanes {
  release: string;
  lanes: string[];
}

/** `manifest`'s lanes marked for drills, in recipe order (empty when none is). */
export function drillLanesOf(manifest: Pick<Manifest, "lanes">): string[] {
  return manifest.lanes.filter((l) => l.drill === true).map((l) => l.id);
}

/** What to do when `model` has no lane marked for drills (null: it has some). */
export function noDrillLanesFix(model: string, found: DrillLanes | null): string | null {
  if (found && found.lanes.length > 0) return null;
  return found
    ? `no lane of ${model}'s last known good release ${found.release} is marked for drills; mark the lanes a drill may use with \`drill: true\` in the recipe's lanes (docs/recovery-actions.md "Lanes marked for drills") and release it`
    : `${model} has no succeeded release, so no last known good to rehearse a recovery to; release it first, with the lanes a drill may use marked \`drill: true\` (docs/recovery-actions.md "Lanes marked for drills")`;
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

/**
 * The book with `rec` added, keeping at most `DRILLS_KEPT` of its model: the oldest recorded go
 * first, except the model's newest passed drill (by when it ran), which the drill policy and the
 * drill schedule read: failed drills never push it out.
 */
export function withDrill(book: DrillBook, rec: DrillRecord): DrillBook {
  const mine = book.drills.filter((d) => d.model === rec.model);
  const newestPassed = [...mine, rec]
    .filter((d) => d.passed)
    .reduce<DrillRecord | null>((a, d) => (a && a.at > d.at ? a : d), null);
  const droppable = mine.filter((d) => d !== newestPassed);
  const drop = new Set(droppable.slice(0, Math.max(0, mine.length + 1 - DRILLS_KEPT)));
  return { drills: [...book.drills.filter((d) => !drop.has(d)), rec] };
}

/** `model`'s drills, newest first by when they ran (`at`; recorded later first on a tie). */
export function drillsOf(book: DrillBook, model: string): DrillRecord[] {
  return book.drills
    .filter((d) => d.model === model)
    .reverse()
    .sort((a, b) => b.at - a.at);
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
    fix: `rehearse its recovery and record the drill (baton drill ${manifest.model} --rehearse --reason "<why>" on its drill lanes; npm run drill on the demo; baton drill ${manifest.model} --record FILE; POST /v1/models/${manifest.model}/drills), or raise policy.drill_max_age_days`,
  };
}

/**
 * The drill policy's cross-field rules (the contract check): `drill_stale` says what a start
 * does when the last passed drill is older than `drill_max_age_days`, so it needs that field;
 * `drill_every_days` longer than `drill_max_age_days` would call a drill due only after starts
 * were already warned or refused. Reads only well-typed parts of `input`; never throws.
 */
export function drillPolicyProblems(input: unknown): Problem[] {
  const policy = asObject(asObject(input)?.policy);
  if (!policy) return [];
  const problems: Problem[] = [];
  const maxAge = policy.drill_max_age_days;
  const every = policy.drill_every_days;
  if (policy.drill_stale !== undefined && maxAge === undefined)
    problems.push({
      path: "policy.drill_stale",
      message:
        "drill_stale says what a start does when the model's last passed drill is older than policy.drill_max_age_days, but the recipe sets no drill_max_age_days, so it would never apply",
      fix: "Set policy.drill_max_age_days (days, 1-3650) beside it, e.g. drill_max_age_days: 30, or remove policy.drill_stale.",
    });
  if (
    typeof every === "number" &&
    typeof maxAge === "number" &&
    Number.isInteger(every) &&
    Number.isInteger(maxAge) &&
    every > maxAge
  )
    problems.push({
      path: "policy.drill_every_days",
      message: `drill_every_days (${every}) is longer than drill_max_age_days (${maxAge}): the schedule would call a drill due only after starts are already ${policy.drill_stale === "refuse" ? "refused" : "warned"} for a stale drill`,
      fix: `Set policy.drill_every_days to at most ${maxAge}, or raise policy.drill_max_age_days to at least ${every}.`,
    });
  return problems;
}

/** A model whose drill schedule says a drill is due: what its recipe asks and its last passed drill. */
export interface DrillDue {
  model: string;
  /** The model's newest succeeded release, whose recipe sets the schedule (the entry is on it). */
  release: string;
  /** The recipe's `policy.drill_every_days`. */
  every_days: number;
  /** The model's last passed drill (id, epoch ms), or null when it has none. */
  last: { drill: string; at: number } | null;
  /** Epoch ms since which the drill is due (last passed drill + the interval); null: never drilled. */
  due_since: number | null;
  /** Epoch ms of the judgement. */
  observed_at: number;
}

/** History kinds of a drill falling due and of its end. */
export const DRILL_DUE_KIND = "drill_due";
export const DRILL_DUE_CLEARED_KIND = "drill_due_cleared";

/**
 * Whether `manifest`'s model (its newest succeeded release is `release`) is due a drill at `now`:
 * null when the recipe sets no `drill_every_days` or its last passed drill is at most that old.
 */
export function drillDue(
  manifest: Pick<Manifest, "model" | "drill_every_days">,
  release: string,
  book: DrillBook,
  now: number,
): DrillDue | null {
  const every = manifest.drill_every_days;
  if (every === undefined) return null;
  const last = drillsOf(book, manifest.model).find((d) => d.passed);
  if (last && now - last.at <= every * DAY_MS) return null;
  return {
    model: manifest.model,
    release,
    every_days: every,
    last: last ? { drill: last.drill, at: last.at } : null,
    due_since: last ? last.at + every * DAY_MS : null,
    observed_at: now,
  };
}

/**
 * What identifies one due period: the last passed drill it follows ("never" when none); ""
 * when no drill is due. A due period is told once; a new passed drill ends it.
 */
export function drillDuePrint(d: DrillDue | null): string {
  return d ? (d.last?.drill ?? "never") : "";
}

/** The message of a drill falling due (history, log, notice). */
export function drillDueMessage(d: DrillDue): string {
  const age = d.last
    ? `its last passed drill (${d.last.drill}) is ${Math.floor((d.observed_at - d.last.at) / DAY_MS)} days old`
    : "it has no passed drill";
  return `[drill] model ${d.model}: a recovery drill is due: ${age}; the recipe's policy.drill_every_days is ${d.every_days}; rehearse its recovery and record the drill (baton drill ${d.model} --rehearse --reason "<why>" on its drill lanes; npm run drill on the demo; baton drill ${d.model} --record FILE; POST /v1/models/${d.model}/drills)`;
}

/** The `drill_due` entry on release `d.release` (not a decision: no record digest moves). */
export function drillDueEntry(d: DrillDue, now: number): HistoryEntry {
  return {
    release_id: d.release,
    at: now,
    kind: DRILL_DUE_KIND,
    step_run_id: null,
    outcome: "accepted",
    message: drillDueMessage(d),
    data: d as unknown as Json,
  };
}

/**
 * The `drill_due_cleared` entry on `releaseId`: `drilled`, a passed drill (`by`, its id) is
 * recent enough; `moved`, the model's newer succeeded release `by` holds the due drill now;
 * `unscheduled`, the newest succeeded release `by` sets no drill schedule.
 */
export function drillDueClearedEntry(
  releaseId: string,
  model: string,
  by: string,
  why: "drilled" | "moved" | "unscheduled",
  now: number,
): HistoryEntry {
  const message =
    why === "drilled"
      ? `[drill] model ${model}: drill ${by} passed; no drill is due`
      : why === "moved"
        ? `[drill] model ${model}: the due drill is now recorded on ${by}, the model's newest succeeded release`
        : `[drill] model ${model}: release ${by}, the model's newest succeeded release, sets no drill schedule`;
  return {
    release_id: releaseId,
    at: now,
    kind: DRILL_DUE_CLEARED_KIND,
    step_run_id: null,
    outcome: "accepted",
    message,
    data: { model, by, why },
  };
}

/** The due drill a release's history holds now (null when none, or cleared since). */
export function currentDrillDue(history: readonly HistoryEntry[]): DrillDue | null {
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i];
    if (h?.kind === DRILL_DUE_CLEARED_KIND) return null;
    if (h?.kind === DRILL_DUE_KIND) return h.data as unknown as DrillDue;
  }
  return null;
}
