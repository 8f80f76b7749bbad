/**
 * `baton kill-switch <model> <capability> --reason …` (docs/recovery-actions.md): withdraws the
 * capability from every lane of the model at the control plane; `--restore` gives it back; with
 * no capability, lists the model's kill switches. One request to `/v1/models/:model/kill-switch`.
 * Exits 1 when the action's read-back at the control plane did not verify.
 */
import type { KillSwitch, KillSwitchAction } from "../domain/kill-switch.ts";
import {
  CAPABILITY_PATTERN,
  CONTROL_PLANE_NAME_FIX,
  CONTROL_PLANE_NAME_PATTERN,
} from "../protocol/fields.ts";
import { type Connection, EngineClient } from "./client.ts";
import { actorName, actorSuggestion, envOf, type Io } from "./commands.ts";
import { CliError, EXIT, type ExitCode, usage } from "./errors.ts";

const iso = (ms: number | null) =>
  ms === null ? "-" : new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

const laneList = (ls: { lane: string; capabilities: string[] }[] | null) =>
  ls === null ? "(read failed)" : ls.map((l) => `${l.lane}[${l.capabilities.join(",")}]`).join(" ");

/** A switch's lines: id, state, and each action with who, why, when and its evidence. */
export function killSwitchLines(ks: KillSwitch): string[] {
  const lines = [
    `${ks.id}  ${ks.state}  ${ks.model}  ${ks.capability}  (lanes ${ks.lanes.join(", ") || "none"})`,
  ];
  for (const a of ks.actions as KillSwitchAction[]) {
    lines.push(
      `  ${a.kind} g${a.generation}  ${iso(a.at)}  ${a.actor}: ${a.reason}`,
      `    before: ${laneList(a.before)}`,
      `    after:  ${laneList(a.after)}`,
      `    ${a.verification}${a.incidents.length ? `; in the timeline of ${a.incidents.join(", ")}` : ""}`,
    );
  }
  return lines;
}

/** How a suggested restore command ends, before any `--actor`. */
const RESTORE_TAIL = '--restore --reason "<why>"';

/** The options of `baton kill-switch`. */
export interface KillSwitchOptions {
  reason?: string;
  restore?: boolean;
  actor?: string;
  json: boolean;
}

/** `kill-switch <model> [capability]`. */
export async function killSwitch(
  conn: Connection,
  model: string,
  capability: string | undefined,
  o: KillSwitchOptions,
  io: Io,
): Promise<ExitCode> {
  if (!CONTROL_PLANE_NAME_PATTERN.test(model))
    throw usage(`[cli] ${JSON.stringify(model)} is not a model name; ${CONTROL_PLANE_NAME_FIX}`);
  const path = `/v1/models/${model}/kill-switch`;
  const client = new EngineClient(conn);
  if (capability === undefined) {
    if (o.restore || o.reason !== undefined)
      throw usage(
        '[cli] name the capability: baton kill-switch <model> <capability> --reason "<why>" [--restore]',
      );
    const r = await client.call<{ kill_switches: KillSwitch[] }>("GET", path);
    if (o.json) io.out.write(`${JSON.stringify(r, null, 2)}\n`);
    else
      io.out.write(
        `${(r.kill_switches.length ? r.kill_switches.flatMap(killSwitchLines) : [`no kill switches on ${model}`]).join("\n")}\n`,
      );
    return EXIT.ok;
  }
  if (!CAPABILITY_PATTERN.test(capability))
    throw usage(
      `[cli] ${JSON.stringify(capability)} is not a capability name; capabilities are 1–64 ASCII letters, digits, '.', '_', ':' or '-'`,
    );
  const asActor = actorSuggestion(o.actor, envOf(io));
  if (o.reason === undefined || o.reason.trim() === "")
    throw usage(
      `[cli] --reason is required: say why (kept in the record and the incident's timeline), e.g. baton kill-switch ${model} ${capability}${o.restore ? " --restore" : ""} --reason "chat answers leak PII"${asActor}`,
    );
  const actor = actorName(o.actor, envOf(io));
  if (!actor)
    throw usage("[cli] --actor is required when $USER is not set: a kill switch records who acted");
  const r = await client
    .call<{ kill_switch: KillSwitch & { verified: boolean } }>(
      "POST",
      o.restore ? `${path}/restore` : path,
      JSON.stringify({ capability, reason: o.reason, actor }),
    )
    .catch((e: unknown) => {
      // The engine's refusal may suggest the restore command; make it run as written here.
      if (!(e instanceof CliError) || !asActor || !e.message.includes(RESTORE_TAIL)) throw e;
      throw new CliError(
        e.message.replaceAll(RESTORE_TAIL, `${RESTORE_TAIL}${asActor}`),
        e.exitCode,
        e.problems,
        e.code,
      );
    });
  const ks = r.kill_switch;
  if (o.json) io.out.write(`${JSON.stringify(r, null, 2)}\n`);
  else {
    const a = ks.actions[ks.actions.length - 1] as KillSwitchAction;
    io.out.write(
      `${[
        `kill switch ${ks.id}: ${a.kind === "withdraw" ? "withdrew" : "restored"} ${capability} ${a.kind === "withdraw" ? "from" : "to"} ${a.writes.map((w) => w.lane).join(", ") || "no lane (already as wanted)"} of ${model}`,
        ...killSwitchLines(ks),
        ...(a.kind === "withdraw" && a.verified
          ? [
              `restore it with: baton kill-switch ${model} ${capability} --restore --reason "<why>"${asActor}`,
            ]
          : []),
      ].join("\n")}\n`,
    );
  }
  return ks.verified ? EXIT.ok : EXIT.failed;
}
