/**
 * The transition is a pure function of its inputs (docs/state-machine.md; xstate test/transition.test.ts):
 * it never mutates its input, never calls anything (no clock, randomness, network, timers),
 * and the same inputs give the same outputs.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { transition } from "../../engine/src/domain/transition.ts";
import type { Release, ReleaseEvent } from "../../engine/src/domain/types.ts";
import { waveSpecs } from "../support/manifest-fixture.ts";
import {
  advanceTo,
  callbackOf,
  deepFreeze,
  ok,
  preflightOf,
  release,
  T0,
} from "../support/sim/drive.ts";

/** A script of events that exercises forward, failure, compensation and operator paths. */
function script(): { r: Release; events: ReleaseEvent[] } {
  const r = advanceTo(release(waveSpecs(10)), 1);
  const bound = ok(
    ok(r, { type: "dispatch_accepted", step_run_id: "sr_17_1_f", dispatch: 1 }).release,
    preflightOf(r, "sr_17_1_f"),
  ).release;
  return {
    r: bound,
    events: [
      callbackOf("sr_17_1_f", "pass"),
      callbackOf("sr_17_1_f", "pass"),
      { type: "deadline", step_run_id: "sr_17_2_f", kind: "start", dispatch: 1, attempt: 0 },
      { type: "abort", actor: "ops", reason: "test" },
      { type: "applied", step_run_id: "sr_17_1_b", outcome: "ok", message: "" },
    ],
  };
}

describe("transition is pure", () => {
  afterEach(() => vi.restoreAllMocks());

  it("never mutates a deep-frozen input release or event (throws if it tried)", () => {
    const { r, events } = script();
    let cur: Release = deepFreeze(structuredClone(r));
    for (const e of events) {
      const frozenEvent = deepFreeze(structuredClone(e));
      const snapshot = JSON.stringify(cur);
      const res = transition(cur, frozenEvent, T0 + 1);
      expect(JSON.stringify(cur)).toBe(snapshot);
      if (res.ok && res.changed) {
        expect(res.release).not.toBe(cur);
        cur = deepFreeze(res.release);
      }
    }
  });

  it("calls no clock, randomness, timer or network", () => {
    const spies = [
      vi.spyOn(Date, "now"),
      vi.spyOn(Math, "random"),
      vi.spyOn(globalThis, "setTimeout"),
      vi.spyOn(globalThis, "fetch"),
      vi.spyOn(performance, "now"),
    ];
    const { r, events } = script();
    for (const s of spies) s.mockClear();
    let cur = r;
    for (const e of events) {
      const res = transition(cur, e, T0 + 1);
      if (res.ok) cur = res.release;
    }
    for (const s of spies) expect(s).not.toHaveBeenCalled();
  });

  it("is deterministic: the same inputs give deeply equal outputs", () => {
    const { r, events } = script();
    const runOnce = () => {
      let cur = r;
      const out: unknown[] = [];
      for (const e of events) {
        const res = transition(cur, e, T0 + 42);
        out.push(res);
        if (res.ok) cur = res.release;
      }
      return out;
    };
    expect(runOnce()).toEqual(runOnce());
  });

  it("imports nothing but zod, the domain and the protocol's constants", () => {
    const root = join(import.meta.dirname, "../../engine/src/domain");
    const files = [
      "transition.ts",
      ...readdirSync(join(root, "transition")).map((f) => `transition/${f}`),
    ];
    for (const f of files) {
      const src = readFileSync(join(root, f), "utf8");
      const specs = [...src.matchAll(/from\s+"([^"]+)"/g)].map((m) => m[1]!);
      for (const s of specs) {
        const allowed =
          s === "zod" ||
          /^\.\.?\/(?!.*(adapters|ports|service|http))/.test(s) ||
          s === "../../protocol/messages.ts";
        expect(allowed, `${f} imports ${s}`).toBe(true);
      }
    }
  });
});
