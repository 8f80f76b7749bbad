/**
 * Credential references (docs/recovery-actions.md "Revoke a credential"): the contract check
 * refuses a value that looks like a secret, naming the field and the fix; a reference compiles
 * into the manifest as written; the verdict on a revoke tool's result needs its own check that
 * the old credential is refused.
 */
import { describe, expect, it } from "vitest";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import { judge } from "../../engine/src/domain/credential-revocation.ts";
import { secretShape } from "../../engine/src/domain/credentials.ts";
import type { Problem } from "../../engine/src/domain/errors.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { goodRecipe } from "./recipe-fixture.ts";

const REF = "vault://kv/ranker/api-key";

function withCredentials(credentials: unknown[]): RecipeInput {
  return { ...goodRecipe(), credentials } as RecipeInput;
}

function problems(r: RecipeInput): Problem[] {
  const out = checkAndCompile(r);
  return out.ok ? [] : out.problems;
}

function problemAt(r: RecipeInput, path: string): Problem {
  const at = problems(r).filter((p) => p.path === path);
  expect(at, JSON.stringify(problems(r))).toHaveLength(1);
  return at[0] as Problem;
}

describe("credential references in a recipe", () => {
  it("refuses a value that looks like a secret, naming the field and the fix", () => {
    const token = `ghp_${"a1B2c3D4e5".repeat(4)}`;
    const asRef = problemAt(
      withCredentials([{ ref: token, revoke_tool: "run-smoke" }]),
      "credentials.0.ref",
    );
    expect(asRef.message).toContain("looks like a secret value (a GitHub token)");
    expect(asRef.fix).toContain("list only where it lives, e.g. ref: vault://");
    expect(asRef.message).not.toContain(token);

    const asValue = problemAt(
      withCredentials([{ ref: REF, revoke_tool: "run-smoke", value: "hunter2" }]),
      "credentials.0.value",
    );
    expect(asValue.message).toContain("holds a credential's value");
    expect(asValue.fix).toContain("secret manager");

    const key = `AKIA${"ABCDEFGHIJKLMNOP"}`;
    expect(
      problemAt(
        withCredentials([{ ref: REF, revoke_tool: "run-smoke", note: key }]),
        "credentials.0.note",
      ).message,
    ).toContain("holds a credential's value");
    expect(
      problemAt(
        withCredentials([
          { ref: "vault://root:s3cret@vault.example/kv/x", revoke_tool: "run-smoke" },
        ]),
        "credentials.0.ref",
      ).message,
    ).toContain("carries a user or password");
    expect(
      problemAt(
        withCredentials([{ ref: "api-key", revoke_tool: "run-smoke" }]),
        "credentials.0.ref",
      ).message,
    ).toContain("scheme://path");
    expect(
      problemAt(
        withCredentials([{ ref: REF, revoke_tool: "revoke-vault" }]),
        "credentials.0.revoke_tool",
      ).fix,
    ).toContain("add `revoke-vault` to scripts/release/allowlist.json");
    expect(
      problemAt(
        withCredentials([
          { ref: REF, revoke_tool: "run-smoke" },
          { ref: REF, revoke_tool: "run-smoke" },
        ]),
        "credentials.1.ref",
      ).message,
    ).toContain("listed twice");
  });

  it("keeps names and paths that are not secrets, and compiles the references into the manifest", () => {
    expect(secretShape("vault://kv/ranker/api-key")).toBeNull();
    expect(secretShape("aws-sm://prod/ranker/openai_api_key_v2")).toBeNull();
    const out = checkAndCompile(withCredentials([{ ref: REF, revoke_tool: "run-smoke" }]));
    expect(out.ok, JSON.stringify(out.ok ? null : out.problems)).toBe(true);
    if (out.ok) expect(out.manifest.credentials).toEqual([{ ref: REF, revoke_tool: "run-smoke" }]);
    const none = checkAndCompile(goodRecipe());
    expect(none.ok && "credentials" in none.manifest).toBe(false);
  });
});

describe("the verdict on a revoke tool's result", () => {
  const r = { ref: REF, mode: "revoke" as const };
  it("is verified only when the tool's own check shows the old credential refused", () => {
    expect(judge(r, "fail", "failed", []).verified).toBe(false);
    expect(judge(r, "pass", "succeeded", [{ name: "revoke", status: "pass" }])).toMatchObject({
      verified: false,
      verification: expect.stringContaining("wrote no old_credential_refused check"),
    });
    expect(
      judge(r, "pass", "succeeded", [{ name: "old_credential_refused", status: "fail" }]).verified,
    ).toBe(false);
    expect(
      judge(r, "pass", "succeeded", [
        { name: "old_credential_refused", status: "pass", message: "vault answered 403" },
      ]),
    ).toEqual({
      verified: true,
      verification:
        "verified: revoked; the tool's old_credential_refused check passed (vault answered 403)",
    });
  });
});
