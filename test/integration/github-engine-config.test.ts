/**
 * The served engine's GitHub settings, end to end through `loadConfig` → `createEngine` → the
 * GitHub stand-in: GITHUB_API_URL (a GitHub Enterprise Server root under /api/v3),
 * BATON_GITHUB_TIMEOUT_MS, the pinned X-GitHub-Api-Version on every request (token exchange
 * included), and a GitHub App private key checked at start-up (the process exits non-zero
 * naming the variable and the fix).
 */
import { spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { loadConfig } from "../../engine/src/config.ts";
import { startControlPlane } from "../../engine/src/control-plane/server.ts";
import { BatonError } from "../../engine/src/domain/errors.ts";
import { createEngine, type Engine } from "../../engine/src/engine.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { bundledNodeArgs } from "../support/bundles.ts";
import { type GitHubStandin, startGitHubStandin } from "../support/github-standin.ts";

const keys = generateKeyPairSync("rsa", {
  modulusLength: 2048,
  publicKeyEncoding: { type: "spki", format: "pem" },
  privateKeyEncoding: { type: "pkcs1", format: "pem" },
});

const base = {
  BATON_CALLBACK_SECRETS: "s".repeat(32),
  BATON_OPERATOR_TOKEN: "o".repeat(32),
  BATON_ADMISSION: "off",
  BATON_DISPATCHER: "github",
  GITHUB_REPOSITORY: "acme/models",
};

function payload(): DispatchPayload {
  return {
    v: 1,
    step_run_id: "sr_9_1_f",
    tool: "attach-queue-lane",
    args: { lane: { id: "lane-a" }, image: `acme/model@sha256:${"a".repeat(64)}` },
    callback_url: "http://127.0.0.1:8787/v1/releases/step-runs/sr_9_1_f/callback",
    release: {
      id: "r9",
      generation: 1,
      manifest_digest: "b".repeat(64),
      dispatch: 1,
      operation_key: "r9:1:fwd:lane=lane-a",
    },
  };
}

let standin: GitHubStandin | undefined;
let engine: Engine | undefined;
let dir: string | undefined;
afterEach(async () => {
  await engine?.close();
  await standin?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  engine = standin = dir = undefined;
});

async function engineWith(env: Record<string, string>, memoryControlPlane = true) {
  dir ??= mkdtempSync(path.join(tmpdir(), "baton-ghcfg-"));
  engine = await createEngine(loadConfig({ ...base, BATON_DATA_DIR: dir, ...env }), {
    ...(memoryControlPlane
      ? { controlPlane: new MemoryControlPlane({ model: "summarizer-v7" }) }
      : {}),
    log: { info() {}, warn() {}, error() {} },
  });
  return engine;
}

function problemsOf(env: Record<string, string>) {
  try {
    loadConfig({ ...base, ...env });
  } catch (e) {
    expect(e).toBeInstanceOf(BatonError);
    return (e as BatonError).problems;
  }
  throw new Error("expected the configuration to be refused");
}

describe("the served engine's GitHub settings", () => {
  it("dispatches as a GitHub App through GITHUB_API_URL (Enterprise Server /api/v3), every request pinned to 2022-11-28", async () => {
    standin = await startGitHubStandin({
      pathPrefix: "/api/v3",
      app: { appId: "4242", publicKeyPem: keys.publicKey, installationId: "99" },
    });
    const e = await engineWith({
      GITHUB_API_URL: `${standin.baseUrl}/`,
      GITHUB_APP_ID: "4242",
      GITHUB_APP_INSTALLATION_ID: "99",
      GITHUB_APP_PRIVATE_KEY: keys.privateKey.replace(/\n/g, "\\n"),
    });
    expect(await e.dispatcher.dispatch(payload())).toEqual({ ok: true });
    expect(standin.seen.map((s) => [s.method, s.path, s.status])).toEqual([
      ["POST", "/api/v3/app/installations/99/access_tokens", 201],
      ["POST", "/api/v3/repos/acme/models/dispatches", 204],
    ]);
    expect(standin.seen.map((s) => s.api_version)).toEqual(["2022-11-28", "2022-11-28"]);
    expect(standin.accepted[0]?.client_payload.step_run_id).toBe("sr_9_1_f");
  });

  it("without GITHUB_API_URL the engine talks to api.github.com", () => {
    expect(loadConfig({ ...base, GITHUB_TOKEN: "t" }).githubApiUrl).toBe("https://api.github.com");
  });

  it("BATON_GITHUB_TIMEOUT_MS bounds each request: a GitHub that never answers is a retryable timeout naming it", async () => {
    standin = await startGitHubStandin({ tokens: ["ghp_test_token_123"] });
    standin.behave({ kind: "hang" });
    const e = await engineWith({
      GITHUB_API_URL: standin.baseUrl,
      GITHUB_TOKEN: "ghp_test_token_123",
      BATON_GITHUB_TIMEOUT_MS: "300",
    });
    const r = await e.dispatcher.dispatch(payload());
    expect(r).toMatchObject({ ok: false, retryable: true, status: null });
    expect(r.ok ? "" : r.message).toMatch(/timed out after 300 ms/);
  });

  it("the stand-in refuses an API version GitHub does not serve (so the pin is checked)", async () => {
    standin = await startGitHubStandin({ tokens: ["ghp_test_token_123"] });
    const res = await fetch(`${standin.baseUrl}/repos/acme/models/dispatches`, {
      method: "POST",
      headers: { authorization: "token ghp_test_token_123", "x-github-api-version": "2021-01-01" },
      body: JSON.stringify({ event_type: "release-step", client_payload: {} }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/Unsupported/);
  });

  it("refuses bad GITHUB_API_URL and BATON_GITHUB_TIMEOUT_MS naming the variable and the fix", () => {
    const ps = problemsOf({
      GITHUB_TOKEN: "t",
      GITHUB_API_URL: "github.example.com",
      BATON_GITHUB_TIMEOUT_MS: "fast",
    });
    expect(ps.map((p) => p.path).sort()).toEqual(["BATON_GITHUB_TIMEOUT_MS", "GITHUB_API_URL"]);
    expect(ps.find((p) => p.path === "GITHUB_API_URL")?.fix).toMatch(/api\/v3/);
    expect(problemsOf({ GITHUB_TOKEN: "t", BATON_GITHUB_TIMEOUT_MS: "50" })[0]?.message).toMatch(
      /100\.\.120000/,
    );
  });

  it.each([
    ["a truncated key", keys.privateKey.slice(0, 400), /truncated or damaged/],
    ["not a PEM at all", "my-app-secret", /not a PEM private key/],
    [
      "an EC key",
      generateKeyPairSync("ec", {
        namedCurve: "P-256",
        privateKeyEncoding: { type: "pkcs8", format: "pem" },
        publicKeyEncoding: { type: "spki", format: "pem" },
      }).privateKey,
      /RSA/,
    ],
  ])("refuses a GitHub App private key that is %s at start-up", (_what, key, why) => {
    const ps = problemsOf({
      GITHUB_APP_ID: "4242",
      GITHUB_APP_INSTALLATION_ID: "99",
      GITHUB_APP_PRIVATE_KEY: key,
    });
    expect(ps.map((p) => p.path)).toEqual(["GITHUB_APP_PRIVATE_KEY"]);
    expect(ps[0]?.message).toMatch(why);
    expect(ps[0]?.fix).toMatch(/\.pem/);
  });

  it("the engine process exits non-zero at start-up with the key problem, before serving", async () => {
    const root = path.resolve(import.meta.dirname, "../..");
    dir = mkdtempSync(path.join(tmpdir(), "baton-ghcfg-"));
    // The engine's Node entry, bundled (test/support/bundles.ts) and started through its export.
    const args = await bundledNodeArgs("engine/src/main-node.ts", { call: "startNodeServer" });
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: {
        PATH: process.env.PATH ?? "",
        ...base,
        BATON_DATA_DIR: dir,
        PORT: "0",
        GITHUB_APP_ID: "4242",
        GITHUB_APP_INSTALLATION_ID: "99",
        GITHUB_APP_PRIVATE_KEY: keys.privateKey.slice(0, 300),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => {
      out += String(d);
    });
    child.stderr.on("data", (d) => {
      out += String(d);
    });
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => child.kill("SIGKILL"), 60_000);
      child.once("exit", (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    expect(code).not.toBe(0);
    expect(out).toMatch(/GITHUB_APP_PRIVATE_KEY cannot be read as a private key/);
    expect(out).not.toMatch(/listening/);
    expect(out).not.toMatch(/\n\s+at /);
  }, 70_000);
});

describe("the engine's control-plane credential", () => {
  it("the embedded control plane gets a token and the engine's writes carry it", async () => {
    const e = await engineWith({ GITHUB_TOKEN: "t" }, false);
    // The embedded control plane checks the bearer token before anything else: a write without
    // it would be 401 `unauthorized`. This lane was never declared, so an authorised write gets
    // the control plane's own refusal (404: a write never creates a lane).
    const r = await e.controlPlane.apply(
      { op: "set_traffic", weights: { "lane-a": 100 }, percent: 0 },
      { operation_key: "seed:traffic", release_id: "seed", generation: 0, model: "m" },
    );
    expect(r, JSON.stringify(r)).toMatchObject({ outcome: "failed", status: 404 });
    expect(JSON.stringify(r)).toContain("lane lane-a is unknown");
    expect(JSON.stringify(r)).not.toMatch(/unauthorized|401/);
  });

  it("BATON_CONTROL_PLANE_URL without BATON_CONTROL_PLANE_TOKEN is refused, naming both and the fix", () => {
    const ps = problemsOf({ GITHUB_TOKEN: "t", BATON_CONTROL_PLANE_URL: "http://127.0.0.1:8788" });
    expect(ps.map((p) => p.path)).toEqual(["BATON_CONTROL_PLANE_TOKEN"]);
    expect(ps[0]?.message).toMatch(/required with BATON_CONTROL_PLANE_URL/);
    expect(ps[0]?.fix).toMatch(/BATON_CP_TOKEN/);
  });

  it("the engine writes to a reference control plane with its token; a wrong token fails the write with the control plane's reason", async () => {
    const cp = await startControlPlane();
    cp.core.seed([{ id: "lane-a", model: "m", weight: 0, capabilities: [], advertised: true }]);
    try {
      const op = { op: "set_traffic" as const, weights: { "lane-a": 100 }, percent: 100 };
      const ctx = {
        operation_key: "r1:1:fwd:traffic=100",
        release_id: "r1",
        generation: 1,
        model: "m",
      };
      const e = await engineWith(
        {
          GITHUB_TOKEN: "t",
          BATON_CONTROL_PLANE_URL: cp.url,
          BATON_CONTROL_PLANE_TOKEN: "wrong-token-0123456789",
        },
        false,
      );
      const refused = await e.controlPlane.apply(op, ctx);
      expect(refused).toMatchObject({ outcome: "failed", status: 401 });
      expect(refused.outcome === "failed" && refused.message).toMatch(
        /not this control plane's write token/,
      );
      expect(cp.core.ledger({}).length).toBe(0);
      await e.close();
      engine = undefined;
      const good = await engineWith(
        {
          GITHUB_TOKEN: "t",
          BATON_CONTROL_PLANE_URL: cp.url,
          BATON_CONTROL_PLANE_TOKEN: cp.writeToken,
        },
        false,
      );
      expect(await good.controlPlane.apply(op, ctx)).toMatchObject({ outcome: "ok" });
    } finally {
      await engine?.close();
      engine = undefined;
      await cp.close();
    }
  });
});
