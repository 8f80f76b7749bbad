/**
 * Schemas built at first use (engine/src/protocol/lazy-schema.ts): loading either Workers
 * entry's modules (the engine's, the dashboard's) builds no zod schema (a fresh isolate pays for a schema only when a request needs
 * it), and a stand-in parses, fails, composes and writes JSON Schema exactly as the schema it
 * stands for.
 */
import { describe, expect, it, vi } from "vitest";
import * as z from "zod";
import { lazySchema } from "../../engine/src/protocol/lazy-schema.ts";

/** How many zod schemas are constructed while `work` runs (each reads the locale once). */
async function schemasBuiltDuring(work: () => Promise<unknown>): Promise<number> {
  const config = z.core.globalConfig;
  z.string(); // the default locale is set by the first schema built; count from here on
  const locale = config.localeError;
  let reads = 0;
  Object.defineProperty(config, "localeError", {
    configurable: true,
    enumerable: true,
    get: () => {
      reads++;
      return locale;
    },
    set: (v) => {
      Object.defineProperty(config, "localeError", { value: v, writable: true });
    },
  });
  try {
    await work();
  } finally {
    Object.defineProperty(config, "localeError", {
      value: locale,
      writable: true,
      configurable: true,
      enumerable: true,
    });
  }
  return reads;
}

/**
 * Loads a Workers entry's modules afresh and asserts that none builds a zod schema, while the
 * recipe schema is still built at its first use.
 */
async function noSchemaAtLoad(entry: string, load: () => Promise<unknown>): Promise<void> {
  // Unit files share their module cache: start from none loaded, so the import evaluates
  // every module of the entry here.
  vi.resetModules();
  const loaded = await schemasBuiltDuring(load);
  expect(loaded, `zod schemas built at module load by the ${entry} entry's modules`).toBe(0);
  const { Recipe } = await import("../../engine/src/domain/recipe.ts");
  const used = await schemasBuiltDuring(async () => Recipe.safeParse({}));
  expect(used, "the recipe schema is built at its first use").toBeGreaterThan(0);
}

describe("the engine's schemas", () => {
  it("are not built when the engine Worker entry's modules load (only at first use)", async () => {
    await noSchemaAtLoad("engine Worker", () => import("../../engine/src/entries/worker.ts"));
  });

  // The dashboard's modules are the dashboard Worker's alone: the engine Worker loads none.
  it("are not built when the dashboard Worker entry's modules load (only at first use)", async () => {
    await noSchemaAtLoad(
      "dashboard Worker",
      () => import("../../engine/src/entries/dashboard-worker.ts"),
    );
  });
});

describe("lazySchema", () => {
  const direct = () =>
    z
      .object({
        name: z.string().max(5, { message: "name must be at most 5 characters" }),
        port: z.number().int().min(1).default(22),
      })
      .strict()
      .describe("a lane");

  it("builds the schema at the first use, once", () => {
    let builds = 0;
    const s = lazySchema(() => {
      builds++;
      return direct();
    });
    expect(builds).toBe(0);
    expect(s.parse({ name: "a" })).toEqual({ name: "a", port: 22 });
    s.safeParse({ name: "toolong" });
    expect(builds).toBe(1);
  });

  it("parses and fails with the same issues as the schema itself", () => {
    const s = lazySchema(direct);
    for (const input of [{ name: "abc", port: 3 }, { name: "toolong", port: 0, extra: 1 }, null]) {
      const a = s.safeParse(input);
      const b = direct().safeParse(input);
      expect(a.success).toBe(b.success);
      expect(a.error?.issues).toEqual(b.error?.issues);
    }
  });

  it("composes, and writes the same JSON Schema, as the schema itself", () => {
    const s = lazySchema(direct);
    const outer = (lane: ReturnType<typeof direct>) =>
      z.object({
        lanes: z.array(lane),
        first: lane.optional(),
        more: lane.extend({ x: z.boolean() }),
      });
    expect(s).toBeInstanceOf(z.ZodObject);
    expect(
      outer(s).safeParse({ lanes: [{ name: "x" }], more: { name: "y", x: true } }).success,
    ).toBe(true);
    expect(z.toJSONSchema(outer(s))).toEqual(z.toJSONSchema(outer(direct())));
    expect(z.toJSONSchema(s)).toEqual(z.toJSONSchema(direct()));
  });
});
