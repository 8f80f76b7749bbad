/**
 * `baton watch <id>`: polls the release and prints each step run as it changes state, the
 * release's line once per change of its state or reason, each refused event as it is recorded, and (on a terminal) a progress line for the running step
 * run, redrawn in place. Ends when the release is terminal (exit 0 only for `succeeded`) or
 * waits for an operator (exit 1), or after `timeoutMs`.
 */
import type { HistoryEntry, Release } from "../domain/types.ts";
import { duration, time } from "../views/format.ts";
import { housekeepingLine, isHousekeeping } from "../views/history-label.ts";
import { holdHeadline } from "../views/where.ts";
import type { EngineClient } from "./client.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import {
  acceptedCommands,
  type RecordJson,
  releaseLine,
  stepRunLine,
  TERMINAL,
  WAITING,
} from "./output.ts";

export interface WatchOptions {
  intervalMs: number;
  timeoutMs: number;
  json: boolean;
  /** Where lines go; `tty` enables the in-place progress line. */
  out: { write(s: string): unknown; isTTY?: boolean; columns?: number };
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

const SPIN = ["|", "/", "-", "\\"];

/**
 * What holds the release, as a key that changes when a gate begins or ends, a gate's decision
 * turns inconclusive, or a hold begins (not on every evaluation: those print their own line).
 */
function holdKey(rec: RecordJson): string {
  const r = rec as unknown as Release;
  const g = r.gate;
  return `${g ? `${g.wave}:${g.phase}:${g.decision === "inconclusive" ? "inconclusive" : "deciding"}` : ""}|${r.hold?.kind ?? ""}`;
}

/** The figures of an accepted gate evaluation in history, or null for any other entry. */
function gateEvaluation(
  h: HistoryEntry,
): { wave: number; phase: string; seq: number; decision: string; elapsed_ms: number } | null {
  if (h.kind !== "gate" || h.outcome !== "accepted") return null;
  const d = h.data as { gate?: Record<string, unknown> } | null;
  const g = d?.gate;
  if (!g || typeof g.seq !== "number" || typeof g.decision !== "string") return null;
  return {
    wave: Number(g.wave) + 1,
    phase: String(g.phase),
    seq: g.seq,
    decision: g.decision,
    elapsed_ms: Number(g.elapsed_ms),
  };
}

/** Watches release `id`; resolves to the exit code. @throws CliError from the client. */
export async function watch(client: EngineClient, id: string, o: WatchOptions): Promise<ExitCode> {
  const now = o.now ?? Date.now;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const tty = Boolean(o.out.isTTY) && !o.json;
  const seen = new Map<string, string>();
  let historySeen = 0;
  let lastState = "";
  let lastReason: string | null = null;
  let lastHeld = "";
  let progress = false;
  const until = now() + o.timeoutMs;
  const line = (s: string) => {
    if (progress) o.out.write("\r\x1b[2K");
    progress = false;
    o.out.write(`${s}\n`);
  };
  const emit = (event: Record<string, unknown>, text: string) =>
    o.json ? line(JSON.stringify(event)) : line(text);

  for (let tick = 0; ; tick++) {
    const rec = await client.call<RecordJson>("GET", `/v1/releases/${encodeURIComponent(id)}`);
    // This poll's changes, printed in the order the history recorded them: a refused event at
    // its history sequence, a step run at its last history entry up to the time it ended (or,
    // without one, among the entries by time), so a late callback refused before a step run
    // ended prints before it, and a note about a step run written after it ended (compensation
    // passing a step with no undo) does not move it after the steps that came later.
    const changes: {
      seq: number;
      /** When it happened (ms): what comes after the release line's time prints after it. */
      at: number;
      event: Record<string, unknown>;
      text: string;
    }[] = [];
    const endedAt = new Map(rec.step_runs.map((sr) => [sr.id, sr.finished_at ?? Infinity]));
    const lastEntry = new Map<string, number>();
    rec.history.forEach((h, i) => {
      // A gate's evaluations name the wave's last step run; they are printed on their own.
      if (
        h.step_run_id &&
        h.outcome !== "refused" &&
        h.kind !== "gate" &&
        h.at <= (endedAt.get(h.step_run_id) ?? Infinity)
      )
        lastEntry.set(h.step_run_id, i);
    });
    for (const sr of rec.step_runs) {
      const a = sr.attempts.at(-1);
      const key = `${sr.state}:${sr.attempts.length}:${a?.state ?? ""}`;
      if (seen.get(sr.id) === key) continue;
      seen.set(sr.id, key);
      const at = sr.finished_at ?? sr.started_at ?? sr.created_at;
      changes.push({
        seq: lastEntry.get(sr.id) ?? rec.history.filter((h) => h.at <= at).length - 0.5,
        at,
        event: {
          type: "step_run",
          id: sr.id,
          step_index: sr.step_index,
          direction: sr.direction,
          state: sr.state,
          attempt: a
            ? { n: a.n, run_id: a.run_id, run_attempt: a.run_attempt, state: a.state }
            : null,
          last_error: sr.last_error,
        },
        text: `${time(at)} ${sr.id} ${stepRunLine(rec, sr)}`,
      });
    }
    rec.history.forEach((h, i) => {
      if (i < historySeen) return;
      const gate = gateEvaluation(h);
      if (gate) {
        changes.push({
          seq: i,
          at: h.at,
          event: { type: "gate", ...gate, message: h.message, at: h.at },
          text: `${time(h.at)} ${h.message.replace(/^\[engine\] /, "")}`,
        });
        return;
      }
      if (h.outcome !== "refused") return;
      const chore = isHousekeeping(h);
      changes.push({
        seq: i,
        at: h.at,
        event: {
          type: "refused",
          kind: h.kind,
          step_run_id: h.step_run_id,
          message: h.message,
          at: h.at,
          // The engine's own bookkeeping (a late or duplicate callback), not an operator's.
          housekeeping: chore,
        },
        text: chore
          ? `${time(h.at)} engine housekeeping: ${housekeepingLine(h)}`
          : `${time(h.at)} refused ${h.kind}${h.step_run_id ? ` for ${h.step_run_id}` : ""}: ${h.message}`,
      });
    });
    // Stable: step runs of one sequence keep the release's step order.
    changes.sort((x, y) => x.seq - y.seq);
    historySeen = rec.history.length;
    // The release line comes after the step runs of the same poll, so `succeeded` (or any
    // final line) is printed after the last step run, never before it; what happened after
    // the release's own time (a late callback refused after it ended: housekeeping) comes
    // after the release line, so the lines stay in time order.
    // Once per change of state or reason: an unchanged reason is not printed again on the
    // next poll, a new one (a hold, a gate's verdict) is printed once.
    // And once per change of what holds it (a gate begins or ends, a pause, a hold).
    const held = holdKey(rec);
    if (rec.state !== lastState || rec.reason !== lastReason || held !== lastHeld) {
      for (const c of changes) if (c.at <= rec.updated_at) emit(c.event, c.text);
      emit(
        { type: "release", id: rec.id, state: rec.state, reason: rec.reason, at: rec.updated_at },
        `${time(rec.updated_at)} ${releaseLine(rec)}`,
      );
      for (const c of changes) if (c.at > rec.updated_at) emit(c.event, c.text);
      lastState = rec.state;
      lastReason = rec.reason;
      lastHeld = held;
    } else for (const c of changes) emit(c.event, c.text);

    if (TERMINAL.has(rec.state)) {
      return rec.state === "succeeded" ? EXIT.ok : EXIT.failed;
    }
    if (WAITING.has(rec.state)) {
      line(
        o.json
          ? JSON.stringify({ type: "waiting", id: rec.id, state: rec.state, reason: rec.reason })
          : [
              `release ${rec.id} is ${rec.state.replace("_", " ")} and waits for an operator; the engine accepts:`,
              ...acceptedCommands(rec).map((c) => `  ${c}`),
            ].join("\n"),
      );
      return EXIT.failed;
    }
    if (now() >= until) {
      throw new CliError(
        `[cli] still ${rec.state} after ${duration(o.timeoutMs)}; watch again or raise --timeout`,
      );
    }
    if (tty) {
      const running = [...rec.step_runs]
        .reverse()
        .find(
          (s) =>
            !["succeeded", "failed", "unknown", "dispatch_failed", "planned"].includes(s.state),
        );
      const done = rec.step_runs.filter(
        (s) => s.direction === "fwd" && s.state === "succeeded",
      ).length;
      const total = rec.manifest.steps.length;
      const hold = holdHeadline(rec as unknown as Release);
      const what = hold
        ? hold
        : running
          ? `step ${running.step_index + 1}${running.direction === "bwd" ? " undo" : ""} ${running.state} for ${duration(now() - (running.started_at ?? running.created_at))}`
          : rec.state;
      // One line, cut to the terminal's width: a wrapped line would not be cleared by `\r`.
      const text = `${SPIN[tick % SPIN.length]} ${done}/${total} steps done · ${what}`;
      const w = o.out.columns ?? 0;
      o.out.write(`\r\x1b[2K${w > 1 && text.length > w - 1 ? `${text.slice(0, w - 2)}…` : text}`);
      progress = true;
    }
    await sleep(o.intervalMs);
  }
}
