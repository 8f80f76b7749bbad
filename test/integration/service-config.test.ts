/** Engine configuration from the environment: defaults, and one clear problem per bad variable. */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../engine/src/config.ts";
import { BatonError } from "../../engine/src/domain/errors.ts";
import { parseFaultSpec } from "../../engine/src/faults.ts";

const base = {
  BATON_CALLBACK_SECRETS: "s".repeat(32),
  BATON_OPERATOR_TOKEN: "o".repeat(32),
};

function problems(env: Record<string, string>) {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(BatonError);
    expect((e as BatonError).message).toMatch(/^\[engine\] invalid configuration/);
    return (e as BatonError).problems;
  }
  throw new Error("expected the configuration to be refused");
}

describe("loadConfig", () => {
  it("applies the embedded defaults", () => {
    const c = loadConfig(base);
    expect(c.databaseUrl).toBeNull();
    expect(c.dataDir).toBe(path.resolve("./.baton"));
    expect(c.port).toBe(8787);
    expect(c.publicUrl).toBe("http://127.0.0.1:8787");
    expect(c.callbackSecrets).toEqual(["s".repeat(32)]);
    expect(c.dispatcher).toBe("local");
    expect(c.tickMs).toBe(1000);
  });

  it("reads the rotation list, Postgres URL and GitHub settings", () => {
    const c = loadConfig({
      ...base,
      BATON_CALLBACK_SECRETS: `${"a".repeat(16)}, ${"b".repeat(16)}`,
      DATABASE_URL: "postgres://u:p@db:5432/baton",
      BATON_PUBLIC_URL: "https://baton.example/",
      BATON_DISPATCHER: "github",
      GITHUB_REPOSITORY: "acme/models",
      GITHUB_TOKEN: "ghs_x",
    });
    expect(c.callbackSecrets).toEqual(["a".repeat(16), "b".repeat(16)]);
    expect(c.databaseUrl).toBe("postgres://u:p@db:5432/baton");
    expect(c.publicUrl).toBe("https://baton.example");
    expect(c.githubRepository).toBe("acme/models");
  });

  it("names every bad variable with its fix", () => {
    const ps = problems({
      DATABASE_URL: "mysql://x",
      PORT: "http",
      BATON_CALLBACK_SECRETS: "short",
      BATON_DISPATCHER: "github",
    });
    const paths = ps.map((p) => p.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        "DATABASE_URL",
        "PORT",
        "BATON_CALLBACK_SECRETS",
        "BATON_OPERATOR_TOKEN",
        "GITHUB_REPOSITORY",
        "GITHUB_TOKEN",
      ]),
    );
    for (const p of ps) {
      expect(p.message).toContain(p.path);
      expect(p.fix.length).toBeGreaterThan(10);
    }
  });

  it("lists admission, SSH key and engine problems in one error, each variable named once", () => {
    let err: BatonError | undefined;
    try {
      loadConfig({
        ...base,
        PORT: "http",
        BATON_ADMISSION: "maybe",
        BATON_SSH_KEY_FILE: "/nonexistent/baton-key",
      });
    } catch (e) {
      err = e as BatonError;
    }
    expect(err).toBeInstanceOf(BatonError);
    expect(err?.message).toMatch(/^\[engine\] invalid configuration/);
    expect(err?.problems.map((p) => p.path)).toEqual(
      expect.arrayContaining(["PORT", "BATON_ADMISSION", "BATON_SSH_KEY_FILE"]),
    );
    const line = err?.message.split("\n").find((l) => l.includes("BATON_ADMISSION"));
    expect(line).toBe(
      '  - BATON_ADMISSION must be on or off, not "maybe"; fix: unset it (admission on), or set BATON_ADMISSION=off for local use only',
    );
    for (const p of err?.problems ?? []) {
      expect(p.message.split(p.path).length - 1, p.message).toBe(1);
      expect(p.fix.length).toBeGreaterThan(10);
    }
  });

  it("refuses BATON_DATABASE_URL instead of quietly running on SQLite", () => {
    const ps = problems({ ...base, BATON_DATABASE_URL: "postgres://u:p@127.0.0.1:5432/baton" });
    expect(ps.map((p) => p.path)).toEqual(["BATON_DATABASE_URL"]);
    expect(ps[0]?.message).toMatch(/reads DATABASE_URL/);
    expect(ps[0]?.fix).toMatch(/rename it to DATABASE_URL/);
    // Both set: DATABASE_URL is the one read, nothing to refuse.
    const url = "postgres://u:p@127.0.0.1:5432/baton";
    expect(loadConfig({ ...base, DATABASE_URL: url, BATON_DATABASE_URL: url }).databaseUrl).toBe(
      url,
    );
  });

  it("treats empty strings as unset", () => {
    const ps = problems({ ...base, BATON_OPERATOR_TOKEN: "" });
    expect(ps.map((p) => p.path)).toEqual(["BATON_OPERATOR_TOKEN"]);
  });

  it("says each problem once, even when a value breaks two rules that say the same", () => {
    const ps = problems({ ...base, BATON_DRIFT_INTERVAL_MS: "-1" });
    expect(ps.map((p) => p.message)).toEqual([
      "BATON_DRIFT_INTERVAL_MS must be 0 (off) or at least 1000",
    ]);
  });

  it("BATON_DRIFT_SETTLE_MS: unset leaves the default (one interval), else 0..86400000 ms", () => {
    expect(loadConfig(base).driftSettleMs).toBeUndefined();
    expect(loadConfig({ ...base, BATON_DRIFT_SETTLE_MS: "15000" }).driftSettleMs).toBe(15_000);
    expect(problems({ ...base, BATON_DRIFT_SETTLE_MS: "-5" }).map((p) => p.message)).toEqual([
      "BATON_DRIFT_SETTLE_MS must be 0..86400000 (ms)",
    ]);
  });
});

describe("fault specs", () => {
  it("parses name and name@k=v,k2=v2", () => {
    expect(parseFaultSpec("")).toBeNull();
    expect(parseFaultSpec("after_commit_before_effect")).toEqual({
      name: "after_commit_before_effect",
      match: {},
    });
    expect(
      parseFaultSpec("in_callback_before_commit@step_run_id=sr_1_2_f,effect=dispatch"),
    ).toEqual({
      name: "in_callback_before_commit",
      match: { step_run_id: "sr_1_2_f", effect: "dispatch" },
    });
  });
});
