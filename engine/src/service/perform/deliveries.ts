/**
 * Performs the rows whose outcome feeds no transition: notices (`notify`, through the
 * Notifier of their channel) and GitHub deployment statuses (`deployment`). Delivered or given
 * up, the row is completed on its own and one history line says so; a retryable failure gives
 * the claim back with backoff until the retry schedule's tries are spent.
 */
import type { DeploymentEffect, Json, NotifyEffect } from "../../domain/types.ts";
import { faultPoint } from "../../faults.ts";
import type { DeploymentTracker } from "../../ports/deployments.ts";
import type { Notifier } from "../../ports/notifier.ts";
import type { OutboxRow } from "../../ports/store.ts";
import { notifyBackoffMs } from "../backoff.ts";
import type { PerformContext } from "./context.ts";

/**
 * Sends one notice. Its outcome feeds no transition: delivered or given up, the row is
 * completed on its own and one history line says so; a retryable failure gives the claim
 * back with backoff until `maxTries` claims were spent.
 */
export async function performNotify(
  ctx: PerformContext,
  row: OutboxRow,
  e: NotifyEffect,
  token: string,
): Promise<boolean> {
  const { store, clock, log } = ctx.deps;
  const retry = ctx.deps.notifyRetry ?? { baseMs: 5_000, maxTries: 8 };
  const notifier = ctx.deps.notifiers?.get(e.channel);
  const note = async (outcome: "accepted" | "refused", message: string, data: Json) => {
    await store
      .appendHistory([
        {
          release_id: row.release_id,
          at: clock.now(),
          kind: "notice",
          step_run_id: null,
          outcome,
          message,
          data: {
            channel: e.channel,
            delivery: e.delivery,
            notice: e.notice.kind,
            ...(data as object),
          },
        },
      ])
      .catch((err) => log.error(`[notifier] could not record delivery ${e.delivery}`, err));
  };
  if (!notifier) {
    log.warn(`[notifier] no ${e.channel} channel is configured now; notice ${e.delivery} dropped`);
    await store.completeOutbox(row.id, token);
    await note(
      "refused",
      `[notifier] ${e.notice.kind} notice not sent: no ${e.channel} channel is configured`,
      {},
    );
    return true;
  }
  ctx.assertLeaseHeld(row);
  faultPoint("after_commit_before_effect", { release_id: row.release_id, effect: "notify" });
  let r: Awaited<ReturnType<Notifier["send"]>>;
  try {
    r = await notifier.send(e.notice, e.delivery);
  } catch (err) {
    r = {
      ok: false,
      retryable: true,
      status: null,
      message: `notifier threw: ${(err as Error).message}`,
    };
  }
  faultPoint("after_effect_before_outcome", { release_id: row.release_id, effect: "notify" });
  const tries = row.claims;
  if (r.ok) {
    if (await store.completeOutbox(row.id, token)) {
      await note(
        "accepted",
        `[notifier] ${e.notice.kind} notice sent to ${e.channel}${r.status ? ` (HTTP ${r.status})` : ""}${tries > 1 ? ` on try ${tries}` : ""}`,
        { tries, status: r.status },
      );
    }
    return true;
  }
  if (r.retryable && tries < retry.maxTries) {
    const delay = notifyBackoffMs(tries, retry.baseMs);
    log.warn(
      `[notifier] ${e.channel} ${e.delivery} try ${tries} of ${retry.maxTries} failed (${r.message}); next try in ${delay} ms`,
    );
    await store.releaseClaim(row.id, token, clock.now() + delay);
    return false;
  }
  log.error(`[notifier] ${e.channel} ${e.delivery} given up after ${tries} tries: ${r.message}`);
  if (await store.completeOutbox(row.id, token)) {
    await note(
      "refused",
      `[notifier] ${e.notice.kind} notice to ${e.channel} given up after ${tries} ${tries === 1 ? "try" : "tries"}: ${r.message}`,
      { tries, status: r.status },
    );
  }
  return true;
}

/**
 * Posts one GitHub deployment status. Like a notice, its outcome feeds no transition: done or
 * given up, the row is completed on its own and one history line (`deployment`) says so; a
 * retryable failure gives the claim back with backoff until `maxTries` claims were spent.
 */
export async function performDeployment(
  ctx: PerformContext,
  row: OutboxRow,
  e: DeploymentEffect,
  token: string,
): Promise<boolean> {
  const deps = ctx.deps;
  const { store, clock, log } = deps;
  const retry = deps.deploymentsRetry ?? { baseMs: 5_000, maxTries: 8 };
  const what = `${e.report.state} deployment status of ${e.report.release_id} (environment ${e.report.environment})`;
  const note = async (outcome: "accepted" | "refused", message: string, data: object) => {
    await store
      .appendHistory([
        {
          release_id: row.release_id,
          at: clock.now(),
          kind: "deployment",
          step_run_id: null,
          outcome,
          message,
          data: {
            delivery: e.delivery,
            state: e.report.state,
            environment: e.report.environment,
            ...data,
          } as Json,
        },
      ])
      .catch((err) => log.error(`[github] could not record deployment status ${e.delivery}`, err));
  };
  const tracker = deps.deployments;
  if (!tracker) {
    log.warn(`[github] deployments are not configured now; ${what} dropped`);
    await store.completeOutbox(row.id, token);
    await note("refused", `[github] ${what} not sent: GitHub deployments are not configured`, {});
    return true;
  }
  ctx.assertLeaseHeld(row);
  faultPoint("after_commit_before_effect", { release_id: row.release_id, effect: "deployment" });
  let r: Awaited<ReturnType<DeploymentTracker["report"]>>;
  try {
    r = await tracker.report(e.report);
  } catch (err) {
    r = {
      ok: false,
      retryable: true,
      status: null,
      message: `deployments threw: ${(err as Error).message}`,
    };
  }
  faultPoint("after_effect_before_outcome", { release_id: row.release_id, effect: "deployment" });
  const tries = row.claims;
  if (r.ok) {
    if (await store.completeOutbox(row.id, token)) {
      await note(
        "accepted",
        `[github] ${what} posted${r.status ? ` (HTTP ${r.status})` : " (already shown)"}${tries > 1 ? ` on try ${tries}` : ""}`,
        { tries, status: r.status },
      );
    }
    return true;
  }
  if (r.retryable && tries < retry.maxTries) {
    const delay = notifyBackoffMs(tries, retry.baseMs);
    log.warn(
      `[github] ${what}: try ${tries} of ${retry.maxTries} failed (${r.message}); next try in ${delay} ms`,
    );
    await store.releaseClaim(row.id, token, clock.now() + delay);
    return false;
  }
  log.error(`[github] ${what} given up after ${tries} tries: ${r.message}`);
  if (await store.completeOutbox(row.id, token)) {
    await note(
      "refused",
      `[github] ${what} given up after ${tries} ${tries === 1 ? "try" : "tries"}: ${r.message}`,
      { tries, status: r.status },
    );
  }
  return true;
}
