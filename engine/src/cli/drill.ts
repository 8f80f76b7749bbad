/**
 * `baton drill <model>` (docs/recovery-actions.md "Drill records and the drill policy"): lists
 * the model's recovery drills, newest first, and its lanes marked for drills; `--record <file>` records the drill in `file` (the
 * JSON `npm run drill` writes to BATON_DRILL_RECORD, or any `{drill, passed, rto_ms, rpo_ms,
 * rows_lost, restored, verified}`) with who (`--actor`) and why (`--reason`). One request to
 * `/v1/models/:model/drills`.
 */
import { readFileSync } from "node:fs";
import type { DrillLanes, DrillRecord } from "../domain/drills.ts";
import { CONTROL_PLANE_NAME_FIX, CONTROL_PLANE_NAME_PATTERN } from "../protocol/fields.ts";
import { type Connection, EngineClient } from "./client.ts";
import { actorName, envOf, type Io } from "./commands.ts";
import { EXIT, type ExitCode, usage } from "./errors.ts";

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/** One drill's line: when, id, verdict, RTO, RPO, rows lost, who. */
export function drillLine(d: DrillRecord): string {
  return `${iso(d.at)}  ${d.drill}  ${d.passed ? "passed" : "FAILED"}  rto ${d.rto_ms ?? "-"} ms  rpo ${d.rpo_ms ?? "-"} ms  rows_lost ${d.rows_lost ?? "-"}  ${d.by}${d.reason ? `  reason: ${d.reason}` : ""}${d.problems.length ? `  problems: ${d.problems.join("; ")}` : ""}`;
}

/** The line naming the lanes marked for drills, or what to do when there are none. */
export function drillLanesLine(lanes: DrillLanes | null, fix: string | undefined): string {
  return lanes && lanes.lanes.length > 0
    ? `drill lanes (last known good ${lanes.release}): ${lanes.lanes.join(", ")}`
    : `no drill lanes: ${fix ?? "mark lanes with `drill: true` in the recipe"}`;
}

/** The options of `baton drill`. */
export interface DrillOptions {
  record?: string;
  actor?: string;
  /** Why the drill was run (kept with the record); else the file's `reason`, if any. */
  reason?: string;
  json: boolean;
}

/** `drill <model> [--record <file>]`. */
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
  if (o.record === undefined && o.reason !== undefined)
    throw usage(
      "[cli] --reason goes with --record <file> (the reason is kept with the drill recorded); without --record, baton drill only lists",
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
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(readFileSync(o.record, "utf8")) as Record<string, unknown>;
  } catch (e) {
    throw usage(`[cli] --record ${o.record}: not a readable JSON file (${(e as Error).message})`);
  }
  const actor = actorName(o.actor, envOf(io));
  const reason = o.reason ?? (typeof doc.reason === "string" ? doc.reason : undefined);
  const body = {
    drill: doc.drill,
    passed: doc.passed,
    rto_ms: doc.rto_ms ?? null,
    rpo_ms: doc.rpo_ms ?? null,
    rows_lost: doc.rows_lost ?? null,
    restored: doc.restored,
    verified: doc.verified,
    ...(typeof doc.release === "string" ? { release: doc.release } : {}),
    ...(Array.isArray(doc.problems) ? { problems: doc.problems } : {}),
    // When the drill ran: its age (the drill policy's) counts from then, not from now.
    ...(doc.at !== undefined ? { at: doc.at } : {}),
    ...(actor ? { actor } : {}),
    ...(reason ? { reason } : {}),
  };
  const r = await client.call<{ drill: DrillRecord }>("POST", path, JSON.stringify(body));
  if (o.json) io.out.write(`${JSON.stringify(r, null, 2)}\n`);
  else io.out.write(`recorded drill of ${model}:\n${drillLine(r.drill)}\n`);
  return EXIT.ok;
}
