import { describe, expect, it } from "vitest";
import {
  behaviour,
  behaviourWords,
  probCompleted,
  stationary,
} from "../../engine/src/domain/markov.ts";

describe("two-state retry chain (exact values)", () => {
  it("p = 0.5, q = 0 gives 0.5 after one step", () => {
    expect(probCompleted(0.5, 0, 1)).toBe(0.5);
  });

  it("p = 0.25, q = 0 gives 0.25 after one step and 1 - 0.75^3 = 0.578125 after three", () => {
    expect(probCompleted(0.25, 0, 1)).toBe(0.25);
    expect(probCompleted(0.25, 0, 3)).toBe(0.578125);
    expect(probCompleted(0.25, 0, 3)).toBe(1 - 0.75 ** 3);
  });

  it("p = q = 1 alternates 1, 0, 1", () => {
    expect([1, 2, 3].map((t) => probCompleted(1, 1, t))).toEqual([1, 0, 1]);
  });

  it("starts with all probability in state 0", () => {
    for (const [p, q] of [
      [0.3, 0.2],
      [1, 1],
      [0, 0],
      [0.9, 0.8],
    ] as const) {
      expect(probCompleted(p, q, 0)).toBe(0);
    }
  });

  it("p = q = 0 stays at 0 and has no single stationary probability", () => {
    expect(probCompleted(0, 0, 5)).toBe(0);
    expect(stationary(0, 0)).toBeNull();
  });

  it("stationary probability is p / (p + q)", () => {
    expect(stationary(0.3, 0.1)).toBeCloseTo(0.75, 12);
    expect(stationary(0.5, 0)).toBe(1);
    expect(probCompleted(0.3, 0.1, 200)).toBeCloseTo(0.75, 12);
  });

  it("matches the one-step recurrence P(t+1) = P(t)(1-q) + (1-P(t))p", () => {
    for (const [p, q] of [
      [0.3, 0.6],
      [0.9, 0.7],
      [0.2, 0.1],
    ] as const) {
      let prev = 0;
      for (let t = 1; t <= 12; t++) {
        const next = prev * (1 - q) + (1 - prev) * p;
        expect(probCompleted(p, q, t)).toBeCloseTo(next, 12);
        prev = next;
      }
    }
  });

  it("names the behaviour", () => {
    expect(behaviour(0, 0)).toBe("frozen");
    expect(behaviourWords(0, 0)).toMatch(/every distribution is stationary/i);
    expect(behaviour(1, 1)).toBe("alternating");
    expect(behaviourWords(1, 1)).toMatch(/alternating forever/i);
    expect(behaviour(0.25, 0)).toBe("absorbing");
    expect(behaviourWords(0.25, 0)).toMatch(/absorbing/i);
    expect(behaviour(0.2, 0.3)).toBe("monotone");
    expect(behaviourWords(0.2, 0.3)).toMatch(/monotone convergence/i);
    expect(behaviour(0.8, 0.7)).toBe("oscillating");
    expect(behaviourWords(0.8, 0.7)).toMatch(/oscillating convergence/i);
    expect(behaviour(0.4, 0.6)).toBe("one_step");
    expect(behaviour(0, 0.4)).toBe("absorbing_in_0");
  });

  it("oscillating convergence really oscillates around the stationary value", () => {
    const s = stationary(0.8, 0.7)!;
    const above = [1, 2, 3, 4].map((t) => probCompleted(0.8, 0.7, t) > s);
    expect(above).toEqual([true, false, true, false]);
  });

  it("refuses bad input with a message naming the parameter", () => {
    expect(() => probCompleted(1.5, 0, 1)).toThrow(/\[markov\] p must be a probability/);
    expect(() => probCompleted(0.5, -0.1, 1)).toThrow(/\[markov\] q must be/);
    expect(() => probCompleted(0.5, 0, -1)).toThrow(/\[markov\] t must be/);
    expect(() => probCompleted(0.5, 0, 1.5)).toThrow(/\[markov\] t must be/);
    expect(() => stationary(Number.NaN, 0)).toThrow(/p must be/);
  });
});
