/**
 * AWS Lambda entry. API Gateway HTTP API (payload format 2.0), REST API or a function URL
 * invoke it with a request (served by the core's app through `hono/aws-lambda`); an EventBridge
 * schedule rule invokes it with a "Scheduled Event", which runs `tick()` (deadlines, due
 * effects, retention, and drift observation when its interval is due, bounded by the
 * invocation's remaining time less `RESERVE_MS`). Lambda freezes the environment once the
 * handler returns, so effects a request commits are performed before it returns, and the
 * event's pool is closed then too.
 * Settings from the function's environment (docs/deploying.md, "AWS Lambda").
 */

import { handle, type LambdaContext, type LambdaEvent } from "hono/aws-lambda";
import { apiRoutes } from "../http/api-routes.ts";
import { dashboardApp } from "../http/dashboard/index.tsx";
import { openEvent, openOrAnswer, type Surface, serverlessSettings } from "./serverless.ts";

/** What the function serves: the API and the dashboard (a Lambda has no 1 MB script limit). */
const LAMBDA: Surface = { api: apiRoutes, dashboard: dashboardApp };

/** An EventBridge schedule's event (`source: aws.events`, `detail-type: Scheduled Event`). */
export interface ScheduledEvent {
  source: "aws.events";
  "detail-type": "Scheduled Event";
  time?: string;
  resources?: string[];
}

/** True for an EventBridge schedule's event (rule or Scheduler with the rule's shape). */
export function isScheduledEvent(e: unknown): e is ScheduledEvent {
  const x = e as Partial<ScheduledEvent> | null;
  return x?.source === "aws.events" && x["detail-type"] === "Scheduled Event";
}

/** Of a scheduled invocation's remaining time, what is kept for closing the event (ms). */
export const RESERVE_MS = 2_000;

/** Without a Lambda context (a direct call): the budget of a scheduled event's drift (ms). */
const DEFAULT_BUDGET_MS = 30_000;

/** The function's handler (`index.handler` in the bundle scripts/build-lambda.mjs makes). */
export async function handler(event: LambdaEvent | ScheduledEvent, context?: LambdaContext) {
  if (isScheduledEvent(event)) {
    // Bad settings or a database down fail the invocation: the rule's metrics and logs see it.
    const left = context?.getRemainingTimeInMillis?.() ?? DEFAULT_BUDGET_MS;
    const scope = await openEvent(serverlessSettings(process.env), LAMBDA, {
      deadline: Date.now() + left - RESERVE_MS,
    });
    try {
      return await scope.core.tick();
    } finally {
      await scope.finish();
    }
  }
  const scope = await openOrAnswer(process.env, LAMBDA);
  if (scope instanceof Response) {
    const headers: Record<string, string> = {};
    scope.headers.forEach((v, k) => {
      headers[k] = v;
    });
    return {
      statusCode: scope.status,
      headers,
      body: await scope.text(),
      isBase64Encoded: false,
    };
  }
  try {
    return await handle(scope.core.app)(event, context);
  } finally {
    await scope.finish();
  }
}
