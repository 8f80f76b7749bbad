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
