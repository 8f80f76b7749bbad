/**
 * The URL settings the engine sends traffic to (or builds links and callback URLs from), and
 * the one rule each is checked against at start-up, on every entry (Node, Workers, Lambda):
 *
 * - `https:`; `http:` only to a loopback host (127.0.0.0/8, ::1, localhost), or to any host
 *   for a setting named in `BATON_ALLOW_HTTP` where the setting allows that opt-in;
 * - no other scheme (`file:`, `gopher:`, `javascript:`, `data:` …);
 * - no user or password in the URL (a token belongs in its own setting);
 * - no link-local host (169.254.0.0/16, fe80::/10: where cloud metadata services answer).
 *
 * Portable: no Node module (the serverless entries import it too).
 */

/** A URL setting, what it is for, and whether plain http to another host may be opted into. */
export interface UrlSetting {
  /** What the engine does with it, for the message. */
  what: string;
  /** May be named in BATON_ALLOW_HTTP (plain http to a non-loopback host, e.g. on a LAN). */
  httpOptIn: boolean;
  /** An https example for the fix. */
  example: string;
}

/** Every URL setting the engine reads. */
export const URL_SETTINGS: Readonly<Record<string, UrlSetting>> = {
  BATON_PUBLIC_URL: {
    what: "the engine's URL as runners and browsers reach it",
    httpOptIn: true,
    example: "https://baton.example.org",
  },
  BATON_CONTROL_PLANE_URL: {
    what: "the control plane the engine writes traffic to",
    httpOptIn: true,
    example: "https://cp.example.org",
  },
  BATON_PROMETHEUS_URL: {
    what: "the Prometheus the gates read",
    httpOptIn: true,
    example: "https://prometheus.example.org",
  },
  BATON_NOTIFY_WEBHOOK_URL: {
    what: "where signed notices are posted",
    httpOptIn: true,
    example: "https://hooks.example.org/baton",
  },
  BATON_NOTIFY_SLACK_URL: {
    what: "the Slack incoming webhook",
    httpOptIn: false,
    example: "https://hooks.slack.com/services/T000/B000/XXXX",
  },
  BATON_OIDC_ISSUER: {
    what: "the runners' OIDC token issuer",
    httpOptIn: false,
    example: "https://token.actions.githubusercontent.com",
  },
  BATON_OIDC_JWKS_URL: {
    what: "where the OIDC signing keys are read",
    httpOptIn: false,
    example: "https://token.actions.githubusercontent.com/.well-known/jwks",
  },
  BATON_DASHBOARD_URL: {
    what: "the dashboard Worker's URL, where the engine Worker sends browsers",
    httpOptIn: true,
    example: "https://baton-dashboard.example.org",
  },
  GITHUB_API_URL: {
    what: "GitHub's REST API (the token travels with every call)",
    httpOptIn: false,
    example: "https://api.github.com (GitHub Enterprise Server: https://HOST/api/v3)",
  },
};

/** The setting that lists URL settings allowed plain http to a non-loopback host. */
export const ALLOW_HTTP = "BATON_ALLOW_HTTP";

/** True for localhost, *.localhost, 127.0.0.0/8 and ::1 (brackets allowed). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h.endsWith(".localhost") || h === "::1" || /^127\./.test(h);
}

/** True for 169.254.0.0/16, fe80::/10 and their IPv4-mapped IPv6 forms (as `URL` writes them). */
export function isLinkLocalHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (/^169\.254\./.test(h)) return true;
  if (/^fe[89ab][0-9a-f]?:/.test(h)) return true;
  // ::ffff:169.254.x.y, which URL normalises to ::ffff:a9fe:xxyy.
  const mapped = /^::ffff:([0-9a-f]{1,4}):[0-9a-f]{1,4}$/.exec(h);
  if (mapped?.[1] && Number.parseInt(mapped[1], 16) === 0xa9fe) return true;
  return /^::ffff:169\.254\./.test(h);
}

/** One refused URL setting: its name, what is wrong, and the fix. */
export interface UrlProblem {
  path: string;
  message: string;
  fix: string;
}

/**
 * What is wrong with `value` as the URL setting `name` (null when it is acceptable).
 * @param allowHttp whether `name` is listed in BATON_ALLOW_HTTP.
 */
export function urlProblem(name: string, value: string, allowHttp: boolean): UrlProblem | null {
  const s = URL_SETTINGS[name];
  const example = s?.example ?? "https://host.example.org";
  const fix = (why: string) =>
    `${why}, e.g. ${name}=${example}${s?.httpOptIn ? `; plain http to a host other than this machine only with ${ALLOW_HTTP}=${name}` : ""}`;
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return {
      path: name,
      message: `${name} is not a URL`,
      fix: fix("set an https URL"),
    };
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") {
    return {
      path: name,
      message: `${name} must be an https URL; the scheme ${u.protocol} is not allowed`,
      fix: fix("set an https URL"),
    };
  }
  if (u.username !== "" || u.password !== "") {
    return {
      path: name,
      message: `${name} carries a user or password in the URL (it would be logged and sent as is)`,
      fix: fix("remove user:password@ from the URL and give the credential in its own setting"),
    };
  }
  if (isLinkLocalHost(u.hostname)) {
    return {
      path: name,
      message: `${name} points at the link-local address ${u.hostname} (169.254.0.0/16, fe80::/10: where cloud metadata services answer)`,
      fix: fix("set the service's own address"),
    };
  }
  if (u.protocol === "http:" && !isLoopbackHost(u.hostname) && !(allowHttp && s?.httpOptIn)) {
    return {
      path: name,
      message: `${name} is plain http to ${u.hostname}, another machine: ${s?.what ?? "the service"} would be reached unencrypted`,
      fix: s?.httpOptIn
        ? `use https, e.g. ${name}=${example}; or, on a network you trust, allow plain http with ${ALLOW_HTTP}=${name}`
        : `use https, e.g. ${name}=${example} (plain http only to 127.0.0.1, ::1 or localhost)`,
    };
  }
  return null;
}

/**
 * Checks every URL setting present in `env` (and BATON_ALLOW_HTTP itself).
 * @returns one problem per bad setting, named by its variable; none when all are acceptable.
 */
export function urlSettingProblems(env: Readonly<Record<string, unknown>>): UrlProblem[] {
  const out: UrlProblem[] = [];
  const allowed = new Set(
    String(env[ALLOW_HTTP] ?? "")
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  );
  for (const name of allowed) {
    if (!URL_SETTINGS[name]?.httpOptIn) {
      const may = Object.keys(URL_SETTINGS).filter((k) => URL_SETTINGS[k]?.httpOptIn);
      out.push({
        path: ALLOW_HTTP,
        message: `${ALLOW_HTTP} names ${name}, which may not be plain http to another machine`,
        fix: `list only ${may.join(", ")} (comma-separated), or unset ${ALLOW_HTTP}`,
      });
    }
  }
  for (const name of Object.keys(URL_SETTINGS)) {
    const v = env[name];
    if (typeof v !== "string" || v === "") continue;
    const p = urlProblem(name, v.trim(), allowed.has(name));
    if (p) out.push(p);
  }
  return out;
}
