/**
 * A loopback stand-in for GitHub's OIDC issuer: RSA keys generated in the test, a JWKS served
 * on 127.0.0.1 (port 0), tokens minted with GitHub's claim names, and the Actions token
 * request endpoint the release-step action calls through `@actions/core` `getIDToken`
 * (ACTIONS_ID_TOKEN_REQUEST_URL / ACTIONS_ID_TOKEN_REQUEST_TOKEN).
 *
 * Paths: `/.well-known/jwks` (the keys), `/down/jwks` (drops the connection: an unreachable key
 * set), `/token?audience=…` (the Actions token service: bearer REQUEST_TOKEN, answers
 * `{"value": <jwt>}` for the claims `tokenClaims` holds).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";

export const OIDC_REPOSITORY = "acme/models";
export const OIDC_REPOSITORY_ID = "123456789";
export const OIDC_WORKFLOW_REF = "acme/models/.github/workflows/release-step.yml@refs/heads/main";
export const OIDC_REQUEST_TOKEN = "actions-request-token-0123456789";

type Key = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];

export interface OidcIssuer {
  /** Base URL (`http://127.0.0.1:PORT`): the issuer (`iss`) of good tokens. */
  url: string;
  jwksUrl: string;
  /** A JWKS URL whose every request is dropped (unreachable key set). */
  downJwksUrl: string;
  /** The Actions token request URL (getIDToken appends `&audience=`). */
  requestUrl: string;
  /** Claims the token endpoint mints (set by the test, per run); `aud` comes from the query. */
  tokenClaims: Partial<JWTPayload> & Record<string, unknown>;
  /** Tokens the token endpoint minted, in order. */
  minted: string[];
  /** A signed token: GitHub's claims for run `run_id`/`run_attempt`, then `over`. */
  mint(o: {
    audience: string;
    nowMs: number;
    run_id?: string;
    run_attempt?: number;
    over?: Record<string, unknown>;
    /** Sign with a key the JWKS does not list. */
    foreignKey?: boolean;
  }): Promise<string>;
  close(): Promise<void>;
}

let jtiSeq = 0;

/** Starts the issuer on 127.0.0.1 with one RS256 key (`kid` `baton-test-1`) in its JWKS. */
export async function startOidcIssuer(): Promise<OidcIssuer> {
  const good = await generateKeyPair("RS256", { extractable: true });
  const foreign = await generateKeyPair("RS256", { extractable: true });
  const jwk: JWK = {
    ...(await exportJWK(good.publicKey)),
    kid: "baton-test-1",
    alg: "RS256",
    use: "sig",
  };
  let base = "";

  async function sign(claims: JWTPayload, key: Key, kid: string): Promise<string> {
    return new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid, typ: "JWT" }).sign(key);
  }

  const issuer: OidcIssuer = {
    url: "",
    jwksUrl: "",
    downJwksUrl: "",
    requestUrl: "",
    tokenClaims: {},
    minted: [],
    async mint(o) {
      const iat = Math.floor(o.nowMs / 1000);
      const claims: JWTPayload = {
        jti: `jti-${process.pid}-${++jtiSeq}-${Math.random().toString(36).slice(2)}`,
        sub: `repo:${OIDC_REPOSITORY}:ref:refs/heads/main`,
        aud: o.audience,
        ref: "refs/heads/main",
        repository: OIDC_REPOSITORY,
        repository_id: OIDC_REPOSITORY_ID,
        repository_owner: "acme",
        run_id: o.run_id ?? "5001",
        run_number: "7",
        run_attempt: String(o.run_attempt ?? 1),
        actor: "baton-bot",
        workflow: "release-step",
        workflow_ref: OIDC_WORKFLOW_REF,
        job_workflow_ref: OIDC_WORKFLOW_REF,
        event_name: "repository_dispatch",
        ref_type: "branch",
        iss: base,
        nbf: iat - 5,
        iat,
        exp: iat + 300,
        ...o.over,
      };
      for (const [k, v] of Object.entries(claims)) if (v === undefined) delete claims[k];
      return o.foreignKey
        ? sign(claims, foreign.privateKey, "not-in-jwks")
        : sign(claims, good.privateKey, "baton-test-1");
    },
    close: () => new Promise((r) => server.close(() => r())),
  };

  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", base);
    if (u.pathname === "/.well-known/jwks") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ keys: [jwk] }));
      return;
    }
    if (u.pathname === "/down/jwks") {
      req.socket.destroy();
      return;
    }
    if (u.pathname === "/token") {
      if (req.headers.authorization !== `Bearer ${OIDC_REQUEST_TOKEN}`) {
        res.writeHead(401).end();
        return;
      }
      const audience = u.searchParams.get("audience") ?? "";
      const c = issuer.tokenClaims;
      issuer
        .mint({
          audience,
          nowMs: Date.now(),
          ...(typeof c.run_id === "string" ? { run_id: c.run_id } : {}),
          ...(typeof c.run_attempt === "number" ? { run_attempt: c.run_attempt } : {}),
        })
        .then((value) => {
          issuer.minted.push(value);
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ value }));
        });
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  issuer.url = base;
  issuer.jwksUrl = `${base}/.well-known/jwks`;
  issuer.downJwksUrl = `${base}/down/jwks`;
  issuer.requestUrl = `${base}/token?api-version=2.0`;
  return issuer;
}
