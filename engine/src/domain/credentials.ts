/**
 * Credential references and their revocation (docs/recovery-actions.md "Revoke a credential").
 * A recipe lists the credentials its model's service uses by reference only — where the secret
 * lives (`vault://kv/ranker/api-key`) and the allowlisted runner tool that revokes or rotates it.
 * A value that looks like a secret is refused by the contract check, naming the field and the
 * fix. `revoke_credential` is an audited verb: it dispatches that tool through the runner
 * protocol (the same allowlist, preflight and callback credential as a release's steps), and
 * the revocation is verified only when the tool reports, in its own checks, that the old
 * credential is refused.
 *
 * Pure: the schema, the rules of the book (one engine-state document, `credential_revocations`)
 * and the verdict. The service dispatches and stores (use-cases/credentials.ts).
 */
import * as z from "zod";
import { BatonError } from "./errors.ts";
import { asArray as arr, asObject as obj } from "./json.ts";
import { ActorField, ReasonField } from "./verbs.ts";

/** Most credential references one recipe lists. */
export const MAX_CREDENTIALS = 16;

/** `scheme://rest`: a reference to where a secret lives (vault://, aws-sm://, gcp-sm://, …). */
const REF = /^[a-z][a-z0-9+.-]{1,31}:\/\/[\x21-\x7e]{1,480}$/;
const TOOL = /^[a-z][a-z0-9-]{0,63}$/;

/**
 * Shapes of secret values (tokens, keys) that a reference never has. A match is refused by the
 * contract check: the secret would be kept in the manifest, its digest, the record and the logs.
 */
const SECRET_SHAPES: readonly { what: string; re: RegExp }[] = [
  { what: "a GitHub token", re: /\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/ },
  { what: "an AWS access key id", re: /\b(AKIA|ASIA)[A-Z0-9]{16}\b/ },
  { what: "a private key", re: /-----BEGIN [A-Z ]*PRIVATE KEY-----/ },
  { what: "a Slack token", re: /\bxox[abposr]-[A-Za-z0-9-]{10,}/ },
  { what: "a GitLab token", re: /\bglpat-[A-Za-z0-9_-]{20,}/ },
  { what: "an API key (sk-…)", re: /\bsk-[A-Za-z0-9_-]{20,}/ },
  { what: "a JSON web token", re: /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/ },
  { what: "a Vault token", re: /\bhv[sbr]\.[A-Za-z0-9_-]{20,}/ },
];

/** A run of 32+ token characters with letters and digits mixed: a key, not a name. */
const OPAQUE = /[A-Za-z0-9+/=_-]{32,}/g;

/** What `s` looks like when it looks like a secret value (e.g. "a GitHub token"), else null. */
export function secretShape(s: string): string | null {
  for (const { what, re } of SECRET_SHAPES) if (re.test(s)) return what;
  for (const run of s.match(OPAQUE) ?? []) {
    if (/[a-z]/.test(run) && /[A-Z]/.test(run) && /[0-9]/.test(run)) return "a random key";
  }
  return null;
}

const SECRET_FIX =
  "Keep the secret in your secret manager and list only where it lives, e.g. ref: vault://kv/ranker/api-key; then rotate that secret: it has been written down.";

/** Why `ref` cannot be a credential reference (secret-looking first), or null. */
function refProblem(ref: string): string | null {
  const shape = secretShape(ref);
  if (shape) return `looks like a secret value (${shape}), not a reference to one`;
  if (!REF.test(ref))
    return "must be a reference to where the secret lives, scheme://path (e.g. vault://kv/ranker/api-key, aws-sm://ranker/api-key), printable ASCII, at most 512 characters";
  const u = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/.exec(ref)?.[1] ?? "";
  if (u.includes("@")) return "carries a user or password before its host";
  if (ref.includes("?")) return "carries query parameters, which can carry a secret";
  return null;
}

/** The fields a credential entry has; any other is refused (a value is named as such). */
const ENTRY_KEYS = ["ref", "revoke_tool"];
/** Field names that would hold the secret itself. */
const VALUE_KEYS = /^(value|secret|password|passwd|token|key|api_key|private_key|data)$/i;

/** One credential the model's service uses, by reference (`credentials[i]` of a recipe). */
export const CredentialRef = z
  .object({
    ref: z
      .string({ error: "ref must be a reference such as vault://kv/ranker/api-key" })
      .max(512, "ref must be at most 512 characters")
      .describe(
        "Where the secret lives, scheme://path (vault://, aws-sm://, gcp-sm://, …): never the secret itself.",
      ),
    revoke_tool: z
      .string({ error: "revoke_tool must name an allowlisted runner tool" })
      .regex(TOOL, "revoke_tool is named as in the allowlist, e.g. revoke-vault-token")
      .describe(
        "Allowlisted runner tool that revokes or rotates the credential and checks that the old one is refused.",
      ),
  })
  .catchall(z.unknown())
  .superRefine((c, ctx) => {
    if (typeof c.ref === "string") {
      const p = refProblem(c.ref);
      if (p)
        ctx.addIssue({
          code: "custom",
          path: ["ref"],
          message: `ref ${p}`,
          ...(p.startsWith("looks like a secret") ? { params: { fix: SECRET_FIX } } : {}),
        });
    }
    for (const [k, v] of Object.entries(c)) {
      if (ENTRY_KEYS.includes(k)) continue;
      const secret = VALUE_KEYS.test(k) || (typeof v === "string" && secretShape(v) !== null);
      ctx.addIssue({
        code: "custom",
        path: [k],
        message: secret
          ? `\`${k}\` holds a credential's value: a recipe only ever holds the reference`
          : `unknown field \`${k}\` in a credential (it has ref and revoke_tool)`,
        ...(secret ? { params: { fix: SECRET_FIX } } : {}),
      });
    }
  });
export type CredentialRef = { ref: string; revoke_tool: string };

/** `credentials` of a recipe: the references, each once. */
export const Credentials = z
  .array(CredentialRef)
  .max(MAX_CREDENTIALS, `a recipe lists at most ${MAX_CREDENTIALS} credentials`)
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((c, i) => {
      if (typeof c.ref !== "string") return;
      if (seen.has(c.ref))
        ctx.addIssue({
          code: "custom",
          path: [i, "ref"],
          message: `ref ${c.ref} is listed twice`,
        });
      seen.add(c.ref);
    });
  })
  .describe(
    "Credentials the model's service uses, by reference only, each with the runner tool that revokes or rotates it (baton revoke-credential).",
  );

/** The allowlist problems of `credentials` (over the raw input, its well-typed parts). */
export function credentialToolProblems(
  input: unknown,
  allowlist: readonly string[],
): { path: string; message: string; fix: string }[] {
  const out: { path: string; message: string; fix: string }[] = [];
  arr(obj(input)?.credentials).forEach((raw, i) => {
    const tool = obj(raw)?.revoke_tool;
    if (typeof tool === "string" && TOOL.test(tool) && !allowlist.includes(tool))
      out.push({
        path: `credentials.${i}.revoke_tool`,
        message: `tool \`${tool}\` is not in the runner's allowlist`,
        fix: `Use an allowlisted tool (${allowlist.join(", ")}), or add \`${tool}\` to scripts/release/allowlist.json and TOOL_ALLOWLIST after review.`,
      });
  });
  return out;
}

// ---------------------------------------------------------------- the verb and its book

/** `revoke` ends the credential; `rotate` replaces it (the tool writes the new one where the ref points). */
export const REVOCATION_MODES = ["revoke", "rotate"] as const;
export type RevocationMode = (typeof REVOCATION_MODES)[number];

/**
 * The check a revoke tool writes to checks.json to verify its own work: status `pass` only when
 * the old credential, presented to its issuer, is refused.
 */
export const REFUSED_CHECK = "old_credential_refused";

/** The body of `POST /v1/models/:model/credentials/revoke`. */
export const RevokeBody = z
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
  .strict();
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
