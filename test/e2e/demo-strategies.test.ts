/**
 * `npm run demo -- --recipe recipes/<strategy>.yaml --record FILE` for the rolling and the
 * blue-green examples, one child process each (real parts, SQLite in a temp dir): exit 0,
 * `succeeded`, the record names the strategy and is valid against the published schema, and
 * the control plane ends as the strategy says (rolling: every lane at its baseline weight;
 * blue-green: green carries everything, blue stays on the previous image at 0%).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { demoToEnd } from "../support/demo-process.ts";
import { recordSchemaErrors } from "../support/record-schema.ts";

/** Runs the demo through the npm script's command; resolves with exit code and output. */
const demo = (args: string[]) => demoToEnd(args, 280_000);

/** Runs one recipe through the demo with --record; the record and the demo's output. */
async function run(recipe: string) {
  const dir = mkdtempSync(join(tmpdir(), "baton-demo-strategy-"));
  const file = join(dir, "record.json");
  try {
    const { code, out } = await demo(["--recipe", recipe, "--record", file]);
    expect(code, out).toBe(0);
    const rec = JSON.parse(readFileSync(file, "utf8")) as {
      release: { state: string };
      intended: { strategy: string; rollout_policy: { waves: { traffic: number }[] } };
    };
    expect(recordSchemaErrors(rec)).toBeNull();
    return { rec, out };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The weights the demo printed last (`control plane  weights now lane-a 25%, …`). */
function finalWeights(out: string): Record<string, number> {
  const line = out.match(/control plane\s+weights now (.*)$/m)?.[1] ?? "";
  return Object.fromEntries(
    [...line.matchAll(/(\S+) (\d+)%/g)].map((m) => [m[1] as string, Number(m[2])]),
  );
}

describe("npm run demo with a strategy recipe", () => {
  it.concurrent("recipes/rolling.yaml ends succeeded; the record names strategy rolling", async () => {
    const { rec, out } = await run("recipes/rolling.yaml");
    expect(rec.release.state).toBe("succeeded");
    expect(rec.intended.strategy).toBe("rolling");
    // Batch 1 is half the capacity: 50%, then 100%; no canary percent.
    expect(rec.intended.rollout_policy.waves.map((w) => w.traffic)).toEqual([50, 100]);
    expect(out).toMatch(/ended succeeded/);
    expect(finalWeights(out)).toEqual({ "lane-a": 25, "lane-b": 25, "lane-c": 25, "lane-d": 25 });
  });

  it.concurrent("recipes/blue-green.yaml ends succeeded; the record names strategy blue_green", async () => {
    const { rec, out } = await run("recipes/blue-green.yaml");
    expect(rec.release.state).toBe("succeeded");
    expect(rec.intended.strategy).toBe("blue_green");
    expect(rec.intended.rollout_policy.waves.map((w) => w.traffic)).toEqual([100]);
    // Switched: green carries every request, blue is warm at 0%.
    expect(finalWeights(out)).toEqual({ "lane-a": 0, "lane-b": 0, "lane-c": 50, "lane-d": 50 });
  });
});
