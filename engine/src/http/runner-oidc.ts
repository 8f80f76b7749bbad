/**
 * The GitHub OIDC runner credential (docs/runner.md "OIDC credential"): the release-step action
 * sends `Authorization: Bearer <GitHub Actions OIDC token>` (audience = the engine's configured
 * audience) with each preflight and callback; the engine verifies it with `jose` against the
 * issuer's JWKS and checks the claims that say which repository, workflow, event and run sent it.
 *
 * Every refusal carries a precise reason for the engine's log; the HTTP answer is one identical
 * 401 body whatever the reason (no oracle), or 503 when the JWKS cannot be read (fail closed:
 * nothing is accepted without a verified key). Portable: jose uses WebCrypto and fetch only.
 */
import { createRemoteJWKSet, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from "jose";
import {
  JOSEError,
  JWKSInvalid,
  JWKSMultipleMatchingKeys,
  JWKSNoMatchingKey,
  JWKSTimeout,
} from "jose/errors";
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";

/** How preflights and callbacks are authenticated (BATON_RUNNER_CREDENTIAL). */
export type RunnerCredentialMode = "hmac" | "oidc" | "hmac+oidc";

/** What an OIDC runner token must say; every string is compared exactly. */
export interface RunnerOidcSettings {
  /** `iss`, default `https://token.actions.githubusercontent.com`. */
  issuer: string;
  /** `aud`: the audience the action asks for (default the engine's public URL). */
  audience: string;
  /** Where the signing keys are read (default `<issuer>/.well-known/jwks`). */
  jwksUrl: string;
  /** `repository` (owner/name) whose workflow runs the release steps. */
  repository: string;
  /** `repository_id`, when set (survives a rename-and-recreate of `repository`). */
  repositoryId?: string;
  /** `workflow_ref`, e.g. `acme/models/.github/workflows/release-step.yml@refs/heads/main`. */
  workflowRef: string;
  /** `job_workflow_ref`, when set (a reusable workflow runs the job). */
  jobWorkflowRef?: string;
  /** `event_name`, default `repository_dispatch` (how the engine dispatches). */
  eventName: string;
  /** `environment`, when set (the job's deployment environment). */
  environment?: string;
  /** Clock skew allowed on `exp`, `nbf` and `iat`, in seconds (default 60). */
  clockToleranceSec: number;
  /** Oldest `iat` accepted, in seconds (default 900; GitHub's tokens live minutes). */
  maxTokenAgeSec: number;
}

/** The verified claims a request is bound with. */
export interface RunnerClaims {
  jti: string;
  /** Token expiry, epoch ms (the jti is kept until then plus the skew). */
  expiresAtMs: number;
  repository: string;
  run_id: string;
  run_attempt: number;
}

/** Outcome of one check; `reason` is for the log only, never for the answer. */
export type RunnerOidcResult =
  | { ok: true; claims: RunnerClaims }
  | { ok: false; status: 401 | 503; reason: string };

const GITHUB_ISSUER = "https://token.actions.githubusercontent.com";

/** One key set per URL, per process or isolate, so keys are cached across requests. */
const keySets = new Map<string, JWTVerifyGetKey>();

function keySet(url: string, timeoutMs: number): JWTVerifyGetKey {
  let ks = keySets.get(`${timeoutMs} ${url}`);
  if (!ks) {
    ks = createRemoteJWKSet(new URL(url), {
      timeoutDuration: timeoutMs,
      cooldownDuration: 30_000,
      cacheMaxAge: 10 * 60_000,
    });
    keySets.set(`${timeoutMs} ${url}`, ks);
  }
  return ks;
}

/** True when a jose error means the key set could not be read (not a bad token). */
function keySetUnreadable(e: unknown): boolean {
  if (e instanceof JWKSTimeout || e instanceof JWKSInvalid) return true;
  if (e instanceof JWKSNoMatchingKey || e instanceof JWKSMultipleMatchingKeys) return false;
  if (e instanceof JOSEError) {
    // A non-200 answer of the JWKS URL is a generic JOSEError naming the response.
    return /JSON Web Key Set/i.test(e.message);
  }
  // fetch's own failure (connection refused, DNS) is a TypeError, not a JOSEError.
  return true;
}

const claimText = (p: JWTPayload, name: string): string | null => {
  const v = p[name];
  return typeof v === "string" ? v : null;
};

/** Verifies OIDC runner tokens against one issuer's JWKS and the expected claims. */
export class RunnerOidcVerifier {
  private readonly keys: JWTVerifyGetKey;

  /** @param jwksTimeoutMs deadline of one JWKS read (default 5,000). */
  constructor(
    readonly settings: RunnerOidcSettings,
    jwksTimeoutMs = 5_000,
  ) {
    this.keys = keySet(settings.jwksUrl, jwksTimeoutMs);
  }

  /**
   * Verifies `token` (the bearer value, or null) at `nowMs`: signature (RS256 only, a key of the
   * JWKS), `iss`, `aud`, `exp`/`nbf`/`iat` within the skew and the age bound, then
   * `repository`, `repository_id`, `workflow_ref`, `job_workflow_ref`, `event_name` and
   * `environment` as configured, and the presence of `jti`, `run_id`, `run_attempt`.
   * Never throws. The caller binds `run_id`/`run_attempt` to the step run and spends the jti.
   */
  async verify(token: string | null, nowMs: number): Promise<RunnerOidcResult> {
    const s = this.settings;
    const no = (reason: string): RunnerOidcResult => ({ ok: false, status: 401, reason });
    if (!token) return no("no bearer token");
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.keys, {
        issuer: s.issuer,
        audience: s.audience,
        algorithms: ["RS256"],
        clockTolerance: s.clockToleranceSec,
        maxTokenAge: s.maxTokenAgeSec,
        currentDate: new Date(nowMs),
        requiredClaims: ["exp", "iat", "jti"],
      }));
    } catch (e) {
      const detail = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      if (keySetUnreadable(e)) {
        return { ok: false, status: 503, reason: `JWKS ${s.jwksUrl} unreadable (${detail})` };
      }
      return no(detail);
    }
    const expect: [string, string | undefined][] = [
      ["repository", s.repository],
      ["repository_id", s.repositoryId],
      ["workflow_ref", s.workflowRef],
      ["job_workflow_ref", s.jobWorkflowRef],
      ["event_name", s.eventName],
      ["environment", s.environment],
    ];
    for (const [name, want] of expect) {
      if (want === undefined) continue;
      const got = claimText(payload, name);
      if (got !== want) return no(`claim ${name} is ${JSON.stringify(got)}, expected ${want}`);
    }
    const jti = claimText(payload, "jti");
    const runId = claimText(payload, "run_id");
    const attempt = claimText(payload, "run_attempt");
    if (!jti || jti.length > 200) return no("claim jti missing or too long");
    if (!runId || !/^[0-9]{1,20}$/.test(runId)) return no("claim run_id missing or not digits");
    if (!attempt || !/^[0-9]{1,9}$/.test(attempt) || Number(attempt) < 1)
      return no("claim run_attempt missing or not a positive number");
    return {
      ok: true,
      claims: {
        jti,
        expiresAtMs: ((payload.exp ?? 0) + s.clockToleranceSec) * 1000,
        repository: s.repository,
        run_id: runId,
        run_attempt: Number(attempt),
      },
    };
  }
}

const text = lazySchema(() => z.string().trim().min(1));
const OidcEnv = lazySchema(() =>
  z.object({
    BATON_RUNNER_CREDENTIAL: z
      .enum(["hmac", "oidc", "hmac+oidc"], {
        error: "BATON_RUNNER_CREDENTIAL must be hmac, oidc or hmac+oidc",
      })
      .default("hmac"),
    // Both URLs are checked with every URL setting (url-settings.ts, at start-up).
    BATON_OIDC_ISSUER: z.string().trim().default(GITHUB_ISSUER),
    BATON_OIDC_AUDIENCE: text.optional(),
    BATON_OIDC_JWKS_URL: z.string().trim().optional(),
    BATON_OIDC_REPOSITORY: z
      .string()
      .regex(/^[\w.-]+\/[\w.-]+$/, "BATON_OIDC_REPOSITORY must be owner/name")
      .optional(),
    BATON_OIDC_REPOSITORY_ID: z
      .string()
      .regex(/^[0-9]{1,20}$/, "BATON_OIDC_REPOSITORY_ID must be digits")
      .optional(),
    BATON_OIDC_WORKFLOW_REF: z
      .string()
      .regex(
        /^[\w.-]+\/[\w.-]+\/\.github\/workflows\/[^@\s]+@refs\/\S+$/,
        "BATON_OIDC_WORKFLOW_REF must be owner/name/.github/workflows/FILE@refs/heads/BRANCH",
      )
      .optional(),
    BATON_OIDC_JOB_WORKFLOW_REF: text.optional(),
    BATON_OIDC_EVENT_NAME: text.default("repository_dispatch"),
    BATON_OIDC_ENVIRONMENT: text.optional(),
  }),
);

/**
 * The engine's environment schema as it applies to `env`: with BATON_RUNNER_CREDENTIAL=oidc and
 * no BATON_CALLBACK_SECRETS, the shared secrets are not needed and read as `[]` (docs/runner.md).
 * `schema` must declare BATON_CALLBACK_SECRETS as a `string[]`.
 */
export function envSchemaFor<S extends z.ZodObject>(schema: S, env: Record<string, unknown>): S {
  const oidcOnly = env.BATON_RUNNER_CREDENTIAL === "oidc" && !env.BATON_CALLBACK_SECRETS;
  if (!oidcOnly) return schema;
  return schema.extend({
    BATON_CALLBACK_SECRETS: z
      .unknown()
      .optional()
      .transform((): string[] => []),
  }) as unknown as S;
}

/** The runner credential read from the environment, or the problems with it. */
export type RunnerCredentialConfig =
  | { ok: true; mode: RunnerCredentialMode; oidc: RunnerOidcSettings | null }
  | { ok: false; problems: { name: string; message: string }[] };

/**
 * Reads BATON_RUNNER_CREDENTIAL and BATON_OIDC_* (docs/engine.md "Configuration").
 * `defaults.audience` is the engine's public URL; `defaults.repository` its GITHUB_REPOSITORY.
 * Modes with `oidc` need a repository and BATON_OIDC_WORKFLOW_REF.
 */
export function runnerCredentialFromEnv(
  env: Record<string, unknown>,
  defaults: { audience: string; repository?: string | null },
): RunnerCredentialConfig {
  const clean = Object.fromEntries(
    Object.entries(env).filter(([k, v]) => /^BATON_(OIDC_|RUNNER_CREDENTIAL)/.test(k) && v !== ""),
  );
  const r = OidcEnv.safeParse(clean);
  if (!r.success) {
    return {
      ok: false,
      problems: r.error.issues.map((i) => ({ name: String(i.path[0]), message: i.message })),
    };
  }
  const e = r.data;
  if (e.BATON_RUNNER_CREDENTIAL === "hmac") return { ok: true, mode: "hmac", oidc: null };
  const repository = e.BATON_OIDC_REPOSITORY ?? defaults.repository ?? null;
  const problems: { name: string; message: string }[] = [];
  if (!repository) {
    problems.push({
      name: "BATON_OIDC_REPOSITORY",
      message: `BATON_OIDC_REPOSITORY (or GITHUB_REPOSITORY) must name the repository whose workflow runs release steps, with BATON_RUNNER_CREDENTIAL=${e.BATON_RUNNER_CREDENTIAL}`,
    });
  }
  if (!e.BATON_OIDC_WORKFLOW_REF) {
    problems.push({
      name: "BATON_OIDC_WORKFLOW_REF",
      message: `BATON_OIDC_WORKFLOW_REF must name the release-step workflow on the default branch (owner/name/.github/workflows/release-step.yml@refs/heads/main), with BATON_RUNNER_CREDENTIAL=${e.BATON_RUNNER_CREDENTIAL}`,
    });
  }
  if (problems.length > 0 || !repository || !e.BATON_OIDC_WORKFLOW_REF) {
    return { ok: false, problems };
  }
  const issuer = e.BATON_OIDC_ISSUER.replace(/\/+$/, "");
  return {
    ok: true,
    mode: e.BATON_RUNNER_CREDENTIAL,
    oidc: {
      issuer,
      audience: e.BATON_OIDC_AUDIENCE ?? defaults.audience,
      jwksUrl: e.BATON_OIDC_JWKS_URL ?? `${issuer}/.well-known/jwks`,
      repository,
      ...(e.BATON_OIDC_REPOSITORY_ID ? { repositoryId: e.BATON_OIDC_REPOSITORY_ID } : {}),
      workflowRef: e.BATON_OIDC_WORKFLOW_REF,
      ...(e.BATON_OIDC_JOB_WORKFLOW_REF ? { jobWorkflowRef: e.BATON_OIDC_JOB_WORKFLOW_REF } : {}),
      eventName: e.BATON_OIDC_EVENT_NAME,
      ...(e.BATON_OIDC_ENVIRONMENT ? { environment: e.BATON_OIDC_ENVIRONMENT } : {}),
      clockToleranceSec: 60,
      maxTokenAgeSec: 900,
    },
  };
}
