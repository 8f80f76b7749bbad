/**
 * Describe blocks run once per store for the service-level tests (test/integration), with the
 * harness (or gate rig) a test opens closed after it. Kept apart from service-harness.ts, which
 * benchmarks import outside vitest.
 */
import { afterEach, describe, expect } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { type Rig, rig } from "../support/gate-rig.ts";
import {
  createRelease,
  firstDispatch,
  type Harness,
  makeHarness,
  preflightBody,
  preflightUrl,
  type RunIdentity,
  recipe,
  STORE_KINDS,
  type StoreKind,
  signedPost,
  skipStore,
} from "./service-harness.ts";

/** `makeHarness` options but the store, which the suite gives. */
export type HarnessOptions = Omit<NonNullable<Parameters<typeof makeHarness>[0]>, "kind">;

/**
 * One describe block per store (`title`: `%s` is the store). `fn` gets the store, `skip` (true
 * for Postgres without BATON_TEST_DATABASE_URL, as `skipStore` says) and `open(options)`, a
 * harness on that store (`makeHarness`) that is closed after the test.
 */
export function describeEachStore(
  title: string,
  fn: (t: {
    kind: StoreKind;
    skip: boolean;
    open: (o?: HarnessOptions) => Promise<Harness>;
  }) => void,
): void {
  describe.each(STORE_KINDS)(title, (kind) => {
    const skip = skipStore(kind);
    let h: Harness | null = null;
    afterEach(async () => {
      await h?.close();
      h = null;
    });
    fn({
      kind,
      skip,
      open: async (o = {}) => {
        h = await makeHarness({ ...o, kind });
        return h;
      },
    });
  });
}

/**
 * One describe block per store (`title`: `%s` is the store) for tests on a gate rig: `fn` gets
 * `skip` (as in `describeEachStore`) and `open(candidateErrorRate?)`, a rig on that store
 * (`rig`) whose router stops and whose harness closes after the test.
 */
export function describeEachRig(
  title: string,
  fn: (t: {
    kind: StoreKind;
    skip: boolean;
    open: (candidateErrorRate?: number) => Promise<Rig>;
  }) => void,
): void {
  describe.each(STORE_KINDS)(title, (kind) => {
    const skip = skipStore(kind);
    let g: Rig | null = null;
    afterEach(async () => {
      g?.traffic.stop();
      await g?.h.close();
      g = null;
    });
    fn({
      kind,
      skip,
      open: async (rate) => {
        g = await rig(kind, rate);
        return g;
      },
    });
  });
}

/** Starts a release of `recipe(2)` on `h`; returns its id and the first dispatch. */
export async function startedRelease(h: Harness): Promise<{ id: string; p: DispatchPayload }> {
  const id = await createRelease(h, recipe(2));
  const p = await firstDispatch(h);
  return { id, p };
}

/** The runner's preflight of dispatch `p` as run `run`, which must be answered 200. */
export async function preflightOk(h: Harness, p: DispatchPayload, run: RunIdentity): Promise<void> {
  const res = await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run));
  expect(res.status, await res.clone().text()).toBe(200);
}
