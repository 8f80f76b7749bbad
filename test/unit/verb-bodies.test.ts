/**
 * The verbs' body schemas (engine/src/domain/verbs.ts): what a bad field is told.
 */
import { describe, expect, it } from "vitest";
import type * as z from "zod";
import { verbNamed } from "../../engine/src/domain/verbs.ts";

const accept = verbNamed("accept")!.body as z.ZodType;

function messages(r: {
  success: boolean;
  error?: { issues: { path: PropertyKey[]; message: string }[] };
}) {
  return (r.error?.issues ?? []).map((i) => `${i.path.join(".")}: ${i.message}`);
}

describe("accept's expires_at", () => {
  it("a date alone is refused, saying a time of day and an offset are needed", () => {
    for (const v of ["2020-01-01", "2027-01-31T00:00:00", "soon"]) {
      const got = messages(accept.safeParse({ by: "me", expires_at: v }));
      expect(got).toHaveLength(1);
      expect(got[0]).toMatch(/^expires_at: must be a date and a time of day with its offset/);
      expect(got[0]).not.toMatch(/must be an ISO 8601 time/);
    }
  });

  it("a date and time with an offset passes", () => {
    expect(accept.safeParse({ by: "me", expires_at: "2027-01-31T00:00:00Z" }).success).toBe(true);
    expect(accept.safeParse({ by: "me", expires_at: "2027-01-31T00:00:00+02:00" }).success).toBe(
      true,
    );
  });
});

describe("NUL and lone surrogates in free text", () => {
  const pause = verbNamed("pause")!.body as z.ZodType;
  it("are refused in a reason, naming the field and the position", () => {
    expect(messages(pause.safeParse({ reason: "a\u0000b" }))).toEqual([
      expect.stringMatching(
        /^reason: holds the NUL character \(U\+0000\) at position 2; remove it/,
      ),
    ]);
    expect(messages(pause.safeParse({ reason: "a\ud800b" }))).toEqual([
      expect.stringMatching(/^reason: holds a lone UTF-16 surrogate \(U\+D800\) at position 2/),
    ]);
    expect(messages(pause.safeParse({ reason: "ab\udc00" }))).toEqual([
      expect.stringMatching(/^reason: holds a lone UTF-16 surrogate \(U\+DC00\) at position 3/),
    ]);
  });

  it("are refused in accept's by and note", () => {
    expect(messages(accept.safeParse({ by: "me\u0000" }))).toEqual([
      expect.stringMatching(/^by: holds the NUL character \(U\+0000\) at position 3/),
    ]);
    expect(messages(accept.safeParse({ by: "me", note: "x\ud83d" }))).toEqual([
      expect.stringMatching(/^note: holds a lone UTF-16 surrogate \(U\+D83D\) at position 2/),
    ]);
  });

  it("a surrogate pair (an emoji) passes", () => {
    expect(pause.safeParse({ reason: "ok \u{1F680}" }).success).toBe(true);
    expect(accept.safeParse({ by: "me", note: "\u{1F680}" }).success).toBe(true);
  });
});
