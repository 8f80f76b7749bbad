/**
 * `baton drill <model>` (docs/recovery-actions.md "Drill records and the drill policy"): lists
 * the model's recovery drills, newest first, and its lanes marked for drills; `--record <file>` records the drill in `file` (the
 * JSON `npm run drill` writes to BATON_DRILL_RECORD, or any `{drill, passed, rto_ms, rpo_ms,
 * rows_lost, restored, verified}`) with who (`--actor`) and why (`--reason`). One request to
 * `/v1/models/:model/drills`. `--rehearse --reason <why>` has the engine rehearse an evacuation
 * of the model's drill lanes (`POST /v1/models/:model/drills/rehearse`) and prints the drill it
 * recorded; exit 1 when the drill failed.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import type { DrillLanes, DrillRecord } from "../domain/drills.ts";
import { ReasonField } from "../domain/verbs.ts";
import { visibleOneLine } from "../domain/visible-text.ts";
import { CONTROL_PLANE_NAME_FIX, CONTROL_PLANE_NAME_PATTERN } from "../protocol/fields.ts";
import { OTHER_BODY_LIMITS } from "../protocol/limits.ts";
import { type Connection, EngineClient } from "./client.ts";
import { actorName, envOf, type Io } from "./commands.ts";
import { EXIT, type ExitCode, usage } from "./errors.ts";

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/** One drill's line: when, id, verdict, RTO, RPO, rows lost, who. */
export function drillLine(d: DrillRecord): string {
  return visibleOneLine(
    `${iso(d.at)}  ${d.drill}  ${d.passed ? "passed" : "FAILED"}  rto ${d.rto_ms ?? "-"} ms  rpo ${d.rpo_ms ?? "-"} ms  rows_lost ${d.rows_lost ?? "-"}  ${d.by}${d.reason ? `  reason: ${d.reason}` : ""}${d.problems.length ? `  problems: ${d.problems.join("; ")}` : ""}`,
  );
}

/** The line naming the lanes marked for drills, or what to do when there are none. */
export function drillLanesLine(lanes: DrillLanes | null, fix: string | undefined): string {
  return lanes && lanes.lanes.length > 0
    ? `drill lanes (last known good ${lanes.release}): ${lanes.lanes.join(", ")}`
    : `no drill lanes: ${fix ?? "mark lanes with `drill: true` in the recipe"}`;
}

/** The most a drill file may hold: the engine's body limit for the request it becomes. */
const DRILL_FILE_MAX_BYTES = OTHER_BODY_LIMITS.bytes;

/**
 * The text of the drill file `path`, read to at most `DRILL_FILE_MAX_BYTES`; refuses (exit 2) a
 * path that is not a regular file (a device such as /dev/zero, a pipe, a directory) or a larger
 * file, naming the file and the fix.
 */
export function readDrillFile(path: string): string {
  const fix =
    "give the JSON file of one drill (BATON_DRILL_RECORD=<file> npm run drill writes one)";
  let fd: number;
  try {
    // Non-blocking: opening a pipe with no writer would otherwise wait forever.
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    throw usage(
      `[cli] --record ${path}: not a readable JSON file (${(e as Error).message}); ${fix}`,
    );
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile())
      throw usage(
        `[cli] --record ${path}: not a regular file (${st.isDirectory() ? "a directory" : st.isCharacterDevice() || st.isBlockDevice() ? "a device" : st.isFIFO() ? "a pipe" : "not a file"}); ${fix}`,
      );
    const buf = Buffer.alloc(DRILL_FILE_MAX_BYTES + 1);
    let n = 0;
    // Bounded: at most DRILL_FILE_MAX_BYTES + 1 bytes, whatever the file says its size is.
    while (n < buf.length) {
      const got = readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
    }
    if (n > DRILL_FILE_MAX_BYTES)
      throw usage(
        `[cli] --record ${path}: the file is over ${DRILL_FILE_MAX_BYTES} bytes, the most the engine takes for a drill; ${fix} (a reason is at most 1000 characters)`,
      );
    return buf.subarray(0, n).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/** The options of `baton drill`. */
export interface DrillOptions {
  record?: string;
  /** Rehearse on the drill lanes (`POST …/drills/rehearse`) instead of listing or recording. */
  rehearse?: boolean;
  actor?: string;
  /**
   * Why the drill was run (kept with the record); else the file's `reason`, if any. Required
   * with `rehearse`.
   */
  reason?: string;
  json: boolean;
}

/** What `POST /v1/models/:model/drills/rehearse` answers (the fields the CLI prints). */
interface RehearsalAnswer {
  drill: DrillRecord;
  release: string;
  lanes: string[];
  decided_at: number;
  recovered_at: number | null;
  returned_at: number | null;
}

/** The lines a rehearsal prints: what it did, each phase's verdict, then the drill's line. */
export function rehearsalLines(model: string, r: RehearsalAnswer): string[] {
  return [
    `rehearsed an evacuation of ${model}'s drill lanes (last known good ${r.release}): ${r.lanes.join(", ")}`,
    `  out of routing: ${r.recovered_at !== null ? `verified, RTO ${r.recovered_at - r.decided_at} ms` : "NOT verified"}`,
    `  put back: ${r.returned_at !== null ? "verified" : "NOT verified"}`,
    drillLine(r.drill),
  ];
}

/** `drill <model> [--record <file> | --rehearse --reason <why>]`. */
export async function drillCommand(
  conn: Connection,
  model: string,
  o: DrillOptions,
  io: Io,
): Promise<ExitCode> {
  if (!CONTROL_PLANE_NAME_PATTERN.test(model))
    throw usage(`[cli] ${JSON.stringify(model)} is not a model name; ${CONTROL_PLANE_NAME_FIX}`);
  const path = `/v1/models/${model}/drills`;
  const client = new EngineClient(conn);
  if (o.rehearse) {
    if (o.record !== undefined)
      throw usage(
        "[cli] --rehearse and --record <file> are two ways to get a drill: rehearse on the drill lanes now, or record one run elsewhere; give one",
      );
    const reason = o.reason ?? "";
    const bad = ReasonField.safeParse(reason);
    if (reason.trim() === "" || !bad.success)
      throw usage(
        `[cli] --rehearse needs --reason <why> (1-1000 characters of plain text, kept with the drill), e.g. --rehearse --reason "quarterly rehearsal"${bad.success ? "" : `: ${bad.error.issues[0]?.message ?? "not a reason"}`}`,
      );
    const actor = actorName(o.actor, envOf(io));
    const r = await client.call<RehearsalAnswer>(
      "POST",
      `${path}/rehearse`,
      JSON.stringify({ reason, ...(actor ? { actor } : {}) }),
    );
    if (o.json) io.out.write(`${JSON.stringify(r, null, 2)}\n`);
    else io.out.write(`${rehearsalLines(model, r).join("\n")}\n`);
    return r.drill.passed ? EXIT.ok : EXIT.failed;
  }
  if (o.record === undefined && o.reason !== undefined)
    throw usage(
      "[cli] --reason goes with --record <file> or --rehearse (the reason is kept with the drill recorded); without either, baton drill only lists",
    );
  if (o.record === undefined) {
    const r = await client.call<{
      drills: DrillRecord[];
      drill_lanes?: DrillLanes | null;
      drill_lanes_fix?: string;
    }>("GET", path);
    if (o.json) io.out.write(`${JSON.stringify(r, null, 2)}\n`);
    else
      io.out.write(
        `${[
          ...(r.drills.length ? r.drills.map(drillLine) : [`no drills of ${model}`]),
          drillLanesLine(r.drill_lanes ?? null, r.drill_lanes_fix),
        ].join("\n")}\n`,
      );
    return EXIT.ok;
  }
  if (o.reason !== undefined && o.reason.trim() === "")
    throw usage(
      '[cli] --reason must not be empty; e.g. --reason "quarterly rehearsal" (or leave it out to keep the file\'s reason)',
    );
  const text = readDrillFile(o.record);
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    throw usage(`[cli] --record ${o.record}: not a readable JSON file (${(e as Error).message})`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc))
    throw usage(`[cli] --record ${o.record}: not a JSON object; give the JSON file of one drill`);
  if (doc.model !== undefined && doc.model !== model)
    throw usage(
      `[cli] --record ${o.record}: the drill is of model ${JSON.stringify(doc.model)}, not ${model}; record it for its own model: baton drill ${typeof doc.model === "string" ? doc.model : "<model>"} --record ${o.record}`,
    );
  // JSON.parse reads 1e400 as Infinity, which JSON.stringify would send as null: refuse it here.
  for (const f of ["rto_ms", "rpo_ms", "rows_lost"] as const)
    if (typeof doc[f] === "number" && !Number.isFinite(doc[f]))
      throw usage(
        `[cli] --record ${o.record}: ${f} is a number too large to be finite; give the measure as a finite number`,
      );
  const actor = actorName(o.actor, envOf(io));
  const reason = o.reason ?? (typeof doc.reason === "string" ? doc.reason : undefined);
  if (reason !== undefined) {
    const bad = ReasonField.safeParse(reason);
    if (!bad.success)
      throw usage(
        `[cli] ${o.reason !== undefined ? "--reason" : `--record ${o.record}: reason`}: ${bad.error.issues[0]?.message ?? "is not a reason"} (it is ${reason.length} characters); shorten it to at most 1000 characters of plain text`,
      );
  }
  const body = {
    drill: doc.drill,
    passed: doc.passed,
    rto_ms: doc.rto_ms ?? null,
    rpo_ms: doc.rpo_ms ?? null,
    rows_lost: doc.rows_lost ?? null,
    restored: doc.restored,
    verified: doc.verified,
    ...(typeof doc.model === "string" ? { model: doc.model } : {}),
    ...(typeof doc.release === "string" ? { release: doc.release } : {}),
    ...(Array.isArray(doc.problems) ? { problems: doc.problems } : {}),
    // When the drill ran: its age (the drill policy's) counts from then, not from now.
    ...(doc.at !== undefined ? { at: doc.at } : {}),
    ...(actor ? { actor } : {}),
    ...(reason ? { reason } : {}),
  };
  const r = await client.call<{ drill: DrillRecord; already_recorded?: boolean }>(
    "POST",
    path,
    JSON.stringify(body),
  );
  if (o.json) io.out.write(`${JSON.stringify(r, null, 2)}\n`);
  else if (r.already_recorded) {
    const dropped =
      reason !== undefined && reason !== r.drill.reason
        ? `; the reason given (${JSON.stringify(reason)}) is not kept: the stored reason is ${r.drill.reason ? JSON.stringify(r.drill.reason) : "none"}`
        : "";
    io.out.write(
      `drill ${r.drill.drill} of ${model} is recorded already (by ${r.drill.by}); the record is unchanged${dropped}:\n${drillLine(r.drill)}\n`,
    );
  } else io.out.write(`recorded drill of ${model}:\n${drillLine(r.drill)}\n`);
  return EXIT.ok;
}
