/** How the CLI prints an error: each problem once, body fields named by the flag that sets them. */
import { describe, expect, it } from "vitest";
import { CliError, errorLines, flagWords, problemsByFlag } from "../../engine/src/cli/errors.ts";

describe("errorLines", () => {
  it("a headline quoting the first of several problems becomes a count; each problem is listed once", () => {
    const problems = Array.from({ length: 10 }, (_, i) => ({
      path: `rollout.waves.${i}.traffic`,
      message: `traffic must be 0..100 (r.yaml:${i + 4}:16)`,
      fix: "use a percent",
    }));
    const err = new CliError(
      `[recipe] r.yaml failed the contract check: ${problems[0]!.path}: ${problems[0]!.message} (and 9 more)`,
      1,
      problems,
    );
    const lines = errorLines(err);
    expect(lines[0]).toBe("[recipe] r.yaml failed the contract check: 10 problems:");
    expect(lines).toHaveLength(11);
    const text = lines.join("\n");
    expect(text.split("rollout.waves.0.traffic").length - 1).toBe(1);
    expect(text).not.toContain("more)");
  });

  it("a single problem is listed with its fix under the headline", () => {
    const p = { path: "image", message: "must be pinned", fix: "pin it by digest" };
    const lines = errorLines(new CliError("[recipe] failed: image: must be pinned", 1, [p]));
    expect(lines).toEqual([
      "[recipe] failed: image: must be pinned",
      "  - image: must be pinned; fix: pin it by digest",
    ]);
  });

  it("problems the headline does not quote are all listed", () => {
    const p = { path: "a", message: "bad", fix: "f" };
    expect(errorLines(new CliError("[engine] refused", 1, [p, p]))).toEqual([
      "[engine] refused",
      "  - a: bad; fix: f",
      "  - a: bad; fix: f",
    ]);
  });
});

describe("flagWords / problemsByFlag", () => {
  it("names the flag a person typed instead of the engine's body path", () => {
    expect(flagWords("[engine] bad accept body: body.by: must not be empty")).toBe(
      "[engine] bad accept body: --by: must not be empty",
    );
    expect(flagWords("body.expires_at: not a time; body.record_digest: not hex")).toBe(
      "--expires: not a time; --digest: not hex",
    );
    expect(flagWords("body.lanes.lane-a: not an image")).toBe("--lane lane-a: not an image");
    expect(flagWords("body.attestations.0.payload: missing")).toBe(
      "--attestation #1 (payload): missing",
    );
    // A field no flag sets keeps its path; words that merely contain "body." are left alone.
    expect(flagWords("body.weird: x; somebody.by")).toBe("body.weird: x; somebody.by");
    expect(
      problemsByFlag([
        { path: "body.reason", message: "body.reason is empty", fix: "pass --reason" },
      ]),
    ).toEqual([{ path: "--reason", message: "--reason is empty", fix: "pass --reason" }]);
  });
});

describe("connection: a token that cannot travel in an HTTP header", () => {
  it("is refused as usage naming the character, its position and code point, and the fix", async () => {
    const { connection } = await import("../../engine/src/cli/client.ts");
    for (const [token, shown] of [
      ["tokén-0123456789abcdef", 'character 4 is "é" (U+00E9)'],
      ["tok😀-0123456789abcdef", 'character 4 is "😀" (U+1F600)'],
      ["tok\u0001en-0123456789ab", "character 4 is a control character (U+0001)"],
    ] as const) {
      let err: CliError | undefined;
      try {
        connection({}, { BATON_TOKEN: token });
      } catch (e) {
        err = e as CliError;
      }
      expect(err).toBeInstanceOf(CliError);
      expect(err?.exitCode).toBe(2);
      expect(err?.message).toContain("[cli] BATON_TOKEN is not a valid HTTP header value");
      expect(err?.message).toContain(shown);
      expect(err?.message).toMatch(/printable ASCII only; fix: /);
      expect(err?.message).not.toMatch(/cannot reach|unreachable/);
    }
    expect(() => connection({ token: "caf\u00e9-0123456789abcdef" }, {})).toThrow(
      /^\[cli\] --token /,
    );
    expect(connection({}, { BATON_TOKEN: " plain-ascii token-0123 " }).token).toBe(
      "plain-ascii token-0123",
    );
  });
});
