/**
 * The layering rule (.dependency-cruiser.cjs, `npm run check:layers`): every module of the real
 * tree is in exactly one layer, and dependency-cruiser, run with the rule on a small tree built
 * here, reports each kind of back-edge and a circle, and passes the same tree without them.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { cruise, type IViolation } from "dependency-cruiser";
import { afterAll, describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const config = createRequire(import.meta.url)(join(root, ".dependency-cruiser.cjs")) as {
  forbidden: { name: string; from: { path?: string } }[];
};
const layers = config.forbidden.filter((r) => r.name.startsWith("layer-"));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : /\.tsx?$/.test(e.name)
        ? [relative(root, join(dir, e.name))]
        : [],
  );
}

describe("the layers of the real tree", () => {
  it("put every module of engine/src, the action and the tools in exactly one layer", () => {
    const files = [
      ...sources(join(root, "engine/src")),
      ...sources(join(root, "actions/release-step/src")),
      ...sources(join(root, "scripts/release")).filter((f) => !f.includes("/dist/")),
    ];
    expect(files.length).toBeGreaterThan(200);
    const wrong = files
      .map((f) => ({
        f,
        in: layers.filter((l) => new RegExp(l.from.path ?? "$^").test(f)).map((l) => l.name),
      }))
      .filter((x) => x.in.length !== 1);
    expect(wrong).toEqual([]);
  });
});

const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

/** Cruises a tree of `files` (path from the repository root -> source) with the real rule. */
async function violations(files: Record<string, string>): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), "baton-layers-"));
  made.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const result = await cruise(["engine/src"], {
    baseDir: dir,
    validate: true,
    ruleSet: { forbidden: config.forbidden } as never,
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
  });
  if (typeof result.output === "string") throw new Error("expected a cruise result");
  return result.output.summary.violations
    .map((v: IViolation) => `${v.rule.name}: ${v.from} -> ${v.to}`)
    .sort();
}

/** A small engine that keeps the rule: each layer imports one below it. */
const CLEAN: Record<string, string> = {
  "engine/src/protocol/ids.ts": "export type Id = string;\n",
  "engine/src/domain/types.ts":
    'import type { Id } from "../protocol/ids.ts";\nexport type R = { id: Id };\n',
  "engine/src/ports/store.ts":
    'import type { R } from "../domain/types.ts";\nexport interface Store { get(): R }\n',
  "engine/src/service/api.ts":
    'import type { Store } from "../ports/store.ts";\nexport const api = (s: Store) => s.get();\n',
  "engine/src/views/summary.ts":
    'import { api } from "../service/api.ts";\nexport const summary = api;\n',
  "engine/src/http/app.ts":
    'import { summary } from "../views/summary.ts";\nexport const app = summary;\n',
  "engine/src/cli/output.ts":
    'import { summary } from "../views/summary.ts";\nexport const out = summary;\n',
  "engine/src/adapters/sqlite/store.ts":
    'import type { Store } from "../../ports/store.ts";\nexport const s = {} as Store;\n',
  "engine/src/main-node.ts":
    'import { app } from "./http/app.ts";\nimport { s } from "./adapters/sqlite/store.ts";\nexport const main = [app, s];\n',
};

describe("check:layers on a small tree (the rule failing on deliberate back-edges)", () => {
  it("passes a tree that keeps the arrows", async () => {
    expect(await violations(CLEAN)).toEqual([]);
  }, 60_000);

  it("reports each back-edge and the circle, naming the rule and both modules", async () => {
    const found = await violations({
      ...CLEAN,
      // service -> views (drift reading the dashboard's read model)
      "engine/src/service/drift.ts":
        'import { summary } from "../views/summary.ts";\nexport const drift = summary;\n',
      // cli -> http (the CLI reaching into the dashboard)
      "engine/src/cli/watch.ts": 'import { app } from "../http/app.ts";\nexport const w = app;\n',
      // protocol -> domain (a type-only import counts)
      "engine/src/protocol/control-plane.ts":
        'import type { R } from "../domain/types.ts";\nexport type Op = R;\n',
      // adapters -> service
      "engine/src/adapters/notifier/index.ts":
        'import { api } from "../../service/api.ts";\nexport const n = api;\n',
      // a circle inside domain/
      "engine/src/domain/a.ts": 'import { b } from "./b.ts";\nexport const a = () => b;\n',
      "engine/src/domain/b.ts": 'import { a } from "./a.ts";\nexport const b = () => a;\n',
    });
    expect(found).toEqual(
      [
        "layer-adapters: engine/src/adapters/notifier/index.ts -> engine/src/service/api.ts",
        "layer-cli: engine/src/cli/watch.ts -> engine/src/http/app.ts",
        "layer-protocol: engine/src/protocol/control-plane.ts -> engine/src/domain/types.ts",
        "layer-service: engine/src/service/drift.ts -> engine/src/views/summary.ts",
        "no-circular: engine/src/domain/a.ts -> engine/src/domain/b.ts",
      ].sort(),
    );
  }, 60_000);
});
