/**
 * Migrations through the engine with simulated runners (docs/recipes.md "Migrations"), both
 * stores, fake clock: the migrate step's checkpoint comes back to a new attempt in the
 * preflight's answer; a migrate result without passing verifications fails the step before any
 * traffic moves; a contract release is refused 409 `contract_not_yet` inside the rollback
 * window of the release that activated the new form (saying when it may run) and while a lane
 * runs an old-form reader, and is admitted and runs its contract step after.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import {
  callbackBody,
  callbackUrl,
  drive,
  type Harness,
  makeHarness,
  op,
  preflightBody,
  preflightUrl,
  recipe,
  STORE_KINDS,
  signedPost,
  skipStore,
} from "./service-harness.ts";

const HOUR = 3_600_000;
const V3 = `ghcr.io/acme/summarizer:v9@sha256:${"9e".repeat(32)}`;
const TOOL = "migrate-table";
const pair = { forward: TOOL, backward: TOOL };

/** The release that expands and migrates (activates the new form). */
function activating(extra: Partial<RecipeInput> = {}): RecipeInput {
  return recipe(2, {
    policy: { rollback_window: "1h" },
    migration: {
      id: "email-norm",
      inputs: { database: "app.db", table: "customers", from: "email", to: "email_norm" },
      expand: pair,
      migrate: { ...pair, retries: 1 },
    },
    ...extra,
  });
}

/** The later release that contracts it. */
function contracting(previousImage: string): RecipeInput {
  return recipe(2, {
    image: V3,
    previous_image: previousImage,
    migration: {
      id: "email-norm",
      inputs: { database: "app.db", table: "customers", from: "email", to: "email_norm" },
      contract: { forward: TOOL },
      old_form_readers: [PREVIOUS_IMAGE],
    },
  });
}

const stepName = (p: DispatchPayload) => (p.args as { step?: { name?: string } }).step?.name;
const migrateForward = (p: DispatchPayload) =>
  stepName(p) === "migrate" &&
  (p.args as { step?: { direction?: string } }).step?.direction === "forward";

const verified = [
  { name: "backfill", kind: "checkpoint", status: "ok", checkpoint: { after_key: 50, rows: 50 } },
  { name: "count", kind: "verification", status: "passed", expected: 50, observed: 50 },
  { name: "integrity", kind: "verification", status: "passed", expected: "ok", observed: "ok" },
  { name: "equivalence", kind: "verification", status: "passed", expected: 0, observed: 0 },
];

let seq = 5000;

/** Plays a runner for `p` with `checks`; returns the preflight's answer. */
async function answer(
  h: Harness,
  p: DispatchPayload,
  overall: "pass" | "fail",
  checks: unknown[],
): Promise<Record<string, unknown>> {
  const run = { run_id: String(seq++), run_attempt: 1 };
  const pre = await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run));
  expect(pre.status).toBe(200);
  const body = (await pre.json()) as Record<string, unknown>;
  const cb = await signedPost(
    h,
    callbackUrl(p.step_run_id),
    callbackBody(p.step_run_id, run, overall, { checks }),
  );
  expect(cb.status).toBe(200);
  return body;
}

/** Drives every release to rest, answering migrate dispatches with `migrate`. */
async function driveWith(
  h: Harness,
  migrate: (p: DispatchPayload) => Promise<void>,
): Promise<void> {
  const pending: DispatchPayload[] = [];
  for (let i = 0; i < 20; i++) {
    await drive(h, (p) => {
      if (!migrateForward(p)) return "pass";
      pending.push(p);
      return "skip";
    });
    const p = pending.shift();
    if (!p) return;
    await migrate(p);
  }
}

async function state(h: Harness, id: string) {
  return (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as {
    state: string;
    succeeded_at: number | null;
    reason: string | null;
    step_runs: { step_index: number; direction: string; last_error: string | null }[];
    manifest: { steps: { name: string }[] };
  };
}

describe.each(STORE_KINDS)("migration on %s", (kind) => {
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it.skipIf(skipStore(kind))(
    "a new attempt of migrate gets the last checkpoint in the preflight's answer; a pass without verifications fails the step before traffic moves",
    async () => {
      h = await makeHarness({ kind });
      const res = await op(
        h,
        "POST",
        "/v1/releases",
        activating({ policy: { rollback_window: "1h", rerun_window_minutes: 0 } }),
      );
      expect(res.status).toBe(201);
      const id = ((await res.json()) as { id: string }).id;
      const answers: Record<string, unknown>[] = [];
      const hh = h;
      await driveWith(h, async (p) => {
        // Attempt 1 dies after two batches; attempt 2 "passes" without any verification.
        answers.push(
          await answer(
            hh,
            p,
            answers.length === 0 ? "fail" : "pass",
            answers.length === 0
              ? [
                  {
                    name: "backfill",
                    kind: "checkpoint",
                    status: "running",
                    checkpoint: { after_key: 20, rows: 20 },
                  },
                ]
              : [{ name: "backfill", kind: "checkpoint", status: "ok" }],
          ),
        );
      });
      expect(answers).toHaveLength(2);
      expect(answers[0]?.checkpoint).toBeUndefined();
      expect(answers[1]?.checkpoint).toEqual({ after_key: 20, rows: 20 });
      const r = await state(h, id);
      expect(r.state).toBe("rolled_back");
      const m = r.manifest.steps.findIndex((s) => s.name === "migrate");
      const fwd = r.step_runs.find((s) => s.step_index === m && s.direction === "fwd");
      expect(fwd?.last_error).toContain("the migrate step reported no verification");
      // Nothing after the migration ran: no traffic step took effect.
      const traffic = r.manifest.steps.findIndex((s) => s.name === "set_traffic");
      expect(r.step_runs.some((s) => s.step_index >= traffic && s.direction === "fwd")).toBe(false);
    },
    120_000,
  );

  it.skipIf(skipStore(kind))(
    "contract is refused inside the activating release's rollback window and while a lane runs an old-form reader, and runs after",
    async () => {
      h = await makeHarness({ kind });
      const res = await op(h, "POST", "/v1/releases", activating());
      const id = ((await res.json()) as { id: string }).id;
      const hh = h;
      await driveWith(h, async (p) => {
        await answer(hh, p, "pass", verified);
      });
      const act = await state(h, id);
      expect(act.state).toBe("succeeded");
      const closes = (act.succeeded_at as number) + HOUR;

      const count = async () => (await hh.store.listReleases({ limit: 50 })).length;
      const before = await count();
      h.clock.t = closes - 60_000;
      const early = await op(h, "POST", "/v1/releases", contracting(IMAGE));
      expect(early.status).toBe(409);
      const e = ((await early.json()) as { error: { code: string; message: string } }).error;
      expect(e.code).toBe("contract_not_yet");
      expect(e.message).toContain(
        `the contract of migration email-norm may not run yet: the rollback window of ${id}, which activated the new form, is open until ${new Date(closes).toISOString()}`,
      );
      expect(e.message).toContain(`it may run from ${new Date(closes).toISOString()}`);
      expect(await count()).toBe(before);

      // After the window, lanes that run an old-form reader still hold it back.
      h.clock.t = closes;
      const readers = await op(h, "POST", "/v1/releases", contracting(PREVIOUS_IMAGE));
      expect(readers.status).toBe(409);
      const why = ((await readers.json()) as { error: { message: string } }).error.message;
      expect(why).toMatch(/lanes still run an image that reads the old form \(lane-\w+: /);
      expect(await count()).toBe(before);

      const ok = await op(h, "POST", "/v1/releases", contracting(IMAGE));
      expect(ok.status, await ok.clone().text()).toBe(201);
      const cid = ((await ok.json()) as { id: string }).id;
      const contractRuns: DispatchPayload[] = [];
      await drive(h, (p) => {
        if (stepName(p) === "contract") contractRuns.push(p);
        return "pass";
      });
      expect((await state(h, cid)).state).toBe("succeeded");
      expect(contractRuns).toHaveLength(1);
      expect(contractRuns[0]?.tool).toBe(TOOL);
    },
    120_000,
  );
});
