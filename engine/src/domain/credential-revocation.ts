/**
 * Credential revocation (docs/recovery-actions.md "Revoke a credential"): the verb's body, the
 * book (one engine-state document, `credential_revocations`), the reference's lookup and the
 * verdict on the revoke tool's result (verified only by its own check that the old credential is
 * refused). Pure: the service dispatches and stores (use-cases/credentials.ts).
 */
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";
import type { CredentialRef } from "./credentials.ts";
import { BatonError } from "./errors.ts";
import { asArray as arr, asObject as obj } from "./json.ts";
import { ActorField, ReasonField } from "./verbs.ts";

/** `revoke` ends the credential; `rotate` replaces it (the tool writes the new one where the ref points). */
export const REVOCATION_MODES = ["revoke", "rotate"] as const;
export type RevocationMode = (typeof REVOCATION_MODES)[number];

/**
 * The check a revoke tool writes to checks.json to verify its own work: status `pass` only when
 * the old credential, presented to its issuer, is refused.
 */
export const REFUSED_CHECK = "old_credential_refused";

/** The body of `POST /v1/models/:model/credentials/revoke`. */
export const RevokeBody = lazySchema(() =>
  z
    .object({
      ref: z
        .string({ error: "must be the credential's reference, e.g. vault://kv/ranker/api-key" })
        .min(1, "must be the credential's reference, e.g. vault://kv/ranker/api-key")
        .max(512, "must be at most 512 characters"),
      mode: z.enum(REVOCATION_MODES, { error: "must be revoke or rotate" }).default("revoke"),
      reason: z
        .string({ error: 'must say why, e.g. "key leaked in a log"' })
        .pipe(
          ReasonField.pipe(
            z
              .string()
              .trim()
              .min(
                1,
                'must say why (kept in the record and the incident\'s timeline), e.g. "key leaked in a log"',
              ),
          ),
        ),
      actor: ActorField,
    })
    .strict(),
);
export type RevokeInput = z.infer<typeof RevokeBody>;

/** What the runner reported, as the engine received it (checks verbatim, the log's tail). */
export interface RevocationResult {
  run_id: string;
  run_attempt: number;
  status: string;
  overall: "pass" | "fail";
  checks: unknown;
  log: string;
  /** Epoch ms the callback was received. */
  received_at: number;
}

/** One revocation: who asked, why, the dispatch, the runner's result and the verdict. */
export interface Revocation {
  /** `rv1`, `rv2`, …: the dispatch's step-run id and release id on the runner protocol. */
  id: string;
  model: string;
  ref: string;
  mode: RevocationMode;
  tool: string;
  /** The release whose manifest lists the reference, and that manifest's digest (sent in the dispatch). */
  release: string;
  manifest_digest: string;
  /** `rv3:revoke:vault://…`: the operation key the tool gets. */
  operation_key: string;
  actor: string;
  reason: string;
  /** Epoch ms asked; finished when the result was judged (null until then). */
  at: number;
  finished_at: number | null;
  /**
   * `dispatched` (waiting for the runner), `running` (a run was preflighted), `dispatch_failed`,
   * `done` (a result arrived: see `verified`).
   */
  state: "dispatched" | "dispatch_failed" | "running" | "done";
  /** The dispatch's answer (e.g. `HTTP 422: …` when refused). */
  dispatch: string;
  /** The run the preflight bound (the first to ask; a re-run of it moves the attempt on). */
  run: { run_id: string; run_attempt: number; sha: string; preflight_at: number } | null;
  result: RevocationResult | null;
  /** True only when the tool's result passed and its `old_credential_refused` check passed. */
  verified: boolean;
  verification: string;
  /** Open incidents of the model whose timelines got this revocation. */
  incidents: string[];
}

/** The stored document: every revocation and the last number used. */
export interface RevocationBook {
  last: number;
  revocations: Revocation[];
}

export const EMPTY_REVOCATION_BOOK: RevocationBook = { last: 0, revocations: [] };

/** Parses a stored book; an absent value is the empty book. */
export function revocationBookOf(value: unknown): RevocationBook {
  if (value === null || value === undefined) return EMPTY_REVOCATION_BOOK;
  return value as RevocationBook;
}

/** The operation key of a revocation: `rv3:rotate:vault://kv/ranker/api-key`. */
export function revocationKey(id: string, mode: RevocationMode, ref: string): string {
  return `${id}:${mode}:${ref}`;
}

/** The args the tool gets: what to revoke or rotate, by reference, and why. */
export function revocationArgs(r: Pick<Revocation, "model" | "ref" | "mode" | "reason" | "actor">) {
  return { credential: r.ref, mode: r.mode, model: r.model, reason: r.reason, actor: r.actor };
}

/**
 * Where a revocation's reference comes from: `manifests` are the model's releases, newest
 * first. The newest that lists `ref` wins.
 * @throws BatonError 404 naming the field and the references the model's releases do list.
 */
export function declaringRelease<
  T extends { id: string; manifest: { credentials?: CredentialRef[] } },
>(model: string, ref: string, releases: readonly T[]): { release: T; credential: CredentialRef } {
  for (const r of releases) {
    const c = r.manifest.credentials?.find((x) => x.ref === ref);
    if (c) return { release: r, credential: c };
  }
  const known = [
    ...new Set(releases.flatMap((r) => r.manifest.credentials ?? []).map((c) => c.ref)),
  ];
  throw new BatonError(
    "not_found",
    `[engine] no release of ${model} lists credential ${ref}; ${known.length ? `its releases list ${known.join(", ")}` : `its releases list no credentials (a recipe lists them under credentials: [{ref, revoke_tool}])`}`,
    [
      {
        path: "ref",
        message: `${ref} is not a credential of ${model}`,
        fix: known.length
          ? `name one of ${known.join(", ")}`
          : "list it in the model's recipe under credentials and release that recipe",
      },
    ],
  );
}

/**
 * The verdict on a runner's result: verified only when the result passed and the tool's own
 * `old_credential_refused` check is in checks.json with status `pass`.
 */
export function judge(
  r: Pick<Revocation, "ref" | "mode">,
  overall: "pass" | "fail",
  status: string,
  checks: unknown,
): { verified: boolean; verification: string } {
  const check = arr(checks)
    .map((c) => obj(c))
    .find((c) => c?.name === REFUSED_CHECK);
  const did = r.mode === "rotate" ? "rotated" : "revoked";
  if (overall !== "pass")
    return {
      verified: false,
      verification: `not verified: the tool reported ${status} (overall fail); ${r.ref} may still be valid`,
    };
  if (!check)
    return {
      verified: false,
      verification: `not verified: the tool passed but wrote no ${REFUSED_CHECK} check, so nothing shows the old credential is refused`,
    };
  if (check.status !== "pass")
    return {
      verified: false,
      verification: `not verified: ${REFUSED_CHECK} is ${String(check.status)}${typeof check.message === "string" ? ` (${check.message})` : ""}: the old credential may still be accepted`,
    };
  return {
    verified: true,
    verification: `verified: ${did}; the tool's ${REFUSED_CHECK} check passed${typeof check.message === "string" ? ` (${check.message})` : ""}`,
  };
}

/** One line for timelines and the CLI. */
export function revocationLine(r: Revocation): string {
  const verb = r.mode === "rotate" ? "rotate" : "revoke";
  const where =
    r.state === "done"
      ? r.verification
      : r.state === "dispatch_failed"
        ? `dispatch failed: ${r.dispatch}`
        : `${r.state}, no result yet`;
  return `credential ${r.id}: ${verb} ${r.ref} of ${r.model} with ${r.tool} (${where}): ${r.reason}`;
}
