/**
 * Schemas built on first use instead of when their module loads. A zod schema is an object
 * graph that takes real time to construct (each `.string()`, `.max()`, `.describe()` builds and
 * clones definitions); a module that declares its schemas at the top level pays for all of them
 * whenever it is imported, needed or not. On a serverless runtime every fresh isolate imports
 * the whole engine before its first answer, so that cost lands on every cold start.
 *
 * `lazySchema(() => z.object({...}))` returns a stand-in typed exactly as the schema: the
 * first thing that reads, calls or inspects it builds the schema (once), and every later
 * operation is forwarded to that one schema. Parsing, composing (`.optional()`, `.extend()`,
 * use inside another schema), `instanceof` and JSON Schema generation behave as with the schema
 * itself, and so do its error messages: it is the same schema, only built later (the
 * recipe's JSON Schema, engine/schema/recipe.schema.json, is the same text either way).
 */
import type * as z from "zod";
import { processSchema } from "zod/v4/core";

/**
 * A stand-in for the object `build()` returns, built at the stand-in's first use (any read,
 * `in`, key listing or prototype lookup), then reused. `build` runs at most once; if it
 * throws, the error surfaces at that first use and the next use tries again.
 */
export function lazySchema<T extends object>(build: () => T): T {
  let built: T | undefined;
  // The proxy's own target only satisfies the Proxy invariants (non-configurable properties
  // reported by the built schema are copied onto it); every operation reads the built schema.
  const shell = Object.create(null) as T;
  const real = (): T => {
    built ??= build();
    return built;
  };
  // JSON Schema generation keys what it has seen by schema object, and the built schema's own
  // hooks name the built schema, not the stand-in: the stand-in is given the hook zod's
  // wrappers (`.optional()`) use, so it is written as a reference to the built schema, whose
  // JSON it takes (the same JSON as the schema itself).
  let zodView: object | undefined;
  const view = (): object => {
    const inner = (real() as unknown as { _zod: object })._zod;
    zodView ??= new Proxy(inner, {
      get: (t, key) =>
        key === "processJSONSchema"
          ? (ctx: z.core.ToJSONSchemaContext, _json: unknown, params: z.core.ProcessParams) => {
              const schema = real() as unknown as z.core.$ZodType;
              processSchema(schema, ctx, params);
              const seen = ctx.seen.get(stand as unknown as z.core.$ZodType);
              if (seen) seen.ref = schema;
            }
          : Reflect.get(t, key),
    });
    return zodView;
  };
  const stand: T = new Proxy(shell, {
    get: (_t, key) => (key === "_zod" ? view() : Reflect.get(real(), key)),
    set: (_t, key, value) => Reflect.set(real(), key, value),
    has: (_t, key) => Reflect.has(real(), key),
    ownKeys: () => Reflect.ownKeys(real()),
    getOwnPropertyDescriptor: (t, key) => {
      const d = Reflect.getOwnPropertyDescriptor(real(), key);
      if (d && !d.configurable) Reflect.defineProperty(t, key, d);
      return d;
    },
    defineProperty: (_t, key, d) => Reflect.defineProperty(real(), key, d),
    deleteProperty: (_t, key) => Reflect.deleteProperty(real(), key),
    getPrototypeOf: () => Reflect.getPrototypeOf(real()),
  });
  return stand;
}
