/**
 * A real engine (createEngine on a SQLite file, the service harness's in-memory dispatcher and
 * control plane, a fake clock) served over HTTP on 127.0.0.1, with real releases made through
 * the signed runner protocol: one compensated after a failing smoke check, one with a refused
 * late callback, one paused on a lost dispatch, one held pending. Used by the CLI and browser
 * tests.
 */

import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  drive,
  type Harness,
  makeHarness,
  OPERATOR,
  op,
  preflightBody,
  preflightUrl,
  pumpOnce,
  recipe,
  signedPost,
  VIEWER,
} from "../integration/service-harness.ts";

export { OPERATOR, VIEWER };

export interface LiveEngine {
  h: Harness;
  url: string;
  ids: { compensated: string; late: string; paused: string };
  close(): Promise<void>;
}

const HOUR = 3_600_000;
/** Each reconciler round takes 3 s of fake time, so durations on the pages are not all 0. */
const pace = (h: Harness) => () => h.clock.advance(3_000);

async function state(h: Harness, id: string): Promise<string> {
  const res = await op(h, "GET", `/v1/releases/${id}`);
  return ((await res.json()) as { state: string }).state;
}

function expectState(actual: string, want: string, what: string) {
  if (actual !== want) throw new Error(`[test] ${what}: expected ${want}, got ${actual}`);
}

/**
 * Release whose first smoke check fails: compensated back to `rolled_back`. `extra` overrides
 * recipe fields (e.g. `model`, for a release no other release of the engine replaces).
 */
export async function compensatedRelease(
  h: Harness,
  extra: Partial<RecipeInput> = {},
): Promise<string> {
  // No re-run window: the failed smoke check compensates at once.
  const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 }, ...extra }));
  await drive(
    h,
    (p) => (p.release.id === id && p.tool === "run-smoke" ? "fail" : "pass"),
    400,
    pace(h),
  );
  expectState(await state(h, id), "rolled_back", "compensated release");
  return id;
}

/**
 * Release whose first runner step passes preflight but never calls back: the callback deadline
 * makes it `unknown` (paused), the operator aborts, compensation completes, and then the
 * runner's callback finally arrives: refused as late.
 */
export async function lateCallbackRelease(h: Harness): Promise<string> {
  const id = await createRelease(h, recipe(2));
  let stuck: DispatchPayload | undefined;
  await drive(
    h,
    (p) => {
      if (p.release.id === id && !stuck && p.tool === "attach-queue-lane") {
        stuck = p;
        return "skip";
      }
      return "pass";
    },
    400,
    pace(h),
  );
  if (!stuck) throw new Error("[test] no attach-queue-lane dispatch");
  const run = { run_id: "424242", run_attempt: 1 };
  const pre = await signedPost(h, preflightUrl(stuck.step_run_id), preflightBody(stuck, run));
  if (pre.status !== 200) throw new Error(`[test] preflight answered ${pre.status}`);
  h.clock.advance(2 * HOUR);
  await drive(h, undefined, 400, pace(h));
  expectState(await state(h, id), "paused", "late-callback release after the deadline");
  const abort = await op(h, "POST", `/v1/releases/${id}/abort`, { reason: "runner went silent" });
  if (abort.status !== 200) {
    throw new Error(`[test] abort answered ${abort.status}: ${await abort.text()}`);
  }
  await drive(h, undefined, 400, pace(h));
  expectState(await state(h, id), "rolled_back", "late-callback release after abort");
  const late = await signedPost(
    h,
    callbackUrl(stuck.step_run_id),
    callbackBody(stuck.step_run_id, run, "pass"),
  );
  if (late.status !== 409) throw new Error(`[test] late callback answered ${late.status}`);
  return id;
}

/** Release paused on a lost dispatch (no preflight before the start deadline): retryable. */
export async function pausedRelease(h: Harness): Promise<string> {
  const id = await createRelease(h, recipe(2));
  let lost = false;
  await drive(h, (p) => {
    if (p.release.id === id && !lost && p.tool === "attach-queue-lane") {
      lost = true;
      return "skip";
    }
    return "pass";
  });
  h.clock.advance(2 * HOUR);
  await drive(h);
  expectState(await state(h, id), "paused", "paused release");
  return id;
}

/** Starts the engine, makes the releases, serves the app on an ephemeral loopback port. */
export async function startLiveEngine(): Promise<LiveEngine> {
  const h = await makeHarness({ kind: "sqlite" });
  const compensated = await compensatedRelease(h);
  const late = await lateCallbackRelease(h);
  const paused = await pausedRelease(h);
  const server = serve({ fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    h,
    url: `http://127.0.0.1:${port}`,
    ids: { compensated, late, paused },
    async close() {
      await new Promise<void>((resolve) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      });
      await h.close();
    },
  };
}

/** One reconciler pass plus a passing runner for new dispatches (drives live releases). */
export { pumpOnce };
