/** BATON_RUNNER_CREDENTIAL and BATON_OIDC_*: defaults, and each bad value named with its fix. */
import { describe, expect, it } from "vitest";
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
});
