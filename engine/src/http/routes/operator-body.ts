/**
 * Request bodies of the operator routes: who takes the action, and JSON parsing. The body
 * schemas themselves are declared with the verbs (domain/verbs.ts).
 */
import type { Context } from "hono";
import * as z from "zod";
import { OTHER_BODY_LIMITS } from "../../protocol/limits.ts";
import { assertJsonBounds } from "../bounded-json.ts";
import { badRequest, zodProblems } from "../errors.ts";

/** `operator` or `operator:<name>` when the caller named themselves. */
export function actorOf(name: string | undefined): string {
  return name ? `operator:${name.trim()}` : "operator";
}

/**
 * Who takes an action: `operator:<person>` when the request carries that person's own token
 * (the token says who; a body's `actor`, which the CLI fills from $USER, is not used), else
 * `actorOf(claimed)`.
 */
export function actorFor(person: string | null, claimed: string | undefined): string {
  return person === null ? actorOf(claimed) : `operator:${person}`;
}

/** The fields of an object schema (its shape's keys); none for other schemas. */
export function schemaFields(schema: z.ZodType): string[] {
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}

/** What `value` is, in words: "an array", "the number 42", "a string", "null". */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number" || typeof value === "boolean")
    return `the ${typeof value} ${value}`;
  return `a ${typeof value}`;
}

/**
 * Parses an optional JSON body of an operator verb with `schema`; an empty body is `{}`.
 * Every verb's body goes through here, so each refusal names the field and the fix the same
 * way: not JSON, not a JSON object (an array, a number…), an unknown field, a bad value.
 * @param example a body to show in the fix (default: the schema's fields with `…` values).
 * @param fixes what to do per field, when the schema's message does not say it.
 * @throws BatonError 400.
 */
export async function jsonBody<T extends z.ZodType>(
  c: Context,
  what: string,
  schema: T,
  o: { example?: string; fixes?: Readonly<Record<string, string>> } = {},
): Promise<z.infer<T>> {
  const fields = schemaFields(schema);
  const example = o.example ?? `{${fields.map((f) => `"${f}": "…"`).join(", ")}}`;
  const send = `send a JSON object such as ${example}${schema.safeParse({}).success ? ", or no body" : ""}`;
  const text = await c.req.text();
  let value: unknown = {};
  if (text.trim() !== "") {
    assertJsonBounds(text, OTHER_BODY_LIMITS, { component: "[engine]", where: what, path: "body" });
    try {
      value = JSON.parse(text);
    } catch {
      throw badRequest(what, [{ path: "body", message: "is not JSON", fix: send }]);
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw badRequest(what, [
      { path: "body", message: `is ${kindOf(value)}, not a JSON object`, fix: send },
    ]);
  }
  const b = schema.safeParse(value);
  if (!b.success) throw badRequest(what, zodProblems(b.error, "body", o.fixes ?? {}, fields));
  return b.data;
}
