/** `baton start` when a release in flight owns the recipe's lanes: the engine's 409 message, exit 1. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { stringify } from "yaml";
import { recipe } from "../integration/service-harness.ts";
import { type LiveEngine, OPERATOR, startLiveEngine } from "./live-engine.ts";
import { baton } from "./run-baton.ts";

let live: LiveEngine;
let dir: string;
beforeAll(async () => {
  live = await startLiveEngine(); // leaves a paused release on recipe(2)'s lanes
  dir = mkdtempSync(path.join(tmpdir(), "baton-cli-conflict-"));
});
afterAll(async () => {
  await live?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it("prints the engine's conflict message and exits 1", async () => {
  const file = path.join(dir, "recipe.yaml");
  writeFileSync(file, stringify(recipe(2)));
  const r = await baton(["start", file], { BATON_ENGINE_URL: live.url, BATON_TOKEN: OPERATOR });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(
    `[engine] release ${live.ids.paused} (model summarizer-v7, state paused) still owns lanes`,
  );
  expect(r.stderr).toContain("wait for it to finish or abort it, then start again");
  expect(r.stderr).not.toMatch(/\n\s+at .+:\d+:\d+/);
});
