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
