/**
 * The API's problems for a bad body in plain words (engine/src/http/errors.ts zodProblems):
 * zod's range and type texts rewritten, and a fix that says what to write, never a repeat of
 * the problem.
 */
import { describe, expect, it } from "vitest";
import * as z from "zod";
import { zodProblems } from "../../engine/src/http/errors.ts";

const Body = z
  .object({
    rto_ms: z.number().int().min(0),
    rpo_ms: z.number(),
    text: z.string().min(1).max(5),
    models: z.array(z.string()).min(1),
    n: z.number().gt(0),
  })
  .strict();

function problems(body: unknown, schema: z.ZodType = Body) {
  const r = schema.safeParse(body);
  if (r.success) throw new Error("expected a bad body");
  return Object.fromEntries(zodProblems(r.error, "body").map((p) => [p.path, p]));
}

describe("zodProblems", () => {
  it("says ranges in words and the fix as what to write", () => {
    const p = problems({ rto_ms: -1, rpo_ms: 1, text: "toolong", models: [], n: 0 });
    expect(p["body.rto_ms"]).toEqual({
      path: "body.rto_ms",
      message: "must be 0 or more",
      fix: "set body.rto_ms to 0 or more",
    });
    expect(p["body.text"]).toMatchObject({
      message: "must be at most 5 characters",
      fix: "shorten body.text to at most 5 characters",
    });
    expect(p["body.models"]).toMatchObject({
      message: "must have at least 1 item",
      fix: "give body.models at least 1 item",
    });
    expect(p["body.n"]).toMatchObject({ message: "must be more than 0" });
  });

  it("a number too large to be finite (JSON 1e309) is named as such, for a number or a string field", () => {
    // As the body parser reads it off the wire.
    const p = problems(JSON.parse('{"rto_ms":1,"rpo_ms":1e309,"text":1e309,"models":["m"],"n":1}'));
    expect(p["body.rpo_ms"]).toMatchObject({
      message: "must be a finite number, not a number too large to be finite (such as 1e309)",
      fix: "set body.rpo_ms to a finite number",
    });
    expect(p["body.text"]).toMatchObject({ fix: "set body.text to a string" });
  });

  it("an option, a pattern and a required field of any type in words, with a fix to match", () => {
    const Cb = z
      .object({
        overall: z.enum(["pass", "fail"]),
        run_id: z.string().regex(/^[0-9]{1,20}$/),
        checks: z.unknown(),
      })
      .required({ checks: true });
    const p = problems({ overall: "maybe", run_id: "☃" }, Cb);
    expect(p["body.overall"]).toEqual({
      path: "body.overall",
      message: 'must be one of "pass", "fail"',
      fix: 'set body.overall to one of "pass", "fail"',
    });
    expect(p["body.run_id"]).toMatchObject({
      message: "must match the pattern /^[0-9]{1,20}$/",
      fix: "change body.run_id to match /^[0-9]{1,20}$/",
    });
    expect(p["body.checks"]).toMatchObject({ message: "is missing", fix: "add body.checks" });
    for (const x of Object.values(p))
      expect(`${x.message} ${x.fix}`).not.toMatch(/Invalid|nonoptional|: it /);
  });

  it("no fix repeats zod's words", () => {
    const all = Object.values(
      problems(JSON.parse('{"rto_ms":-1,"rpo_ms":1e309,"text":"","models":[],"n":0,"extra":1}')),
    );
    for (const p of all) {
      expect(p.fix).not.toMatch(/Too (small|big)|Invalid input|: it /);
      expect(p.message).not.toMatch(/Too (small|big)|Infinity/);
    }
  });
});
