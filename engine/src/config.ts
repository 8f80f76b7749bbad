/**
 * Engine configuration, read once from the environment at start-up and validated with zod
 * (docs/engine.md "Configuration"; names from the shared decisions). A bad or missing value
 * stops the engine with one message per variable naming it and the fix.
 */

import { readFileSync } from "node:fs";
import path from "node:path";
import * as z from "zod";
import { appPrivateKeyProblem } from "./adapters/github/app-key.ts";
import { type AdmissionConfig, admissionFromEnv } from "./admission/policy.ts";
import { DeploymentEnvironmentSetting, DeploymentRefSetting } from "./domain/deployments.ts";
import { BatonError, type Problem } from "./domain/errors.ts";
import { NOTICE_KINDS, type NoticeKind } from "./domain/notifications.ts";
import {
  envSchemaFor,
  type RunnerCredentialMode,
  type RunnerOidcSettings,
  runnerCredentialFromEnv,
} from "./http/runner-oidc.ts";
import { operatorSecretProblems } from "./secret-settings.ts";
import { DEFAULT_RETENTION, type RetentionPolicy } from "./service/retention.ts";
import { isLoopbackHost, urlSettingProblems } from "./url-settings.ts";

/** The validated configuration. Times in ms. */
export interface EngineConfig {
  /** `postgres://…` selects Postgres; null selects SQLite in `dataDir`. */
  databaseUrl: string | null;
  /** Folder of the embedded SQLite file (`baton.sqlite`). */
  dataDir: string;
  port: number;
  /**
   * Listen address (BATON_HOST). `loadConfig` fills it (default 127.0.0.1: loopback only,
   * matching the default public URL); optional so hand-built configs need not name it.
   */
  host?: string;
  /** Base URL of this engine as runners reach it; callback URLs are built from it. */
  publicUrl: string;
  /** Callback secret rotation list; the first one signs. At least one, unless OIDC alone. */
  callbackSecrets: string[];
  operatorToken: string;
  /**
   * Named operator tokens (BATON_OPERATORS, `name=token,…`): one per person; an action sent
   * with one is recorded as `operator:<name>`. Empty when unset.
   */
  operators?: NamedOperator[];
  /** Read-only token for the dashboard and GET routes; null = operator token only. */
  viewerToken: string | null;
  /** Control-plane base URL; null = the reference control plane in memory. */
  controlPlaneUrl: string | null;
  /**
   * Recipe files whose lanes the embedded control plane declares at start (baseline weights,
   * not advertised), for lanes it does not know yet; `[]` = none (BATON_EMBEDDED_LANES).
   */
  embeddedLanes?: string[];
  /**
   * Prometheus base URL the gates read (BATON_PROMETHEUS_URL, docs/gate.md); absent = no
   * metrics source: every gate's evidence is missing, so a gated wave ends inconclusive.
   */
  prometheusUrl?: string | null;
  /**
   * Bearer token of control-plane writes (BATON_CONTROL_PLANE_TOKEN); required with
   * `controlPlaneUrl`. With the embedded control plane: its token (default a random one).
   * Optional so hand-built configs need not name it.
   */
  controlPlaneToken?: string | null;
  dispatcher: "github" | "local";
  githubRepository: string | null;
  githubToken: string | null;
  githubApp: { appId: string; privateKey: string; installationId: string } | null;
  /**
   * Dispatch budgets of this engine process (GitHub's secondary limits by default: 80 per
   * minute, 500 per hour, 100 at once); optional so hand-built configs need not name it.
   */
  githubPacing?: { perMinute: number; perHour: number; maxConcurrent: number };
  /**
   * REST API root (GITHUB_API_URL): `https://api.github.com` by default; GitHub Enterprise
   * Server: `https://HOST/api/v3`. Optional so hand-built configs need not name it.
   */
  githubApiUrl?: string;
  /** Per-request timeout of GitHub calls in ms (BATON_GITHUB_TIMEOUT_MS), default 10,000. */
  githubTimeoutMs?: number;
  /** Retention of finished releases (service/retention.ts); optional, default 7 days. */
  retention?: RetentionPolicy;
  /**
   * Drift observation interval (ms, BATON_DRIFT_INTERVAL_MS, default 60,000; 0 = off);
   * absent = off (docs/drift.md).
   */
  driftIntervalMs?: number;
  /**
   * Drift settle time (ms, BATON_DRIFT_SETTLE_MS, default: one observation interval): a lane
   * whose deciding release ended less than this ago is not judged yet (docs/drift.md).
   */
  driftSettleMs?: number;
  /** Reconciler interval (ms). */
  tickMs: number;
  /** Local dispatcher: the SSH private key the runner's tools use (BATON_SSH_KEY_FILE). */
  sshKey: string | null;
  /** Notifications (docs/engine.md "Notifications"); absent = none. */
  notify?: NotifyConfig;
  /**
   * GitHub Deployments (BATON_GITHUB_DEPLOYMENTS = the default environment, e.g. `production`;
   * BATON_GITHUB_DEPLOYMENT_REF, default `main`): each release shows as a deployment with
   * statuses, through the engine's GitHub credential. Absent or null = off.
   */
  githubDeployments?: { environment: string; ref: string } | null;
  /**
   * How manifests are admitted (docs/trust.md): `BATON_TRUST_POLICY` enforces a policy;
   * `BATON_ADMISSION=off` skips the checks; neither refuses every start as unsigned.
   * `loadConfig` always fills it; a config built by hand without it runs with admission off.
   */
  admission?: AdmissionConfig;
  /**
   * How runners authenticate preflights and callbacks (BATON_RUNNER_CREDENTIAL, BATON_OIDC_*;
   * docs/runner.md): absent = HMAC only.
   */
  runnerCredential?: { mode: RunnerCredentialMode; oidc: RunnerOidcSettings | null };
}

/** Who is told, from `BATON_NOTIFY_*`. Channels absent are off. */
export interface NotifyConfig {
  /** Signed JSON notices (the `Notice` shape) to this URL. */
  webhook: { url: string; secret: string } | null;
  /** Slack incoming-webhook shape to this URL (signed too when a secret is set). */
  slack: { url: string; secret: string | null } | null;
  /** Commit comments through the engine's GitHub token. */
  github: boolean;
  events: NoticeKind[];
  /** First retry delay (ms; doubles, capped at 5 min) and tries in all. */
  retryBaseMs: number;
  maxTries: number;
}

const secretText = (name: string) =>
  z
    .string({ error: `${name} is not set` })
    .trim()
    .min(16, `${name} must be at least 16 characters`);

const Env = z.object({
  DATABASE_URL: z
    .string()
    .trim()
    .regex(/^postgres(ql)?:\/\//, "DATABASE_URL must start with postgres:// (unset it for SQLite)")
    .optional(),
  BATON_DATA_DIR: z.string().trim().min(1).default("./.baton"),
  PORT: z.coerce
    .number({ error: "PORT must be a number" })
    .int("PORT must be an integer")
    .min(1, "PORT must be 1..65535")
    .max(65535, "PORT must be 1..65535")
    .default(8787),
  BATON_HOST: z
    .string()
    .trim()
    .regex(
      /^[A-Za-z0-9.:-]+$/,
      "BATON_HOST must be an address to listen on, e.g. 127.0.0.1, 0.0.0.0 or ::",
    )
    .default("127.0.0.1"),
  // The URL settings are checked by urlSettingProblems (url-settings.ts), the one rule for all.
  BATON_PUBLIC_URL: z.string().trim().optional(),
  BATON_CALLBACK_SECRETS: z
    .string({ error: "BATON_CALLBACK_SECRETS is not set" })
    .transform((s) =>
      s
        .split(",")
        .map((x) => x.trim())
        .filter(Boolean),
    )
    .pipe(
      z
        .array(z.string().min(16, "each callback secret must be at least 16 characters"))
        .min(1, "BATON_CALLBACK_SECRETS needs at least one secret"),
    ),
  BATON_OPERATOR_TOKEN: secretText("BATON_OPERATOR_TOKEN"),
  BATON_VIEWER_TOKEN: secretText("BATON_VIEWER_TOKEN").optional(),
  BATON_OPERATORS: z
    .string()
    .transform((s, ctx) => {
      const parsed = parseOperators(s);
      if (typeof parsed === "string") {
        ctx.addIssue({ code: "custom", message: parsed });
        return z.NEVER;
      }
      return parsed;
    })
    .optional(),
  BATON_CONTROL_PLANE_URL: z.string().trim().optional(),
  BATON_PROMETHEUS_URL: z.string().trim().optional(),
  BATON_ALLOW_HTTP: z.string().trim().optional(),
  BATON_CONTROL_PLANE_TOKEN: secretText("BATON_CONTROL_PLANE_TOKEN").optional(),
  BATON_EMBEDDED_LANES: z
    .string()
    .transform((v) =>
      v
        .split(",")
        .map((f) => f.trim())
        .filter((f) => f.length > 0),
    )
    .optional(),
  BATON_DISPATCHER: z
    .enum(["github", "local"], { error: "BATON_DISPATCHER must be github or local" })
    .default("local"),
  GITHUB_REPOSITORY: z
    .string()
    .regex(/^[\w.-]+\/[\w.-]+$/, "GITHUB_REPOSITORY must be owner/name")
    .optional(),
  GITHUB_TOKEN: z.string().min(1).optional(),
  GITHUB_APP_ID: z
    .string()
    .regex(/^[0-9]+$/, "GITHUB_APP_ID must be digits")
    .optional(),
  GITHUB_APP_PRIVATE_KEY: z.string().min(1).optional(),
  GITHUB_API_URL: z.string().trim().optional(),
  BATON_GITHUB_TIMEOUT_MS: z.coerce
    .number({ error: "BATON_GITHUB_TIMEOUT_MS must be a number" })
    .int("BATON_GITHUB_TIMEOUT_MS must be an integer")
    .min(100, "BATON_GITHUB_TIMEOUT_MS must be 100..120000")
    .max(120_000, "BATON_GITHUB_TIMEOUT_MS must be 100..120000")
    .default(10_000),
  GITHUB_APP_INSTALLATION_ID: z
    .string()
    .regex(/^[0-9]+$/, "GITHUB_APP_INSTALLATION_ID must be digits")
    .optional(),
  BATON_GITHUB_DISPATCH_PER_MINUTE: z.coerce
    .number({ error: "BATON_GITHUB_DISPATCH_PER_MINUTE must be a number" })
    .int("BATON_GITHUB_DISPATCH_PER_MINUTE must be an integer")
    .min(1, "BATON_GITHUB_DISPATCH_PER_MINUTE must be at least 1")
    .max(100000, "BATON_GITHUB_DISPATCH_PER_MINUTE must be at most 100000")
    .default(80),
  BATON_GITHUB_DISPATCH_PER_HOUR: z.coerce
    .number({ error: "BATON_GITHUB_DISPATCH_PER_HOUR must be a number" })
    .int("BATON_GITHUB_DISPATCH_PER_HOUR must be an integer")
    .min(1, "BATON_GITHUB_DISPATCH_PER_HOUR must be at least 1")
    .max(1000000, "BATON_GITHUB_DISPATCH_PER_HOUR must be at most 1000000")
    .default(500),
  BATON_GITHUB_MAX_CONCURRENT: z.coerce
    .number({ error: "BATON_GITHUB_MAX_CONCURRENT must be a number" })
    .int("BATON_GITHUB_MAX_CONCURRENT must be an integer")
    .min(1, "BATON_GITHUB_MAX_CONCURRENT must be at least 1")
    .max(100, "BATON_GITHUB_MAX_CONCURRENT must be at most 100")
    .default(100),
  BATON_RETENTION_DAYS: z.coerce
    .number({ error: "BATON_RETENTION_DAYS must be a number" })
    .min(0, "BATON_RETENTION_DAYS must be 0 (off) or more")
    .max(36_500, "BATON_RETENTION_DAYS must be at most 36500")
    .default(7),
  BATON_SSH_KEY_FILE: z.string().min(1).optional(),
  BATON_NOTIFY_WEBHOOK_URL: z.string().trim().optional(),
  BATON_NOTIFY_WEBHOOK_SECRET: secretText("BATON_NOTIFY_WEBHOOK_SECRET").optional(),
  BATON_NOTIFY_SLACK_URL: z.string().trim().optional(),
  BATON_NOTIFY_GITHUB: z
    .enum(["commit_comment", "off"], {
      error: "BATON_NOTIFY_GITHUB must be commit_comment or off",
    })
    .default("off"),
  BATON_GITHUB_DEPLOYMENTS: DeploymentEnvironmentSetting.optional(),
  BATON_GITHUB_DEPLOYMENT_REF: DeploymentRefSetting,
  BATON_NOTIFY_EVENTS: z
    .string()
    .transform((s) =>
      s
        .split(",")
        .map((x) => x.trim())
        .filter(Boolean),
    )
    .pipe(
      z
        .array(
          z.enum(NOTICE_KINDS, {
            error: `BATON_NOTIFY_EVENTS lists notice kinds: ${NOTICE_KINDS.join(", ")}`,
          }),
        )
        .min(1, "BATON_NOTIFY_EVENTS needs at least one kind (unset it for all)"),
    )
    .optional(),
  BATON_NOTIFY_RETRY_MS: z.coerce
    .number({ error: "BATON_NOTIFY_RETRY_MS must be a number" })
    .int()
    .min(10, "BATON_NOTIFY_RETRY_MS must be at least 10")
    .max(300_000, "BATON_NOTIFY_RETRY_MS must be at most 300000")
    .default(5_000),
  BATON_NOTIFY_MAX_TRIES: z.coerce
    .number({ error: "BATON_NOTIFY_MAX_TRIES must be a number" })
    .int()
    .min(1, "BATON_NOTIFY_MAX_TRIES must be 1..50")
    .max(50, "BATON_NOTIFY_MAX_TRIES must be 1..50")
    .default(8),
  BATON_DRIFT_INTERVAL_MS: z.coerce
    .number({ error: "BATON_DRIFT_INTERVAL_MS must be a number (ms; 0 turns drift detection off)" })
    .int()
    .min(0, "BATON_DRIFT_INTERVAL_MS must be 0 (off) or at least 1000")
    .max(86_400_000, "BATON_DRIFT_INTERVAL_MS must be at most 86400000 (a day)")
    .refine((v) => v === 0 || v >= 1000, "BATON_DRIFT_INTERVAL_MS must be 0 (off) or at least 1000")
    .default(60_000),
  BATON_DRIFT_SETTLE_MS: z.coerce
    .number({ error: "BATON_DRIFT_SETTLE_MS must be a number (ms; unset: one drift interval)" })
    .int()
    .min(0, "BATON_DRIFT_SETTLE_MS must be 0..86400000 (ms)")
    .max(86_400_000, "BATON_DRIFT_SETTLE_MS must be 0..86400000 (ms)")
    .optional(),
  BATON_TICK_MS: z.coerce
    .number({ error: "BATON_TICK_MS must be a number" })
    .int()
    .min(50, "BATON_TICK_MS must be at least 50")
    .max(600_000, "BATON_TICK_MS must be at most 600000")
    .default(1000),
});

/** Cross-field rules of notifications, checked even when other variables are bad. */
function notifyProblems(
  e: Record<string, string | undefined>,
): { path: string; message: string }[] {
  const out: { path: string; message: string }[] = [];
  if (e.BATON_NOTIFY_WEBHOOK_URL && !e.BATON_NOTIFY_WEBHOOK_SECRET) {
    out.push({
      path: "BATON_NOTIFY_WEBHOOK_SECRET",
      message:
        "BATON_NOTIFY_WEBHOOK_SECRET is required with BATON_NOTIFY_WEBHOOK_URL (notices are signed)",
    });
  }
  if (e.BATON_NOTIFY_GITHUB === "commit_comment" && (!e.GITHUB_REPOSITORY || !e.GITHUB_TOKEN)) {
    out.push({
      path: "BATON_NOTIFY_GITHUB",
      message: "BATON_NOTIFY_GITHUB=commit_comment needs GITHUB_REPOSITORY and GITHUB_TOKEN",
    });
  }
  return out;
}

/** `operatorSecretProblems` on the raw variables, even when others are bad. */
function sharedSecretProblems(e: Record<string, string | undefined>) {
  const operators = e.BATON_OPERATORS ? parseOperators(e.BATON_OPERATORS) : [];
  return operatorSecretProblems(
    e.BATON_CALLBACK_SECRETS,
    e.BATON_OPERATOR_TOKEN,
    typeof operators === "string" ? [] : operators,
  );
}

/** GitHub Deployments post through the engine's GitHub credential. */
function deploymentsProblems(
  e: Record<string, string | undefined>,
): { path: string; message: string }[] {
  if (!e.BATON_GITHUB_DEPLOYMENTS) return [];
  const app = e.GITHUB_APP_ID && e.GITHUB_APP_PRIVATE_KEY && e.GITHUB_APP_INSTALLATION_ID;
  return !e.GITHUB_REPOSITORY || (!e.GITHUB_TOKEN && !app)
    ? [
        {
          path: "BATON_GITHUB_DEPLOYMENTS",
          message:
            "BATON_GITHUB_DEPLOYMENTS needs GITHUB_REPOSITORY and GITHUB_TOKEN or a GitHub App (deployments: write)",
        },
      ]
    : [];
}

/** A control plane elsewhere needs the write credential (the engine never writes without one). */
function controlPlaneProblems(
  e: Record<string, string | undefined>,
): { path: string; message: string }[] {
  return e.BATON_CONTROL_PLANE_URL && !e.BATON_CONTROL_PLANE_TOKEN
    ? [
        {
          path: "BATON_CONTROL_PLANE_TOKEN",
          message:
            "BATON_CONTROL_PLANE_TOKEN is required with BATON_CONTROL_PLANE_URL (control-plane writes carry Authorization: Bearer <token>)",
        },
      ]
    : [];
}

/** Cross-field rules of the GitHub dispatcher, checked even when other variables are bad. */
function githubProblems(
  e: Record<string, string | undefined>,
): { path: string; message: string }[] {
  if (e.BATON_DISPATCHER !== "github") return [];
  const out: { path: string; message: string }[] = [];
  if (!e.GITHUB_REPOSITORY) {
    out.push({
      path: "GITHUB_REPOSITORY",
      message: "GITHUB_REPOSITORY is required when BATON_DISPATCHER=github",
    });
  }
  const app = e.GITHUB_APP_ID || e.GITHUB_APP_PRIVATE_KEY || e.GITHUB_APP_INSTALLATION_ID;
  if (!e.GITHUB_TOKEN && !app) {
    out.push({
      path: "GITHUB_TOKEN",
      message: "BATON_DISPATCHER=github needs GITHUB_TOKEN or a GitHub App",
    });
  }
  if (app && !(e.GITHUB_APP_ID && e.GITHUB_APP_PRIVATE_KEY && e.GITHUB_APP_INSTALLATION_ID)) {
    out.push({
      path: "GITHUB_APP_ID",
      message:
        "a GitHub App needs all three of GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY, GITHUB_APP_INSTALLATION_ID",
    });
  }
  if (e.GITHUB_APP_PRIVATE_KEY) {
    const why = appPrivateKeyProblem(e.GITHUB_APP_PRIVATE_KEY);
    if (why) out.push({ path: "GITHUB_APP_PRIVATE_KEY", message: `GITHUB_APP_PRIVATE_KEY ${why}` });
  }
  return out;
}

const FIX: Record<string, string> = {
  BATON_EMBEDDED_LANES:
    "unset it and declare the lanes on your control plane (PUT /v1/lanes/{lane}, docs/control-plane.md)",
  BATON_DATABASE_URL: "rename it to DATABASE_URL (postgres://user:pass@host:5432/db)",
  BATON_HOST:
    "set BATON_HOST to 127.0.0.1 (this machine only) or 0.0.0.0 (every interface; then set BATON_PUBLIC_URL and the tokens)",
  DATABASE_URL:
    "set postgres://user:pass@host:5432/db, or unset it to use the embedded SQLite file",
  BATON_CALLBACK_SECRETS:
    "set a comma-separated list of random secrets, e.g. BATON_CALLBACK_SECRETS=$(openssl rand -hex 32)",
  BATON_OPERATOR_TOKEN: "set a random token, e.g. BATON_OPERATOR_TOKEN=$(openssl rand -hex 32)",
  BATON_VIEWER_TOKEN: "set a random token of at least 16 characters, or unset it",
  BATON_OPERATORS:
    "set name=token pairs separated by commas, one per person, e.g. BATON_OPERATORS=maria=$(openssl rand -hex 32),lee=$(openssl rand -hex 32), or unset it",
  BATON_CONTROL_PLANE_TOKEN:
    "set the control plane's write token (the reference control plane's BATON_CP_TOKEN), e.g. $(openssl rand -hex 32) on both sides",
  GITHUB_REPOSITORY: "set GITHUB_REPOSITORY=owner/name of the repository holding release-step.yml",
  GITHUB_TOKEN:
    "set GITHUB_TOKEN (contents: write) or GITHUB_APP_ID + GITHUB_APP_PRIVATE_KEY + GITHUB_APP_INSTALLATION_ID",
  GITHUB_APP_ID: "set all three GitHub App variables, or none of them",
  GITHUB_APP_PRIVATE_KEY:
    "paste the whole .pem file the App settings page generated (-----BEGIN RSA PRIVATE KEY----- ... -----END RSA PRIVATE KEY-----; literal \\n for newlines is fine)",
  GITHUB_API_URL:
    "set the REST API root: https://api.github.com (default), or https://HOST/api/v3 for GitHub Enterprise Server",
  BATON_GITHUB_TIMEOUT_MS: "set milliseconds from 100 to 120000, e.g. 10000, or unset it",
  BATON_NOTIFY_WEBHOOK_SECRET:
    "set a random secret of at least 16 characters, e.g. $(openssl rand -hex 32); the receiver verifies x-baton-signature with it",
  BATON_NOTIFY_GITHUB:
    "set GITHUB_REPOSITORY=owner/name and GITHUB_TOKEN, or unset BATON_NOTIFY_GITHUB",
  BATON_GITHUB_DEPLOYMENTS:
    "set it to the environment releases deploy to (e.g. production) with GITHUB_REPOSITORY and a GitHub credential, or unset it",
  BATON_GITHUB_DEPLOYMENT_REF:
    "set the branch deployments name when a recipe pins no tool_revision, e.g. main",
};

function readKey(file: string | undefined): string | null {
  if (!file) return null;
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    throw new BatonError(
      "bad_request",
      `[engine] invalid configuration:\n  - BATON_SSH_KEY_FILE: cannot read ${file} (${(err as Error).message}); fix: point it at the runner's SSH private key file, or unset it`,
      [
        {
          path: "BATON_SSH_KEY_FILE",
          message: `cannot read ${file} (${(err as Error).message})`,
          fix: "point it at the runner's SSH private key file (readable by this user), or unset it",
        },
      ],
    );
  }
}

/**
 * Settings under a name the engine does not read but a user would guess (every other setting
 * is `BATON_*`): refused rather than ignored, so an engine never quietly runs on another store.
 */
function misnamedProblems(env: Record<string, unknown>): { path: string; message: string }[] {
  const misnamed: Record<string, string> = { BATON_DATABASE_URL: "DATABASE_URL" };
  return Object.entries(misnamed)
    .filter(([wrong, right]) => env[wrong] !== undefined && env[right] === undefined)
    .map(([wrong, right]) => ({
      path: wrong,
      message: `${wrong} is not read; the engine reads ${right} (without it the engine would run on its embedded SQLite store)`,
    }));
}

/**
 * Reads and validates the engine's environment.
 * @throws BatonError `bad_request` listing every bad variable (`problems[].path` = its name).
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): EngineConfig {
  // Empty strings mean "unset" (a common shell accident: `export X=`).
  const clean = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v !== ""),
  );
  const r = envSchemaFor(Env, clean).safeParse(clean);
  const port = r.success ? r.data.PORT : 8787;
  const audience = (
    (r.success ? r.data.BATON_PUBLIC_URL : undefined) ?? `http://127.0.0.1:${port}`
  ).replace(/\/+$/, "");
  const rc = runnerCredentialFromEnv(clean, {
    audience,
    repository: typeof clean.GITHUB_REPOSITORY === "string" ? clean.GITHUB_REPOSITORY : null,
  });
  // Admission and the runner's SSH key are read here too, so one error lists every problem.
  const later: { path: string; message: string; fix?: string }[] = [];
  const attempt = <T>(read: () => T): T | null => {
    try {
      return read();
    } catch (err) {
      if (!(err instanceof BatonError) || err.problems.length === 0) throw err;
      later.push(...err.problems);
      return null;
    }
  };
  const admission = attempt(() => admissionFromEnv(clean));
  const sshKey = attempt(() =>
    readKey(typeof clean.BATON_SSH_KEY_FILE === "string" ? clean.BATON_SSH_KEY_FILE : undefined),
  );
  const raw: { path: string; message: string; fix?: string }[] = [
    ...(rc.ok ? [] : rc.problems.map((p) => ({ path: p.name, message: p.message }))),
    ...(r.success
      ? []
      : r.error.issues.map((i) => ({
          path: String(i.path[0] ?? "environment"),
          message: i.message,
        }))),
    ...misnamedProblems(clean),
    ...(clean.BATON_EMBEDDED_LANES && clean.BATON_CONTROL_PLANE_URL
      ? [
          {
            path: "BATON_EMBEDDED_LANES",
            message:
              "BATON_EMBEDDED_LANES declares lanes on the embedded control plane only, and BATON_CONTROL_PLANE_URL names another one",
          },
        ]
      : []),
    ...githubProblems(clean),
    ...controlPlaneProblems(clean),
    ...notifyProblems(clean),
    ...sharedSecretProblems(clean),
    ...deploymentsProblems(clean),
    ...urlSettingProblems(clean),
    ...later,
  ];
  if (!r.success || raw.length > 0 || !admission) {
    // One line per distinct problem: a value can fail two rules that say the same thing.
    const seen = new Set<string>();
    const problems: Problem[] = raw
      .map(({ path: name, message, fix }) => ({
        path: name,
        message: message.includes(name) ? message : `${name}: ${message}`,
        fix: fix ?? FIX[name] ?? `set ${name} to a valid value (docs/engine.md, Configuration)`,
      }))
      .filter((p) => !seen.has(p.message) && Boolean(seen.add(p.message)));
    const lines = problems.map((p) => `  - ${p.message}; fix: ${p.fix}`).join("\n");
    throw new BatonError("bad_request", `[engine] invalid configuration:\n${lines}`, problems);
  }
  if (!r.success) throw new Error("unreachable");
  const e = r.data;
  return {
    databaseUrl: e.DATABASE_URL ?? null,
    dataDir: path.resolve(e.BATON_DATA_DIR),
    port: e.PORT,
    host: e.BATON_HOST,
    publicUrl: (e.BATON_PUBLIC_URL ?? `http://127.0.0.1:${e.PORT}`).replace(/\/+$/, ""),
    callbackSecrets: e.BATON_CALLBACK_SECRETS,
    operatorToken: e.BATON_OPERATOR_TOKEN,
    operators: e.BATON_OPERATORS ?? [],
    viewerToken: e.BATON_VIEWER_TOKEN ?? null,
    controlPlaneUrl: e.BATON_CONTROL_PLANE_URL ?? null,
    embeddedLanes: (e.BATON_EMBEDDED_LANES ?? []).map((f) => path.resolve(f)),
    prometheusUrl: e.BATON_PROMETHEUS_URL ?? null,
    controlPlaneToken: e.BATON_CONTROL_PLANE_TOKEN ?? null,
    dispatcher: e.BATON_DISPATCHER,
    githubRepository: e.GITHUB_REPOSITORY ?? null,
    githubToken: e.GITHUB_TOKEN ?? null,
    githubApp:
      e.GITHUB_APP_ID && e.GITHUB_APP_PRIVATE_KEY && e.GITHUB_APP_INSTALLATION_ID
        ? {
            appId: e.GITHUB_APP_ID,
            privateKey: e.GITHUB_APP_PRIVATE_KEY,
            installationId: e.GITHUB_APP_INSTALLATION_ID,
          }
        : null,
    githubApiUrl: (e.GITHUB_API_URL ?? "https://api.github.com").replace(/\/+$/, ""),
    githubTimeoutMs: e.BATON_GITHUB_TIMEOUT_MS,
    githubPacing: {
      perMinute: e.BATON_GITHUB_DISPATCH_PER_MINUTE,
      perHour: e.BATON_GITHUB_DISPATCH_PER_HOUR,
      maxConcurrent: e.BATON_GITHUB_MAX_CONCURRENT,
    },
    retention: {
      ...DEFAULT_RETENTION,
      compactAfterMs: Math.round(e.BATON_RETENTION_DAYS * 86_400_000),
    },
    tickMs: e.BATON_TICK_MS,
    driftIntervalMs: e.BATON_DRIFT_INTERVAL_MS,
    ...(e.BATON_DRIFT_SETTLE_MS === undefined ? {} : { driftSettleMs: e.BATON_DRIFT_SETTLE_MS }),
    sshKey,
    notify: {
      webhook:
        e.BATON_NOTIFY_WEBHOOK_URL && e.BATON_NOTIFY_WEBHOOK_SECRET
          ? { url: e.BATON_NOTIFY_WEBHOOK_URL, secret: e.BATON_NOTIFY_WEBHOOK_SECRET }
          : null,
      slack: e.BATON_NOTIFY_SLACK_URL
        ? { url: e.BATON_NOTIFY_SLACK_URL, secret: e.BATON_NOTIFY_WEBHOOK_SECRET ?? null }
        : null,
      github: e.BATON_NOTIFY_GITHUB === "commit_comment",
      events: e.BATON_NOTIFY_EVENTS ?? [...NOTICE_KINDS],
      retryBaseMs: e.BATON_NOTIFY_RETRY_MS,
      maxTries: e.BATON_NOTIFY_MAX_TRIES,
    },
    admission,
    ...(rc.ok && rc.mode !== "hmac" ? { runnerCredential: { mode: rc.mode, oidc: rc.oidc } } : {}),
    githubDeployments: e.BATON_GITHUB_DEPLOYMENTS
      ? { environment: e.BATON_GITHUB_DEPLOYMENTS, ref: e.BATON_GITHUB_DEPLOYMENT_REF }
      : null,
  };
}

/** True for a loopback host name or address: localhost, 127.0.0.0/8, ::1. */

/**
 * The start-up warning when the engine listens beyond loopback (`host` such as 0.0.0.0, ::
 * or a LAN address) while its public URL is a loopback one: runners on other machines send
 * their preflights and callbacks to the public URL, and a loopback URL reaches only the
 * machine they run on. Null when there is nothing to say.
 */
export function publicUrlWarning(host: string, publicUrl: string): string | null {
  if (isLoopbackHost(host)) return null;
  let urlHost: string;
  try {
    urlHost = new URL(publicUrl).hostname;
  } catch {
    return null;
  }
  if (!isLoopbackHost(urlHost)) return null;
  const port = new URL(publicUrl).port;
  return `[engine] warning: listening on ${host} (reachable from other machines) but the public URL is ${publicUrl}, a loopback address: runners on other machines send their preflights and callbacks to the public URL and would not reach this engine; fix: set BATON_PUBLIC_URL to the address other machines use to reach it, e.g. https://baton.example.com (or http://10.0.0.5${port ? `:${port}` : ""} with BATON_ALLOW_HTTP=BATON_PUBLIC_URL)`;
}

/** A person's own operator token (BATON_OPERATORS). */
export interface NamedOperator {
  /** Letters, digits, `.`, `_`, `-`; recorded as `operator:<name>`. */
  name: string;
  /** At least 16 characters. */
  token: string;
}

/**
 * Parses BATON_OPERATORS (`name=token,name=token`): the list, or a message naming what is
 * wrong (a pair without `=`, a bad name, a short token, a name or token given twice).
 */
export function parseOperators(text: string): NamedOperator[] | string {
  const out: NamedOperator[] = [];
  for (const pair of text
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean)) {
    const at = pair.indexOf("=");
    if (at < 0) return `BATON_OPERATORS: "${pair.slice(0, 20)}…" is not name=token`;
    const name = pair.slice(0, at).trim();
    const token = pair.slice(at + 1).trim();
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(name))
      return `BATON_OPERATORS: the name "${name}" must be 1 to 64 letters, digits, '.', '_' or '-'`;
    if (token.length < 16) return `BATON_OPERATORS: ${name}'s token must be at least 16 characters`;
    if (out.some((o) => o.name === name)) return `BATON_OPERATORS: ${name} is named twice`;
    if (out.some((o) => o.token === token))
      return `BATON_OPERATORS: ${name}'s token is another person's too; give each person their own`;
    out.push({ name, token });
  }
  return out;
}
