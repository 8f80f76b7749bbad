/**
 * Phase 7 (and the post step's fallback): read the four result files, POST the signed callback,
 * write the job summary and the outputs. Used by main and post alike.
 */
import * as core from "@actions/core";
import {
  CALLBACK_BODY_MAX_BYTES,
  CALLBACK_LOG_MAX_BYTES,
  type CallbackBody,
  LOG_TRUNCATED_MARKER,
} from "../../../engine/src/protocol/messages.ts";
import { type Results, readResults } from "../../../scripts/lib/result.ts";
import { annotate } from "./annotate.ts";
import { errorMessage, postSigned, type RunnerCredential, retryPolicy } from "./engine-client.ts";
import type { CallbackTarget } from "./state.ts";

/** Cuts `log` to its last `maxBytes` UTF-8 bytes (on a character boundary), marker first. */
export function logTail(
  log: string,
  maxBytes = CALLBACK_LOG_MAX_BYTES,
): { log: string; truncated: boolean } {
  const bytes = Buffer.from(log, "utf8");
  if (bytes.length <= maxBytes) return { log, truncated: false };
  const marker = Buffer.byteLength(LOG_TRUNCATED_MARKER);
  let start = bytes.length - (maxBytes - marker);
  // Skip UTF-8 continuation bytes so the tail starts on a whole character.
  while (start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start++;
  return { log: LOG_TRUNCATED_MARKER + bytes.subarray(start).toString("utf8"), truncated: true };
}

/** Replaces every secret occurrence in `text` with `***` (defence in depth; tools should never print them). */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join("***");
  return out;
}

/** Builds the callback body text from the result files (checks verbatim; null when not JSON). */
export function callbackText(
  target: CallbackTarget,
  results: Results,
  timings: Record<string, number>,
  secrets: readonly string[],
): string {
  const note = results.checksValid
    ? ""
    : "[action] checks.json is not valid JSON; checks sent as null\n";
  const tail = logTail(redact(results.log, secrets) + note);
  const body: CallbackBody & Record<string, unknown> = {
    step_run_id: target.step_run_id,
    run_id: target.run_id,
    run_attempt: target.run_attempt,
    attempt: target.attempt,
    status: results.status,
    overall: results.overall,
    checks: results.checksValid ? results.checks : null,
    log: tail.log,
    log_truncated: tail.truncated,
    timings,
    ...(target.actor ? { actor: target.actor } : {}),
    ...(target.triggering_actor ? { triggering_actor: target.triggering_actor } : {}),
  };
  let text = JSON.stringify(body);
  if (Buffer.byteLength(text) > CALLBACK_BODY_MAX_BYTES) {
    // Over the cap: the same records with every string cut to CLIPPED_CHECK_CHARS (names,
    // statuses and short fields stay whole); only if that is still too big are they dropped,
    // which the engine counts as a failure for a pass.
    body.checks = clipStrings(body.checks);
    body.checks_clipped = `checks.json exceeded the callback size cap; strings over ${CLIPPED_CHECK_CHARS} characters were cut`;
    text = JSON.stringify(body);
  }
  if (Buffer.byteLength(text) > CALLBACK_BODY_MAX_BYTES) {
    body.checks = null;
    delete body.checks_clipped;
    body.checks_dropped = "checks.json exceeded the callback size cap";
    text = JSON.stringify(body);
  }
  return text;
}

/** Longest string kept in checks.json when the callback would exceed its size cap, characters. */
export const CLIPPED_CHECK_CHARS = 256;

/** `v` with every string longer than CLIPPED_CHECK_CHARS cut to that length with a trailing `…`. */
function clipStrings(v: unknown): unknown {
  if (typeof v === "string")
    return v.length > CLIPPED_CHECK_CHARS ? `${v.slice(0, CLIPPED_CHECK_CHARS - 1)}…` : v;
  if (Array.isArray(v)) return v.map(clipStrings);
  if (v !== null && typeof v === "object")
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, clipStrings(x)]));
  return v;
}

/**
 * Outcome of sending the callback. `acked` = the engine decided (2xx, or 409: already decided or
 * fenced). `final` = a non-retryable answer (any 2xx/4xx): the post step must not send it again.
 */
export interface Delivery {
  acked: boolean;
  final: boolean;
  status: number;
  message: string;
  /**
   * What the engine says comes next for a failed step (its callback answer's `advice`), e.g.
   * "re-run this job before 15:32 UTC, or release r5 compensates"; null when it said nothing.
   */
  advice: string | null;
}

/** The `advice` of a 2xx callback answer, if any. */
export function adviceOf(text: string): string | null {
  try {
    const v = JSON.parse(text) as { advice?: unknown };
    return typeof v.advice === "string" && v.advice.length > 0 ? v.advice.slice(0, 500) : null;
  } catch {
    return null;
  }
}

/** Reads the files and sends the callback. Logs a note when checks.json is not JSON. */
export async function sendCallback(
  target: CallbackTarget,
  credential: RunnerCredential,
  timings: Record<string, number>,
  secrets: readonly string[],
): Promise<{ results: Results; delivery: Delivery }> {
  const results = readResults(target.result_dir);
  if (!results.checksValid)
    annotate(
      "warning",
      "[action] checks.json is not valid JSON; sending checks as null (the log has the tool's output)",
    );
  const text = callbackText(target, results, { ...timings, reported_at: Date.now() }, secrets);
  const res = await postSigned(target.url, text, credential, retryPolicy(process.env), (l) =>
    core.info(l),
  );
  const final = res.status >= 200 && res.status < 500;
  const acked = (res.status >= 200 && res.status < 300) || res.status === 409;
  let message: string;
  if (res.status >= 200 && res.status < 300) message = "callback acknowledged";
  else if (res.status === 409)
    message = `engine refused this attempt's result: ${errorMessage(res.text)}`;
  else if (res.status === 0)
    message = `engine unreachable at ${target.url} after ${res.attempts} attempts: ${res.error}`;
  else message = `engine answered ${res.status} at ${target.url}: ${errorMessage(res.text)}`;
  const advice = res.status >= 200 && res.status < 300 ? adviceOf(res.text) : null;
  const delivery: Delivery = { acked, final, status: res.status, message, advice };
  return { results, delivery };
}

/** GitHub refuses a step summary over 1 MiB; stay well below it. */
export const SUMMARY_MAX_BYTES = 900 * 1024;
/** Most check rows shown in the summary table. */
export const SUMMARY_MAX_ROWS = 200;

/** Text as inert GFM inline content: markdown and HTML specials escaped, one line. */
export function mdText(v: unknown, max = 300): string {
  const t = String(v).replace(/\s+/g, " ").trim().slice(0, max);
  return t.replace(/&/g, "&amp;").replace(/[\\`*_[\]<>|#~!]/g, (c) => `\\${c}`);
}

function cell(v: unknown): string {
  if (v === undefined || v === null || v === "") return "–";
  return mdText(v);
}

/**
 * Job summary in plain GFM (what github.com renders with cmark-gfm): heading, outcome, the
 * checks as a GFM table (at most SUMMARY_MAX_ROWS rows, and under SUMMARY_MAX_BYTES in all,
 * with a note of what was cut), the phases, and a link to the engine's page.
 */
export function summaryMarkdown(opts: {
  stepRunId: string;
  engineUrl: string;
  results?: Results;
  delivery?: Delivery;
  note?: string;
  phases: readonly { name: string; outcome: string; ms: number }[];
}): string {
  const out: string[] = [`## Release step ${mdText(opts.stepRunId || "(invalid payload)")}`, ""];
  if (opts.note) out.push(mdText(opts.note, 4000), "");
  const tail: string[] = [];
  if (opts.delivery) tail.push(`Callback: ${mdText(opts.delivery.message, 1000)}`, "");
  if (opts.delivery?.advice) tail.push(`**Next:** ${mdText(opts.delivery.advice, 500)}`, "");
  for (const p of opts.phases) tail.push(`- ${mdText(p.name)}: ${mdText(p.outcome)} (${p.ms} ms)`);
  tail.push("");
  if (opts.stepRunId)
    tail.push(
      `[Open this step run in the engine](<${`${opts.engineUrl}/step-runs/${opts.stepRunId}`.replace(/[<>\s]/g, encodeURIComponent)}>)`,
      "",
    );
  if (opts.results) {
    out.push(`**status** \`${opts.results.status}\` · **overall** \`${opts.results.overall}\``, "");
    const rows = Array.isArray(opts.results.checks)
      ? (opts.results.checks as Record<string, unknown>[])
      : [];
    if (rows.length > 0) {
      out.push(
        "| check | status | exit code | signal | ms | message |",
        "|---|---|---|---|---|---|",
      );
      let size = Buffer.byteLength([...out, ...tail].join("\n"));
      let shown = 0;
      for (const c of rows) {
        const line = `| ${[c.name, c.status, c.exit_code, c.signal, c.duration_ms, c.message].map(cell).join(" | ")} |`;
        const bytes = Buffer.byteLength(line) + 1;
        if (shown >= SUMMARY_MAX_ROWS || size + bytes > SUMMARY_MAX_BYTES - 1024) break;
        out.push(line);
        size += bytes;
        shown++;
      }
      out.push("");
      if (shown < rows.length)
        out.push(
          `${rows.length - shown} of ${rows.length} checks are not shown here (summary size limit); all are in checks.json, the step log and the engine's step-run page.`,
          "",
        );
    } else {
      out.push(
        opts.results.checksValid ? "No checks were recorded." : "checks.json was not valid JSON.",
        "",
      );
    }
  }
  return `${[...out, ...tail].join("\n")}\n`;
}

/** Writes {@link summaryMarkdown} to the job summary. */
export async function writeSummary(opts: Parameters<typeof summaryMarkdown>[0]): Promise<void> {
  await core.summary.addRaw(summaryMarkdown(opts)).write();
}
