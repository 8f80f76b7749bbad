/** Request bodies shared by the operator routes: who takes the action, and JSON parsing. */
import type { Context } from "hono";
import { z } from "zod";
import { badRequest, zodProblems } from "../errors.ts";

/** Who took an operator action, as the caller names themselves (kept in history). */
export const ActorField = z
  .string()
  .regex(/^[A-Za-z0-9._@ -]{1,64}$/, "must be 1–64 letters, digits, '.', '_', '@', '-' or spaces")
  .optional()
  .describe("Who takes the action (e.g. your login); recorded in history after `operator:`.");

/**
 * C0/C1 controls other than tab, newline and NUL (stored as U+FFFD like every store text), and the Unicode bidirectional formatting
 * characters (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069; Unicode TR #9): shown on
 * the dashboard or in a terminal, they make a reason read other than it was written
 * ("Trojan Source", CVE-2021-42574).
 */
const HIDDEN =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
  /[\u0001-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

/** Why an operator took an action (kept in history and the record): ≤ 1000 characters. */
export const ReasonField = z
  .string()
  .max(1000, "must be at most 1000 characters")
  .superRefine((s, ctx) => {
    const m = HIDDEN.exec(s);
    if (m)
      ctx.addIssue({
        code: "custom",
        message: `holds the invisible character U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")} at position ${m.index + 1}; write the reason in plain text (control and bidirectional-formatting characters can make it read other than written)`,
      });
  });

/** `operator` or `operator:<name>` when the caller named themselves. */
export function actorOf(name: string | undefined): string {
  return name ? `operator:${name.trim()}` : "operator";
}

/** Parses an optional JSON body with `schema`; an empty body is `{}`. @throws BatonError 400. */
export async function jsonBody<T extends z.ZodType>(
  c: Context,
  what: string,
  schema: T,
): Promise<z.infer<T>> {
  const text = await c.req.text();
  let value: unknown = {};
  if (text.trim() !== "") {
    try {
      value = JSON.parse(text);
    } catch {
      throw badRequest(what, [{ path: "body", message: "is not JSON", fix: "send a JSON object" }]);
    }
  }
  const b = schema.safeParse(value);
  if (!b.success) throw badRequest(what, zodProblems(b.error, "body"));
  return b.data;
}
