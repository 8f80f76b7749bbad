/**
 * BATON_EMBEDDED_LANES: a fresh engine on the embedded control plane declares the lanes of the
 * named recipes at start, so the documented first release (POST recipes/example.yaml) is
 * accepted instead of refused for unknown lanes; lanes already known are left as they are.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../engine/src/config.ts";
import { createEngine, type Engine } from "../../engine/src/engine.ts";

const EXAMPLE = fileURLToPath(new URL("../../recipes/example.yaml", import.meta.url));
const TOKEN = "embedded-lanes-operator-token";
const quiet = { info() {}, warn() {}, error() {} };

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function engineWith(extra: Record<string, string>, dir?: string): Promise<Engine> {
  const data = dir ?? mkdtempSync(path.join(tmpdir(), "baton-emb-"));
  if (!dir) cleanups.push(() => rmSync(data, { recursive: true, force: true }));
  const config = loadConfig({
    BATON_DATA_DIR: data,
    BATON_CALLBACK_SECRETS: "embedded-lanes-secret-0123456789",
    BATON_OPERATOR_TOKEN: TOKEN,
    BATON_ADMISSION: "off",
    ...extra,
  });
  const engine = await createEngine(config, { log: quiet });
  return engine;
}

function start(engine: Engine) {
  return Promise.resolve(
    engine.app.request("/v1/releases", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/yaml" },
      body: readFileSync(EXAMPLE),
    }),
  );
}

describe("BATON_EMBEDDED_LANES", () => {
  it("without it a fresh engine refuses the example (unknown lanes); with it the example starts", async () => {
    const bare = await engineWith({});
    cleanups.push(() => bare.close());
    const refused = await start(bare);
    expect(refused.status).toBe(422);
    const said = await refused.text();
    expect(said).toMatch(/lane-a/);
    // The refusal names the way out on the embedded control plane.
    expect(said).toMatch(/BATON_EMBEDDED_LANES/);

    const seeded = await engineWith({ BATON_EMBEDDED_LANES: EXAMPLE });
    cleanups.push(() => seeded.close());
    // What the control plane holds before any release: the recipe's lanes at its baseline
    // weights. Read before the start: once started, the release's first step (exclude lane-a)
    // may already have moved the weights.
    const read = await seeded.controlPlane.lanes?.("summarizer-v7");
    if (!read?.ok) throw new Error("the embedded control plane did not list its lanes");
    const byId = Object.fromEntries(read.lanes.map((l) => [l.id, l.weight]));
    expect(byId).toMatchObject({ "lane-a": 34, "lane-b": 33, "lane-c": 33 });
    const ok = await start(seeded);
    expect(ok.status, await ok.clone().text()).toBe(201);
  });

  it("a file that is missing or not a recipe stops the engine naming the variable; with BATON_CONTROL_PLANE_URL it is refused", async () => {
    await expect(engineWith({ BATON_EMBEDDED_LANES: "/nonexistent/recipe.yaml" })).rejects.toThrow(
      /BATON_EMBEDDED_LANES: cannot read \/nonexistent\/recipe.yaml/,
    );
    expect(() =>
      loadConfig({
        BATON_CALLBACK_SECRETS: "embedded-lanes-secret-0123456789",
        BATON_OPERATOR_TOKEN: TOKEN,
        BATON_EMBEDDED_LANES: EXAMPLE,
        BATON_CONTROL_PLANE_URL: "http://127.0.0.1:9/",
        BATON_CONTROL_PLANE_TOKEN: "cp-token-0123456789abcdef",
      }),
    ).toThrow(/BATON_EMBEDDED_LANES/);
  });
});
