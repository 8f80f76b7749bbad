/**
 * The part of vitest's API the store contract uses (describe, it, beforeEach, afterEach,
 * expect), for running it inside workerd, where vitest itself does not run. `expect` is vitest's
 * own (`@vitest/expect` on chai), so the assertions are the same; tests are collected into a
 * list the contract worker (contract-worker.ts) runs one per request.
 */
import { JestAsymmetricMatchers, JestChaiExpect, JestExtend } from "@vitest/expect";
import * as chai from "chai";

chai.use(JestExtend);
chai.use(JestChaiExpect);
chai.use(JestAsymmetricMatchers);

type Fn = () => unknown;
interface Scope {
  name: string;
  before: Fn[];
  after: Fn[];
  parent: Scope | null;
}

/** One collected test: its full name and how to run it (hooks included). */
export interface Collected {
  name: string;
  run(): Promise<void>;
}

export const collected: Collected[] = [];
let scope: Scope = { name: "", before: [], after: [], parent: null };

function chain(s: Scope): Scope[] {
  const out: Scope[] = [];
  for (let x: Scope | null = s; x; x = x.parent) out.unshift(x);
  return out;
}

export function describe(name: string, body: () => void): void {
  const outer = scope;
  scope = { name, before: [], after: [], parent: outer };
  try {
    body();
  } finally {
    scope = outer;
  }
}

export function it(name: string, fn: Fn): void {
  const scopes = chain(scope);
  collected.push({
    name: [...scopes.map((s) => s.name).filter(Boolean), name].join(" > "),
    async run() {
      for (const s of scopes) for (const b of s.before) await b();
      try {
        await fn();
      } finally {
        for (const s of [...scopes].reverse()) for (const a of s.after) await a();
      }
    },
  });
}

export function beforeEach(fn: Fn): void {
  scope.before.push(fn);
}

export function afterEach(fn: Fn): void {
  scope.after.push(fn);
}

export const expect = ((value: unknown, message?: string) =>
  chai.expect(value, message)) as unknown as typeof import("vitest").expect;
