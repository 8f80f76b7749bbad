/**
 * A local stand-in for the part of GitHub's REST API Baton calls, on 127.0.0.1 (a test double,
 * the only one allowed: it checks requests against GitHub's documented limits).
 *
 * - `POST /repos/{owner}/{repo}/dispatches`: needs `Authorization: token|Bearer <token>` with a
 *   known token (401 "Bad credentials" otherwise), the configured repository (404 "Not Found"),
 *   a JSON body (400 "Problems parsing JSON"), `event_type` ≤ 100 chars and `client_payload`
 *   ≤ 10 top-level keys and < 64 KB (422 with GitHub-like messages); answers 204 and records.
 * - `POST /app/installations/{id}/access_tokens`: needs a RS256 App JWT (`iss` = App id)
 *   signed by the App's key; answers 201 with an installation token the dispatch endpoint accepts.
 *
 * - Every request may name `X-GitHub-Api-Version`; a version GitHub does not serve is
 *   answered 400 like GitHub does. With `pathPrefix` (GitHub Enterprise Server: `/api/v3`) every
 *   route lives under that prefix and a request outside it gets 404.
 *
 * Behaviour for the next dispatches can be switched to 5xx, hang (never answer), or
 * accept-but-never-run (204, recorded, but the `onAccepted` hook is not called).
 *
 * Deployments (`POST|GET /repos/{owner}/{repo}/deployments`, `POST|GET …/deployments/{id}/statuses`):
 * every request is checked against GitHub's OpenAPI description (github-openapi.ts) and
 * answered 422 when it does not match; every answer is checked too (a stand-in answer GitHub
 * would not give is a 500 and an `openapiProblems` entry). Documented limits: a status
 * description over 140 characters and an environment name over 255 are 422, a ref the
 * repository does not have is 422 "No ref found for: …", `per_page` is capped at 100, lists
 * are newest first. `failDeployments(status, times)` answers the next requests with `status`.
 *
 * Secondary rate limits (GitHub REST docs, "Rate limits for the REST API"): at most 100
 * concurrent requests, 80 content-creating requests per minute and 500 per hour. A dispatch over
 * a limit is answered 403 "You have exceeded a secondary rate limit" with `retry-after`
 * (seconds) and `x-ratelimit-*` headers, and is neither recorded as accepted nor run. The
 * clock is injectable so tests can drive hours of pacing in seconds.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { importSPKI, jwtVerify } from "jose";
import { checkDispatchLimits } from "../../engine/src/adapters/github/limits.ts";
import { requestProblems, responseProblems } from "./github-openapi.ts";

/** One deployment the stand-in holds, with its statuses (newest last). */
export interface StandinDeployment {
  id: number;
  ref: string;
  sha: string;
  task: string;
  environment: string;
  description: string | null;
  payload: Record<string, unknown> | string;
  production_environment: boolean;
  transient_environment: boolean;
  created_at: string;
  statuses: {
    id: number;
    state: string;
    description: string;
    log_url: string;
    environment: string;
    created_at: string;
  }[];
}

export type StandinBehaviour =
  | { kind: "accept" }
  | { kind: "status"; status: number; message?: string; headers?: Record<string, string> }
  | { kind: "hang" }
  | { kind: "accept_never_run" };

/** One dispatch the stand-in answered 204 to. */
export interface AcceptedDispatch {
  owner: string;
  repo: string;
  event_type: string;
  client_payload: Record<string, unknown>;
  authorization: string;
  /** false when accepted under `accept_never_run`. */
  ran: boolean;
}

/** Every request seen, whatever the answer. */
export interface SeenRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  status: number | "hung";
  /** The stand-in's clock when the request was answered (epoch ms). */
  at: number;
  /** `retry-after` sent with the answer (seconds), if any. */
  retry_after?: number;
  /** The `x-github-api-version` header sent, if any. */
  api_version?: string;
}

export interface GitHubStandinOptions {
  /** `owner/name`; dispatches to any other repository get 404. Default `acme/models`. */
  repository?: string;
  /** Tokens accepted as-is (personal / fine-grained tokens). */
  tokens?: string[];
  /** A GitHub App: its id, SPKI public key PEM, and installation id. */
  app?: { appId: string; publicKeyPem: string; installationId: string };
  /** Called for each accepted dispatch that should run (e.g. to hand it to a local runner). */
  onAccepted?: (d: AcceptedDispatch) => void;
  /** Secondary limits enforced on dispatches; default GitHub's documented ones. */
  rateLimits?: { perMinute: number; perHour: number; maxConcurrent: number };
  /** Clock (epoch ms) for the rate-limit windows; default `Date.now`. */
  now?: () => number;
  /** Path the REST API lives under, e.g. `/api/v3` (GitHub Enterprise Server). Default none. */
  pathPrefix?: string;
  /** Branches and tags the repository has (deployments of another ref are 422). Default `main`. */
  refs?: string[];
}

export interface GitHubStandin {
  /** Octokit `baseUrl`, e.g. `http://127.0.0.1:41234` (with `pathPrefix` appended). */
  baseUrl: string;
  accepted: AcceptedDispatch[];
  seen: SeenRequest[];
  /** Installation tokens issued so far. */
  issuedTokens: string[];
  /** Dispatches answered 403 for a secondary rate limit. */
  rateLimited: number;
  /** Highest number of dispatch requests seen in flight at once. */
  maxConcurrentSeen: number;
  /** Deployments created so far, oldest first, each with its statuses (the Deployments page). */
  deployments: StandinDeployment[];
  /** Requests or answers of the deployments routes that do not match GitHub's OpenAPI. */
  openapiProblems: string[];
  /** Answers the next `times` deployments requests with HTTP `status`. */
  failDeployments(status: number, times: number): void;
  /** Sets the behaviour for the next `times` dispatches (default: until changed). */
  behave(b: StandinBehaviour, times?: number): void;
  close(): Promise<void>;
}

const DOCS = "https://docs.github.com/rest/repos/repos#create-a-repository-dispatch-event";
/** REST API versions GitHub serves (docs.github.com, "API Versions"). */
const SUPPORTED_API_VERSIONS = new Set(["2022-11-28", "2026-03-10"]);
const MAX_BODY_BYTES = 1024 * 1024;

function send(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status).end();
    return;
  }
  res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function bearer(header: string | undefined): string | null {
  const m = /^(?:token|bearer)\s+(\S+)$/i.exec(header ?? "");
  return m ? m[1]! : null;
}

/** Starts the stand-in on an ephemeral loopback port. */
export async function startGitHubStandin(
  options: GitHubStandinOptions = {},
): Promise<GitHubStandin> {
  const repository = options.repository ?? "acme/models";
  const validTokens = new Set(options.tokens ?? []);
  const issuedTokens: string[] = [];
  const accepted: AcceptedDispatch[] = [];
  const seen: SeenRequest[] = [];
  const hung = new Set<ServerResponse>();
  let behaviour: StandinBehaviour = { kind: "accept" };
  let remaining = Number.POSITIVE_INFINITY;
  const appKey = options.app ? await importSPKI(options.app.publicKeyPem, "RS256") : null;
  const limits = options.rateLimits ?? { perMinute: 80, perHour: 500, maxConcurrent: 100 };
  const clock = options.now ?? Date.now;
  /** Times (epoch ms) of dispatch requests counted against the windows, ascending. */
  const counted: number[] = [];
  let inFlight = 0;
  const stats = { rateLimited: 0, maxConcurrentSeen: 0 };
  const deployments: StandinDeployment[] = [];
  const openapiProblems: string[] = [];
  const refs = new Set(options.refs ?? ["main"]);
  let nextId = 1000;
  let failNext: { status: number; times: number } | null = null;

  /** Seconds until a request would fit, or 0 when it fits now (and is then counted). */
  const overLimit = (): { retryAfterS: number; reason: string } | null => {
    const now = clock();
    while (counted.length > 0 && (counted[0] ?? 0) <= now - 3_600_000) counted.shift();
    if (inFlight > limits.maxConcurrent) {
      return { retryAfterS: 1, reason: `more than ${limits.maxConcurrent} concurrent requests` };
    }
    const inMinute = counted.filter((t) => t > now - 60_000);
    if (inMinute.length >= limits.perMinute) {
      const oldest = inMinute[inMinute.length - limits.perMinute] ?? now;
      return {
        retryAfterS: Math.max(1, Math.ceil((oldest + 60_000 - now) / 1000)),
        reason: `more than ${limits.perMinute} content-creating requests per minute`,
      };
    }
    if (counted.length >= limits.perHour) {
      const oldest = counted[counted.length - limits.perHour] ?? now;
      return {
        retryAfterS: Math.max(1, Math.ceil((oldest + 3_600_000 - now) / 1000)),
        reason: `more than ${limits.perHour} content-creating requests per hour`,
      };
    }
    counted.push(now);
    return null;
  };

  const nextBehaviour = (): StandinBehaviour => {
    const b = behaviour;
    remaining -= 1;
    if (remaining <= 0) {
      behaviour = { kind: "accept" };
      remaining = Number.POSITIVE_INFINITY;
    }
    return b;
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const fullPath = url.pathname;
    const authorization = req.headers.authorization;
    const apiVersion = req.headers["x-github-api-version"];
    const version = Array.isArray(apiVersion) ? apiVersion.join(",") : apiVersion;
    const record = (status: number | "hung") => {
      const retryAfter = res.getHeader("retry-after");
      seen.push({
        method: req.method ?? "",
        path: fullPath,
        authorization,
        status,
        at: clock(),
        ...(retryAfter !== undefined ? { retry_after: Number(retryAfter) } : {}),
        ...(version !== undefined ? { api_version: version } : {}),
      });
    };
    const answer = (status: number, body?: unknown) => {
      record(status);
      send(res, status, body);
    };
    const body = await readBody(req);
    if (body === null) return answer(413, { message: "Payload too large" });
    if (version !== undefined && !SUPPORTED_API_VERSIONS.has(version)) {
      return answer(400, {
        message: `Unsupported 'X-GitHub-Api-Version' header: ${version}. Supported versions are: ${[...SUPPORTED_API_VERSIONS].join(", ")}`,
        documentation_url: "https://docs.github.com/rest/overview/api-versions",
      });
    }
    const prefix = options.pathPrefix ?? "";
    if (prefix) {
      if (!url.pathname.startsWith(`${prefix}/`))
        return answer(404, { message: "Not Found", documentation_url: DOCS });
      url.pathname = url.pathname.slice(prefix.length);
    }

    const tokenRoute = /^\/app\/installations\/([^/]+)\/access_tokens$/.exec(url.pathname);
    if (tokenRoute && req.method === "POST") {
      if (!options.app || !appKey)
        return answer(404, { message: "Not Found", documentation_url: DOCS });
      const jwt = bearer(authorization);
      if (!jwt) return answer(401, { message: "A JSON web token could not be decoded" });
      try {
        const { payload } = await jwtVerify(jwt, appKey, { algorithms: ["RS256"] });
        if (String(payload.iss) !== options.app.appId) throw new Error("wrong iss");
      } catch {
        return answer(401, { message: "A JSON web token could not be decoded" });
      }
      if (tokenRoute[1] !== options.app.installationId)
        return answer(404, { message: "Not Found", documentation_url: DOCS });
      const token = `ghs_${randomBytes(18).toString("base64url")}`;
      issuedTokens.push(token);
      validTokens.add(token);
      return answer(201, {
        token,
        expires_at: new Date(Date.now() + 3_600_000).toISOString(),
        permissions: { contents: "write", metadata: "read" },
        repository_selection: "selected",
      });
    }

    const depRoute = /^\/repos\/([^/]+)\/([^/]+)\/deployments(?:\/(\d+)\/statuses)?$/.exec(
      url.pathname,
    );
    if (depRoute && (req.method === "POST" || req.method === "GET")) {
      const token = bearer(authorization);
      if (!token || !validTokens.has(token)) {
        return answer(401, {
          message: "Bad credentials",
          documentation_url: "https://docs.github.com/rest",
        });
      }
      const [, owner, repo, depId] = depRoute as unknown as [string, string, string, string?];
      if (`${owner}/${repo}` !== repository)
        return answer(404, { message: "Not Found", documentation_url: DOCS });
      return deploymentsRoute(req.method, url, owner, repo, depId, body, answer);
    }

    const dispatchRoute = /^\/repos\/([^/]+)\/([^/]+)\/dispatches$/.exec(url.pathname);
    if (!dispatchRoute || req.method !== "POST")
      return answer(404, { message: "Not Found", documentation_url: DOCS });
    const token = bearer(authorization);
    if (!token || !validTokens.has(token)) {
      return answer(401, {
        message: "Bad credentials",
        documentation_url: "https://docs.github.com/rest",
      });
    }
    const [, owner, repo] = dispatchRoute as unknown as [string, string, string];
    if (`${owner}/${repo}` !== repository)
      return answer(404, { message: "Not Found", documentation_url: DOCS });
    let json: unknown;
    try {
      json = JSON.parse(body.toString("utf8"));
    } catch {
      return answer(400, { message: "Problems parsing JSON", documentation_url: DOCS });
    }
    const { event_type, client_payload } = (json ?? {}) as {
      event_type?: unknown;
      client_payload?: unknown;
    };
    const violations = checkDispatchLimits(event_type, client_payload);
    if (violations.length > 0) {
      return answer(422, {
        message: `Invalid request.\n\n${violations.map((v) => v.githubMessage).join("\n")}`,
        documentation_url: DOCS,
        status: "422",
      });
    }
    const limited = overLimit();
    if (limited) {
      stats.rateLimited += 1;
      res.setHeader("retry-after", String(limited.retryAfterS));
      res.setHeader("x-ratelimit-limit", String(limits.perHour));
      res.setHeader("x-ratelimit-remaining", "0");
      res.setHeader("x-ratelimit-used", String(limits.perHour));
      res.setHeader("x-ratelimit-reset", String(Math.ceil(clock() / 1000) + limited.retryAfterS));
      res.setHeader("x-ratelimit-resource", "core");
      return answer(403, {
        message: `You have exceeded a secondary rate limit (${limited.reason}). Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.`,
        documentation_url:
          "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
        status: "403",
      });
    }
    const b = nextBehaviour();
    if (b.kind === "hang") {
      record("hung");
      hung.add(res);
      return;
    }
    if (b.kind === "status") {
      for (const [k, v] of Object.entries(b.headers ?? {})) res.setHeader(k, v);
      return answer(b.status, { message: b.message ?? "Server Error", documentation_url: DOCS });
    }
    const d: AcceptedDispatch = {
      owner,
      repo,
      event_type: event_type as string,
      client_payload: (client_payload ?? {}) as Record<string, unknown>,
      authorization: authorization ?? "",
      ran: b.kind === "accept",
    };
    accepted.push(d);
    answer(204);
    if (d.ran) options.onAccepted?.(d);
  }

  const user = (base: string) => ({
    login: "baton-engine[bot]",
    id: 4242,
    node_id: "BOT_kgDOAAAQkg",
    avatar_url: "https://avatars.githubusercontent.com/in/4242?v=4",
    gravatar_id: "",
    url: `${base}/users/baton-engine%5Bbot%5D`,
    html_url: "https://github.com/apps/baton-engine",
    followers_url: `${base}/users/baton-engine%5Bbot%5D/followers`,
    following_url: `${base}/users/baton-engine%5Bbot%5D/following{/other_user}`,
    gists_url: `${base}/users/baton-engine%5Bbot%5D/gists{/gist_id}`,
    starred_url: `${base}/users/baton-engine%5Bbot%5D/starred{/owner}{/repo}`,
    subscriptions_url: `${base}/users/baton-engine%5Bbot%5D/subscriptions`,
    organizations_url: `${base}/users/baton-engine%5Bbot%5D/orgs`,
    repos_url: `${base}/users/baton-engine%5Bbot%5D/repos`,
    events_url: `${base}/users/baton-engine%5Bbot%5D/events{/privacy}`,
    received_events_url: `${base}/users/baton-engine%5Bbot%5D/received_events`,
    type: "Bot",
    site_admin: false,
  });

  /** GitHub's JSON of a deployment and of one of its statuses. */
  const deploymentJson = (base: string, owner: string, repo: string, d: StandinDeployment) => {
    const last = d.statuses[d.statuses.length - 1];
    return {
      url: `${base}/repos/${owner}/${repo}/deployments/${d.id}`,
      id: d.id,
      node_id: `DE_kwDO${d.id}`,
      sha: d.sha,
      ref: d.ref,
      task: d.task,
      payload: d.payload,
      original_environment: d.environment,
      environment: d.environment,
      description: d.description,
      creator: user(base),
      created_at: d.created_at,
      updated_at: last?.created_at ?? d.created_at,
      statuses_url: `${base}/repos/${owner}/${repo}/deployments/${d.id}/statuses`,
      repository_url: `${base}/repos/${owner}/${repo}`,
      transient_environment: d.transient_environment,
      production_environment: d.production_environment,
    };
  };
  const statusJson = (
    base: string,
    owner: string,
    repo: string,
    d: StandinDeployment,
    s: StandinDeployment["statuses"][number],
  ) => ({
    url: `${base}/repos/${owner}/${repo}/deployments/${d.id}/statuses/${s.id}`,
    id: s.id,
    node_id: `DES_kwDO${s.id}`,
    state: s.state,
    creator: user(base),
    description: s.description,
    environment: s.environment,
    target_url: s.log_url,
    created_at: s.created_at,
    updated_at: s.created_at,
    deployment_url: `${base}/repos/${owner}/${repo}/deployments/${d.id}`,
    repository_url: `${base}/repos/${owner}/${repo}`,
    log_url: s.log_url,
  });

  async function deploymentsRoute(
    method: string,
    url: URL,
    owner: string,
    repo: string,
    depId: string | undefined,
    raw: Buffer,
    answer: (status: number, body?: unknown) => void,
  ): Promise<void> {
    const template = depId
      ? "/repos/{owner}/{repo}/deployments/{deployment_id}/statuses"
      : "/repos/{owner}/{repo}/deployments";
    const base = `http://${server.address() && (server.address() as AddressInfo).port ? `127.0.0.1:${(server.address() as AddressInfo).port}` : "127.0.0.1"}${options.pathPrefix ?? ""}`;
    /** Answers, after checking the answer against GitHub's description. */
    const reply = (status: number, body: unknown) => {
      const bad = responseProblems(method, template, status, body);
      if (bad.length > 0) {
        openapiProblems.push(...bad.map((b) => `answer ${status} to ${method} ${template}: ${b}`));
        return answer(500, {
          message: `stand-in answer not in GitHub's OpenAPI: ${bad.join("; ")}`,
        });
      }
      return answer(status, body);
    };
    /** GitHub's 422: `errors` as its validation-error objects (resource, field, code, message). */
    const invalid = (message: string, errors?: string[]) =>
      reply(422, {
        message,
        documentation_url: "https://docs.github.com/rest/deployments",
        ...(errors
          ? {
              errors: errors.map((e) => ({
                resource: depId ? "DeploymentStatus" : "Deployment",
                code: "custom",
                message: e,
              })),
            }
          : {}),
      });
    let json: unknown;
    if (method === "POST") {
      try {
        json = JSON.parse(raw.toString("utf8"));
      } catch {
        return answer(400, { message: "Problems parsing JSON", documentation_url: DOCS });
      }
    }
    const problems = requestProblems(method, template, url.searchParams, json);
    if (problems.length > 0) {
      openapiProblems.push(...problems.map((p) => `request ${method} ${template}: ${p}`));
      return invalid("Invalid request.", problems);
    }
    if (failNext && failNext.times > 0) {
      failNext.times -= 1;
      return answer(failNext.status, { message: "Server Error", documentation_url: DOCS });
    }
    const now = new Date(clock()).toISOString().replace(/\.\d{3}Z$/, "Z");
    const perPage = Math.min(100, Number(url.searchParams.get("per_page") ?? 30));
    if (!depId && method === "POST") {
      const b = json as {
        ref: string;
        task?: string;
        environment?: string;
        description?: string | null;
        payload?: Record<string, unknown> | string;
        production_environment?: boolean;
        transient_environment?: boolean;
      };
      const environment = b.environment ?? "production";
      if (environment.length > 255) {
        return invalid("Validation Failed", [
          "environment is too long (maximum is 255 characters)",
        ]);
      }
      const isSha = /^[0-9a-f]{40}$/.test(b.ref);
      if (!isSha && !refs.has(b.ref)) return invalid(`No ref found for: ${b.ref}`);
      const d: StandinDeployment = {
        id: nextId++,
        ref: b.ref,
        sha: isSha ? b.ref : "a".repeat(40),
        task: b.task ?? "deploy",
        environment,
        description: b.description ?? "",
        payload: b.payload ?? {},
        production_environment: b.production_environment ?? environment === "production",
        transient_environment: b.transient_environment ?? false,
        created_at: now,
        statuses: [],
      };
      deployments.push(d);
      return reply(201, deploymentJson(base, owner, repo, d));
    }
    if (!depId) {
      const q = url.searchParams;
      const list = [...deployments]
        .reverse()
        .filter(
          (d) =>
            (!q.get("environment") || d.environment === q.get("environment")) &&
            (!q.get("task") || d.task === q.get("task")) &&
            (!q.get("ref") || d.ref === q.get("ref")) &&
            (!q.get("sha") || d.sha === q.get("sha")),
        )
        .slice(0, perPage)
        .map((d) => deploymentJson(base, owner, repo, d));
      return reply(200, list);
    }
    const d = deployments.find((x) => x.id === Number(depId));
    if (!d) return reply(404, { message: "Not Found", documentation_url: DOCS });
    if (method === "GET") {
      return reply(
        200,
        [...d.statuses]
          .reverse()
          .slice(0, perPage)
          .map((s) => statusJson(base, owner, repo, d, s)),
      );
    }
    const b = json as {
      state: string;
      description?: string;
      log_url?: string;
      target_url?: string;
      environment?: string;
    };
    if ((b.description ?? "").length > 140) {
      return invalid("Validation Failed", ["description is too long (maximum is 140 characters)"]);
    }
    const st = {
      id: nextId++,
      state: b.state,
      description: b.description ?? "",
      log_url: b.log_url ?? b.target_url ?? "",
      environment: b.environment ?? d.environment,
      created_at: now,
    };
    d.statuses.push(st);
    return reply(201, statusJson(base, owner, repo, d, st));
  }

  const server = createServer((req, res) => {
    const isDispatch = req.method === "POST" && /\/dispatches$/.test(req.url ?? "");
    if (isDispatch) {
      inFlight += 1;
      stats.maxConcurrentSeen = Math.max(stats.maxConcurrentSeen, inFlight);
      res.on("close", () => {
        inFlight -= 1;
      });
    }
    handle(req, res).catch((err) => {
      if (!res.headersSent) send(res, 500, { message: `stand-in error: ${String(err)}` });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}${options.pathPrefix ?? ""}`,
    accepted,
    seen,
    issuedTokens,
    deployments,
    openapiProblems,
    failDeployments(status, times) {
      failNext = { status, times };
    },
    get rateLimited() {
      return stats.rateLimited;
    },
    get maxConcurrentSeen() {
      return stats.maxConcurrentSeen;
    },
    behave(b, times) {
      behaviour = b;
      remaining = times ?? Number.POSITIVE_INFINITY;
    },
    async close() {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
