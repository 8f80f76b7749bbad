/**
 * A property test with a random seed must say how to replay its failure: the seed, the path and
 * the command, before fast-check's report; the printed path replays only the failing case.
 */
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { assertReplayable, firstCaseIndex, replayParams } from "../support/property-replay.ts";

const WHERE = { file: "test/property/x.property.test.ts", name: "odd numbers" };

/** Fails on every generated number from 50 up; records the numbers it saw. */
function property(seen: number[]) {
  return fc.asyncProperty(fc.integer({ min: 0, max: 100 }), async (n) => {
    seen.push(n);
    if (n >= 50) throw new Error(`${n} is too big`);
  });
}

describe("replayable property failures", () => {
  afterEach(() => {
    delete process.env.BATON_PROPERTY_SEED;
    delete process.env.BATON_PROPERTY_PATH;
  });

  it("a failure names its seed, its path and the command that replays it", async () => {
    const seen: number[] = [];
    const err = await assertReplayable(
      property(seen),
      { numRuns: 50, endOnFailure: true },
      WHERE,
    ).then(
      () => null,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    const m =
      /^Property failed with seed (-?\d+), path "(\d+)"\. Replay this case with:\n {2}(.*)\n/.exec(
        err?.message ?? "",
      );
    expect(m, err?.message).not.toBeNull();
    const [, seed, path, command] = m as RegExpExecArray;
    expect(command).toBe(
      `BATON_PROPERTY_SEED=${seed} BATON_PROPERTY_PATH=${path} npx vitest run ${WHERE.file} -t 'odd numbers'`,
    );
    // fast-check's own report follows: the counterexample and the property's error.
    expect(err?.message).toContain("Counterexample: [");
    expect(err?.message).toContain("is too big");
    const failing = seen.at(-1);
    expect(Number(path)).toBe(seen.length - 1);

    // The printed seed and path run only the failing case, with the same value.
    process.env.BATON_PROPERTY_SEED = seed;
    process.env.BATON_PROPERTY_PATH = path;
    expect(replayParams()).toEqual({ seed: Number(seed), path });
    expect(firstCaseIndex(replayParams())).toBe(Number(path));
    const again: number[] = [];
    await expect(
      assertReplayable(property(again), { numRuns: 50, endOnFailure: true }, WHERE),
    ).rejects.toThrow(`seed ${seed}, path "${path}"`);
    expect(again).toEqual([failing]);
  });

  it("a seed that is not an integer is refused naming the variable", () => {
    process.env.BATON_PROPERTY_SEED = "abc";
    expect(() => replayParams()).toThrow("BATON_PROPERTY_SEED=abc: give the integer seed");
  });
});
