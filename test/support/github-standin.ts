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
 * Behaviour for the next dispatches can be switched to 5xx, hang (never answer), or
 * accept-but-never-run (204, recorded, but the `onAccepted` hook is not called).
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { importSPKI, jwtVerify } from "jose";
import { checkDispatchLimits } from "../../engine/src/adapters/github/limits.ts";

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
}

export interface GitHubStandin {
  /** Octokit `baseUrl`, e.g. `http://127.0.0.1:41234`. */
  baseUrl: string;
  accepted: AcceptedDispatch[];
  seen: SeenRequest[];
  /** Installation tokens issued so far. */
  issuedTokens: string[];
  /** Sets the behaviour for the next `times` dispatches (default: until changed). */
  behave(b: StandinBehaviour, times?: number): void;
  close(): Promise<void>;
}

const DOCS = "https://docs.github.com/rest/repos/repos#create-a-repository-dispatch-event";
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
    const authorization = req.headers.authorization;
    const record = (status: number | "hung") =>
      seen.push({ method: req.method ?? "", path: url.pathname, authorization, status });
    const answer = (status: number, body?: unknown) => {
      record(status);
      send(res, status, body);
    };
    const body = await readBody(req);
    if (body === null) return answer(413, { message: "Payload too large" });

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

  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) send(res, 500, { message: `stand-in error: ${String(err)}` });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    accepted,
    seen,
    issuedTokens,
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
