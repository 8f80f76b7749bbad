/**
 * docs/control-plane.openapi.yaml describes exactly the routes the reference server serves, and
 * every `$ref` in it resolves.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createControlPlaneApp } from "../../engine/src/control-plane/app.ts";
import { ControlPlaneCore } from "../../engine/src/control-plane/core.ts";
import { Hangs } from "../../engine/src/control-plane/hangs.ts";
import { MemoryCpStore } from "../../engine/src/control-plane/memory-store.ts";
import { TrafficGenerator } from "../../engine/src/control-plane/traffic.ts";

const doc = parse(
  readFileSync(join(import.meta.dirname, "../../docs/control-plane.openapi.yaml"), "utf8"),
);
const METHODS = ["get", "put", "post", "delete", "patch"];

describe("control-plane OpenAPI document", () => {
  it("is OpenAPI 3.1 and lists exactly the server's routes", () => {
    expect(doc.openapi).toBe("3.1.0");
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, item]) =>
        Object.keys(item)
          .filter((m) => METHODS.includes(m))
          .map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`),
      )
      .sort();
    const core = new ControlPlaneCore(new MemoryCpStore());
    const app = createControlPlaneApp({
      core,
      faults: null,
      hangs: new Hangs(),
      writeToken: "openapi-route-listing-token",
      // GET /metrics is served when the router runs as a traffic generator.
      traffic: new TrafficGenerator(core, { model: "m" }),
    });
    const served = [
      ...new Set(app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path}`)),
    ].sort();
    expect(documented).toEqual(served);
  });

  it("resolves every $ref", () => {
    const refs: string[] = [];
    const walk = (v: unknown) => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === "object") {
        for (const [k, x] of Object.entries(v)) {
          if (k === "$ref" && typeof x === "string") refs.push(x);
          else walk(x);
        }
      }
    };
    walk(doc);
    expect(refs.length).toBeGreaterThan(20);
    for (const ref of refs) {
      const target = ref
        .replace(/^#\//, "")
        .split("/")
        .reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], doc);
      expect(target, ref).toBeDefined();
    }
  });
});
