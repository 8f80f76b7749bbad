/**
 * The GitHub dispatcher against the local GitHub stand-in (failure case F01; docs/dispatchers.md: 422/404/401 not retryable with GitHub's message, network/5xx retryable).
 */
import { generateKeyPairSync } from "node:crypto";
import { Octokit } from "@octokit/rest";
import { afterEach, describe, expect, it } from "vitest";
import {
  checkDispatchLimits,
  classifyGitHubError,
  GitHubDispatcher,
  gitHubDispatcherOptionsFromEnv,
} from "../../engine/src/adapters/github/index.ts";
import { BatonError } from "../../engine/src/domain/errors.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { type GitHubStandin, startGitHubStandin } from "../support/github-standin.ts";

const TOKEN = "github_pat_test_0123456789";

function payload(over: Partial<DispatchPayload> = {}): DispatchPayload {
  return {
    v: 1,
    step_run_id: "sr_17_1_f",
    tool: "attach-queue-lane",
    args: { lane: { id: "lane-a" }, image: `acme/model@sha256:${"a".repeat(64)}` },
    callback_url: "http://127.0.0.1:8787/v1/releases/step-runs/sr_17_1_f/callback",
    release: {
      id: "r17",
      generation: 1,
      manifest_digest: "b".repeat(64),
      dispatch: 1,
      operation_key: "r17:1:fwd:lane=lane-a",
    },
    ...over,
  };
}

/** 6 protocol keys + 5 extras = 11 top-level keys (failure case F01). */
function elevenKeys(): DispatchPayload {
  const extras = Object.fromEntries(["e1", "e2", "e3", "e4", "e5"].map((k) => [k, k]));
  return { ...payload(), ...extras } as unknown as DispatchPayload;
}

let standin: GitHubStandin | undefined;
afterEach(async () => {
  await standin?.close();
  standin = undefined;
});

async function tokenSetup(timeoutMs = 5_000) {
  standin = await startGitHubStandin({ tokens: [TOKEN] });
  const dispatcher = new GitHubDispatcher({
    repository: "acme/models",
    auth: { kind: "token", token: TOKEN },
    baseUrl: standin.baseUrl,
    timeoutMs,
  });
  return { standin, dispatcher };
}

describe("GitHub dispatcher with a token", () => {
  it("sends repository_dispatch release-step with the payload and the token; 204 is accepted", async () => {
    const { standin, dispatcher } = await tokenSetup();
    const p = payload();
    expect(await dispatcher.dispatch(p)).toEqual({ ok: true });
    expect(standin.accepted).toHaveLength(1);
    const d = standin.accepted[0]!;
    expect(d.event_type).toBe("release-step");
    expect(d.client_payload).toEqual(p);
    expect(d.authorization).toBe(`token ${TOKEN}`);
  });

  it("refuses locally, without sending, a payload with 11 top-level keys", async () => {
    const { standin, dispatcher } = await tokenSetup();
    const big = elevenKeys();
    expect(Object.keys(big)).toHaveLength(11);
    const r = await dispatcher.dispatch(big);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.retryable).toBe(false);
    expect(r.status).toBeNull();
    expect(r.message).toMatch(/^\[github\] dispatch of sr_17_1_f not sent/);
    expect(r.message).toContain("No more than 10 properties are allowed; 11 were supplied.");
    expect(r.message).toContain("nest extra fields under `args` or `release`");
    expect(standin.seen).toHaveLength(0);
  });

  it("refuses locally a payload with a 70 KB value and names the limit", async () => {
    const { standin, dispatcher } = await tokenSetup();
    const big = payload({ args: { blob: "x".repeat(70 * 1024) } });
    const r = await dispatcher.dispatch(big);
    expect(r).toMatchObject({ ok: false, retryable: false, status: null });
    if (r.ok) return;
    expect(r.message).toContain("client_payload is too large");
    expect(r.message).toContain("65536");
    expect(standin.seen).toHaveLength(0);
  });

  it("refuses locally a payload that does not match the wire schema, naming the field", async () => {
    const { standin, dispatcher } = await tokenSetup();
    const r = await dispatcher.dispatch(payload({ step_run_id: "sr_1$(id)" }));
    expect(r).toMatchObject({ ok: false, retryable: false, status: null });
    if (r.ok) return;
    expect(r.message).toContain("client_payload.step_run_id");
    expect(standin.seen).toHaveLength(0);
  });

  it("the stand-in answers 422 to oversize payloads sent anyway; classified not retryable with GitHub's message", async () => {
    const { standin } = await tokenSetup();
    const octokit = new Octokit({ auth: TOKEN, baseUrl: standin.baseUrl });
    const cases: [Record<string, unknown>, string][] = [
      [elevenKeys(), "No more than 10 properties are allowed; 11 were supplied."],
      [payload({ args: { blob: "x".repeat(70 * 1024) } }), "client_payload is too large."],
    ];
    for (const [client_payload, expected] of cases) {
      const err = await octokit.rest.repos
        .createDispatchEvent({
          owner: "acme",
          repo: "models",
          event_type: "release-step",
          client_payload,
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      const r = classifyGitHubError("sr_17_1_f", err, 5_000);
      expect(r).toMatchObject({ ok: false, retryable: false, status: 422 });
      expect(r.message).toContain(expected);
    }
    const longType = await octokit.rest.repos
      .createDispatchEvent({ owner: "acme", repo: "models", event_type: "e".repeat(101) })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(classifyGitHubError("sr_17_1_f", longType, 5_000).message).toContain(
      "event_type is too long (maximum is 100 characters)",
    );
    expect(standin.accepted).toHaveLength(0);
  });

  it("the local limits accept exactly 10 keys and refuse 65,536 bytes", () => {
    const ten = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, i]));
    expect(checkDispatchLimits("release-step", ten)).toEqual([]);
    const filler = (n: number) => ({ a: "x".repeat(n - '{"a":""}'.length) });
    expect(checkDispatchLimits("release-step", filler(65_535))).toEqual([]);
    expect(checkDispatchLimits("release-step", filler(65_536))).toHaveLength(1);
    expect(checkDispatchLimits("e".repeat(100), {})).toEqual([]);
    expect(checkDispatchLimits("e".repeat(101), {})).toHaveLength(1);
  });

  it("401 Bad credentials is not retryable and keeps GitHub's message", async () => {
    standin = await startGitHubStandin({ tokens: [TOKEN] });
    const dispatcher = new GitHubDispatcher({
      repository: "acme/models",
      auth: { kind: "token", token: "wrong" },
      baseUrl: standin.baseUrl,
    });
    const r = await dispatcher.dispatch(payload());
    expect(r).toMatchObject({ ok: false, retryable: false, status: 401 });
    if (!r.ok) expect(r.message).toContain("Bad credentials");
    expect(standin.seen[0]?.authorization).toBe("token wrong");
  });

  it("404 for a repository the token cannot see is not retryable", async () => {
    standin = await startGitHubStandin({ tokens: [TOKEN] });
    const dispatcher = new GitHubDispatcher({
      repository: "acme/other",
      auth: { kind: "token", token: TOKEN },
      baseUrl: standin.baseUrl,
    });
    const r = await dispatcher.dispatch(payload());
    expect(r).toMatchObject({ ok: false, retryable: false, status: 404 });
    if (!r.ok) expect(r.message).toMatch(/Not Found.*GITHUB_REPOSITORY/);
  });

  it("403 without rate-limit headers is not retryable; 500 and 503 are retryable", async () => {
    const { standin, dispatcher } = await tokenSetup();
    standin.behave(
      { kind: "status", status: 403, message: "Resource not accessible by integration" },
      1,
    );
    const forbidden = await dispatcher.dispatch(payload());
    expect(forbidden).toMatchObject({ ok: false, retryable: false, status: 403 });
    if (!forbidden.ok)
      expect(forbidden.message).toContain("Resource not accessible by integration");
    for (const status of [500, 503]) {
      standin.behave({ kind: "status", status }, 1);
      const r = await dispatcher.dispatch(payload());
      expect(r).toMatchObject({ ok: false, retryable: true, status });
    }
    // Back to accepting after the counted failures.
    expect(await dispatcher.dispatch(payload())).toEqual({ ok: true });
  });

  it("rate limits (429, or 403 with retry-after / no remaining quota) are retryable", async () => {
    const limits: { status: number; headers: Record<string, string> }[] = [
      { status: 429, headers: { "retry-after": "1" } },
      { status: 403, headers: { "retry-after": "60" } },
      { status: 403, headers: { "x-ratelimit-remaining": "0" } },
    ];
    for (const l of limits) {
      // A fresh dispatcher each time: after a rate limit the dispatcher holds every dispatch
      // back until GitHub's retry time (tested in github-pacing.test.ts).
      const { standin, dispatcher } = await tokenSetup();
      standin.behave(
        { kind: "status", message: "You have exceeded a secondary rate limit", ...l },
        1,
      );
      const r = await dispatcher.dispatch(payload());
      expect(r).toMatchObject({ ok: false, retryable: true, status: l.status });
      if (!r.ok) expect(r.message).toContain("secondary rate limit");
      if (!r.ok) expect(r.retry_at).toBeGreaterThan(Date.now() - 1000);
      await standin.close();
    }
  });

  it("a request that never gets an answer times out as retryable", async () => {
    const { standin, dispatcher } = await tokenSetup(300);
    standin.behave({ kind: "hang" }, 1);
    const r = await dispatcher.dispatch(payload());
    expect(r).toMatchObject({ ok: false, retryable: true, status: null });
    if (!r.ok) expect(r.message).toContain("timed out after 300 ms");
  });

  it("a refused connection is retryable", async () => {
    // The discard port: nothing listens there.
    const dispatcher = new GitHubDispatcher({
      repository: "acme/models",
      auth: { kind: "token", token: TOKEN },
      baseUrl: "http://127.0.0.1:9",
    });
    const r = await dispatcher.dispatch(payload());
    expect(r).toMatchObject({ ok: false, retryable: true, status: null });
    if (!r.ok) expect(r.message).toContain("could not reach GitHub");
  });

  it("accept-but-never-run answers 204 and records the dispatch without running it", async () => {
    const ran: unknown[] = [];
    standin = await startGitHubStandin({ tokens: [TOKEN], onAccepted: (d) => ran.push(d) });
    const dispatcher = new GitHubDispatcher({
      repository: "acme/models",
      auth: { kind: "token", token: TOKEN },
      baseUrl: standin.baseUrl,
    });
    standin.behave({ kind: "accept_never_run" }, 1);
    expect(await dispatcher.dispatch(payload())).toEqual({ ok: true });
    expect(await dispatcher.dispatch(payload({ step_run_id: "sr_17_2_f" }))).toEqual({ ok: true });
    expect(standin.accepted.map((d) => d.ran)).toEqual([false, true]);
    expect(ran).toHaveLength(1);
  });
});

describe("GitHub dispatcher as a GitHub App installation", () => {
  const keys = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs1", format: "pem" },
  });

  it("exchanges an App JWT for an installation token and dispatches with it", async () => {
    standin = await startGitHubStandin({
      app: { appId: "4242", publicKeyPem: keys.publicKey, installationId: "99" },
    });
    const dispatcher = new GitHubDispatcher({
      repository: "acme/models",
      auth: { kind: "app", appId: 4242, privateKey: keys.privateKey, installationId: 99 },
      baseUrl: standin.baseUrl,
    });
    expect(await dispatcher.dispatch(payload())).toEqual({ ok: true });
    const tokenReq = standin.seen.find((s) => s.path === "/app/installations/99/access_tokens");
    expect(tokenReq?.status).toBe(201);
    expect(tokenReq?.authorization).toMatch(/^bearer [\w-]+\.[\w-]+\.[\w-]+$/i);
    expect(standin.issuedTokens).toHaveLength(1);
    expect(standin.accepted[0]?.authorization).toBe(`token ${standin.issuedTokens[0]}`);
  });

  it("accepts a private key pasted on one line with escaped newlines", async () => {
    standin = await startGitHubStandin({
      app: { appId: "4242", publicKeyPem: keys.publicKey, installationId: "99" },
    });
    const dispatcher = new GitHubDispatcher({
      repository: "acme/models",
      auth: {
        kind: "app",
        appId: "4242",
        privateKey: keys.privateKey.replace(/\n/g, "\\n"),
        installationId: "99",
      },
      baseUrl: standin.baseUrl,
    });
    expect(await dispatcher.dispatch(payload())).toEqual({ ok: true });
  });

  it("a wrong App key is refused at the token exchange: 401, not retryable, said so", async () => {
    const other = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      publicKeyEncoding: { type: "spki", format: "pem" },
      privateKeyEncoding: { type: "pkcs1", format: "pem" },
    });
    standin = await startGitHubStandin({
      app: { appId: "4242", publicKeyPem: keys.publicKey, installationId: "99" },
    });
    const dispatcher = new GitHubDispatcher({
      repository: "acme/models",
      auth: { kind: "app", appId: 4242, privateKey: other.privateKey, installationId: 99 },
      baseUrl: standin.baseUrl,
    });
    const r = await dispatcher.dispatch(payload());
    expect(r).toMatchObject({ ok: false, retryable: false, status: 401 });
    if (!r.ok) expect(r.message).toContain("installation access token");
    expect(standin.accepted).toHaveLength(0);
  });

  it("reads the App configuration from the environment, with escaped newlines", async () => {
    standin = await startGitHubStandin({
      app: { appId: "7", publicKeyPem: keys.publicKey, installationId: "8" },
    });
    const options = gitHubDispatcherOptionsFromEnv({
      GITHUB_REPOSITORY: "acme/models",
      GITHUB_APP_ID: "7",
      GITHUB_APP_INSTALLATION_ID: "8",
      GITHUB_APP_PRIVATE_KEY: keys.privateKey.replace(/\n/g, "\\n"),
      GITHUB_API_URL: `${standin.baseUrl}/`,
    });
    expect(options.auth.kind).toBe("app");
    expect(await new GitHubDispatcher(options).dispatch(payload())).toEqual({ ok: true });
  });
});

describe("dispatcher configuration from the environment", () => {
  it("lists every missing variable with its fix", () => {
    let err: unknown;
    try {
      gitHubDispatcherOptionsFromEnv({ GITHUB_APP_ID: "x", BATON_GITHUB_TIMEOUT_MS: "fast" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BatonError);
    const paths = (err as BatonError).problems.map((p) => p.path);
    expect(paths).toEqual([
      "GITHUB_REPOSITORY",
      "GITHUB_APP_ID",
      "GITHUB_APP_INSTALLATION_ID",
      "GITHUB_APP_PRIVATE_KEY",
      "BATON_GITHUB_TIMEOUT_MS",
    ]);
    expect((err as BatonError).message).toMatch(/^\[github\] dispatcher configuration/);
  });

  it("a token alone is enough", () => {
    const o = gitHubDispatcherOptionsFromEnv({
      GITHUB_REPOSITORY: "acme/models",
      GITHUB_TOKEN: TOKEN,
    });
    expect(o).toMatchObject({ repository: "acme/models", auth: { kind: "token", token: TOKEN } });
  });

  it("the constructor refuses a repository that is not owner/name", () => {
    expect(
      () => new GitHubDispatcher({ repository: "models", auth: { kind: "token", token: TOKEN } }),
    ).toThrow(/\[github\] repository "models" is not owner\/name/);
  });
});
