/** BATON_RUNNER_CREDENTIAL and BATON_OIDC_*: defaults, and each bad value named with its fix. */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../engine/src/config.ts";
import { serverlessSettings } from "../../engine/src/entries/serverless.ts";
import { runnerCredentialFromEnv } from "../../engine/src/http/runner-oidc.ts";

const defaults = { audience: "https://baton.example.org", repository: "acme/models" };
const REF = "acme/models/.github/workflows/release-step.yml@refs/heads/main";

describe("runner credential settings", () => {
  it("hmac by default; oidc takes GitHub's issuer, its JWKS and the engine URL as audience", () => {
    expect(runnerCredentialFromEnv({}, defaults)).toEqual({ ok: true, mode: "hmac", oidc: null });
    const r = runnerCredentialFromEnv(
      { BATON_RUNNER_CREDENTIAL: "oidc", BATON_OIDC_WORKFLOW_REF: REF },
      defaults,
    );
    expect(r).toMatchObject({
      ok: true,
      mode: "oidc",
      oidc: {
        issuer: "https://token.actions.githubusercontent.com",
        jwksUrl: "https://token.actions.githubusercontent.com/.well-known/jwks",
        audience: "https://baton.example.org",
        repository: "acme/models",
        workflowRef: REF,
        eventName: "repository_dispatch",
      },
    });
  });

  it("names each bad or missing variable", () => {
    const names = (env: Record<string, string>, d: typeof defaults | { audience: string }) => {
      const r = runnerCredentialFromEnv(env, d);
      return r.ok ? [] : r.problems.map((p) => p.name);
    };
    expect(names({ BATON_RUNNER_CREDENTIAL: "jwt" }, defaults)).toEqual([
      "BATON_RUNNER_CREDENTIAL",
    ]);
    expect(names({ BATON_RUNNER_CREDENTIAL: "oidc" }, { audience: "x" })).toEqual([
      "BATON_OIDC_REPOSITORY",
      "BATON_OIDC_WORKFLOW_REF",
    ]);
    expect(
      names(
        {
          BATON_RUNNER_CREDENTIAL: "hmac+oidc",
          BATON_OIDC_WORKFLOW_REF: "release-step.yml",
          BATON_OIDC_REPOSITORY_ID: "abc",
        },
        defaults,
      ).sort(),
    ).toEqual(["BATON_OIDC_REPOSITORY_ID", "BATON_OIDC_WORKFLOW_REF"]);
  });

  it("the engine's configuration carries it; with OIDC alone no callback secret is needed", () => {
    const env = {
      BATON_OPERATOR_TOKEN: "o".repeat(32),
      BATON_PUBLIC_URL: "https://baton.example.org",
      BATON_RUNNER_CREDENTIAL: "oidc",
      BATON_OIDC_REPOSITORY: "acme/models",
      BATON_OIDC_WORKFLOW_REF: REF,
    };
    const c = loadConfig(env);
    expect(c.callbackSecrets).toEqual([]);
    expect(c.runnerCredential).toMatchObject({
      mode: "oidc",
      oidc: { audience: "https://baton.example.org", repository: "acme/models" },
    });
    // hmac (the default) still needs the secret, and a bad OIDC setting stops the engine.
    expect(() => loadConfig({ ...env, BATON_RUNNER_CREDENTIAL: "hmac" })).toThrow(
      /BATON_CALLBACK_SECRETS/,
    );
    expect(() => loadConfig({ ...env, BATON_OIDC_WORKFLOW_REF: "x" })).toThrow(
      /BATON_OIDC_WORKFLOW_REF/,
    );
    const s = serverlessSettings({
      ...env,
      DATABASE_URL: "postgres://u@127.0.0.1:1/db",
      BATON_CONTROL_PLANE_URL: "https://cp.example.org",
      BATON_CONTROL_PLANE_TOKEN: "c".repeat(32),
      GITHUB_REPOSITORY: "acme/models",
      GITHUB_TOKEN: "t",
    });
    expect(s.runnerCredential.mode).toBe("oidc");
    expect(s.BATON_CALLBACK_SECRETS).toEqual([]);
  });
});
