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
 * Here: the recipe's side (the schema, the secret refusal, the allowlist rule); the verb's book
 * and verdict are in credential-revocation.ts. Pure.
 */
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";
import { allowlistFix } from "./allowlist.ts";
import { asArray as arr, asObject as obj } from "./json.ts";

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
export const CredentialRef = lazySchema(() =>
  z
    .object({
      ref: z
        .string({ error: "ref must be a reference such as vault://kv/ranker/api-key" })
        .max(512, "ref must be at most 512 characters")
        .describe(
          "Where the secret lives, scheme://path (vault://, aws-sm://, gcp-sm://, …): never the secret itself.",
        ),
      revoke_tool: z
        .string({ error: "revoke_tool must name an allowlisted runner tool" })
        .regex(TOOL, "revoke_tool is named as in the allowlist: lowercase letters, digits and '-'")
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
    }),
);
export type CredentialRef = { ref: string; revoke_tool: string };

/** `credentials` of a recipe: the references, each once. */
export const Credentials = lazySchema(() =>
  z
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
            params: {
              fix: `List each credential once: remove entry ${i} or give it the reference it was meant to have.`,
            },
          });
        seen.add(c.ref);
      });
    })
    .describe(
      "Credentials the model's service uses, by reference only, each with the runner tool that revokes or rotates it (baton revoke-credential).",
    ),
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
        fix: allowlistFix(tool, allowlist),
      });
  });
  return out;
}
