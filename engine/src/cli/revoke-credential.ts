/**
 * `baton revoke-credential <model> <ref> --reason …` (docs/recovery-actions.md "Revoke a
 * credential"): runs the tool the model's recipe names for the credential reference through the
 * runner (`--rotate` asks it to rotate instead); with no reference, lists the model's
 * revocations with their results and verdicts. One request to
 * `/v1/models/:model/credentials/…`. Exits 1 when the dispatch failed; the runner's result
 * arrives later (listed here and on the dashboard's "Credentials" page).
 */
import type { Revocation } from "../domain/credential-revocation.ts";
import { CONTROL_PLANE_NAME_FIX, CONTROL_PLANE_NAME_PATTERN } from "../protocol/fields.ts";
import { type Connection, EngineClient } from "./client.ts";
import { actorName, actorSuggestion, envOf, type Io } from "./commands.ts";
import { EXIT, type ExitCode, usage } from "./errors.ts";

const iso = (ms: number | null) =>
  ms === null ? "-" : new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/** A revocation's lines: id, what, who, why, when, the run, and the verdict. */
export function revocationLines(r: Revocation): string[] {
  return [
    `${r.id}  ${r.mode}  ${r.ref}  of ${r.model}  (tool ${r.tool}, listed by ${r.release})`,
    `  ${iso(r.at)}  ${r.actor}: ${r.reason}`,
    `  dispatch: ${r.dispatch}${r.run ? `; run ${r.run.run_id} attempt ${r.run.run_attempt}` : ""}${r.result ? `; result ${r.result.status} (${r.result.overall}) at ${iso(r.result.received_at)}` : ""}`,
    `  ${r.state === "done" || r.state === "dispatch_failed" ? r.verification : `${r.state}: no result from the runner yet`}${r.incidents.length ? `; in the timeline of ${r.incidents.join(", ")}` : ""}`,
  ];
}

/** The options of `baton revoke-credential`. */
export interface RevokeOptions {
  reason?: string;
  rotate?: boolean;
  actor?: string;
  json: boolean;
}

/** `revoke-credential <model> [ref]`. */
export async function revokeCredential(
  conn: Connection,
  model: string,
  ref: string | undefined,
  o: RevokeOptions,
  io: Io,
): Promise<ExitCode> {
  if (!CONTROL_PLANE_NAME_PATTERN.test(model))
    throw usage(`[cli] ${JSON.stringify(model)} is not a model name; ${CONTROL_PLANE_NAME_FIX}`);
  const client = new EngineClient(conn);
  const base = `/v1/models/${model}/credentials`;
  if (ref === undefined) {
    if (o.rotate || o.reason !== undefined)
      throw usage(
        '[cli] name the credential: baton revoke-credential <model> <ref> --reason "<why>" [--rotate]',
      );
    const r = await client.call<{ revocations: Revocation[] }>("GET", `${base}/revocations`);
    if (o.json) io.out.write(`${JSON.stringify(r, null, 2)}\n`);
    else
      io.out.write(
        `${(r.revocations.length ? r.revocations.flatMap(revocationLines) : [`no credential revocations on ${model}`]).join("\n")}\n`,
      );
    return EXIT.ok;
  }
  if (!/^[a-z][a-z0-9+.-]{1,31}:\/\//.test(ref))
    throw usage(
      `[cli] the second argument is not a credential reference (scheme://path; not echoed, in case it is the secret itself); give it as the recipe lists it, e.g. vault://kv/${model}/api-key`,
    );
  if (o.reason === undefined || o.reason.trim() === "")
    throw usage(
      `[cli] --reason is required: say why (kept in the record and the incident's timeline), e.g. baton revoke-credential ${model} ${ref} --reason "key leaked in a log"${actorSuggestion(o.actor, envOf(io))}`,
    );
  const actor = actorName(o.actor, envOf(io));
  if (!actor)
    throw usage("[cli] --actor is required when $USER is not set: a revocation records who acted");
  const r = await client.call<{ revocation: Revocation }>(
    "POST",
    `${base}/revoke`,
    JSON.stringify({ ref, mode: o.rotate ? "rotate" : "revoke", reason: o.reason, actor }),
  );
  const rv = r.revocation;
  if (o.json) io.out.write(`${JSON.stringify(r, null, 2)}\n`);
  else
    io.out.write(
      `${[
        rv.state === "dispatch_failed"
          ? `credential ${rv.id}: the dispatch of ${rv.tool} failed; nothing ran`
          : `credential ${rv.id}: dispatched ${rv.tool} to ${rv.mode} ${rv.ref} of ${model}; follow it with: baton revoke-credential ${model}`,
        ...revocationLines(rv),
      ].join("\n")}\n`,
    );
  return rv.state === "dispatch_failed" ? EXIT.failed : EXIT.ok;
}
