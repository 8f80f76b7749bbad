/**
 * `baton status <id> -w`: one screen of a release, redrawn in place on a terminal as it
 * changes (like `kubectl argo rollouts get rollout -w`): its state and step n of m, what holds
 * it, per lane the image (candidate or baseline) and the weight Baton set beside the weight the
 * control plane reports now, the latest bounds of the gate in force, and the commands the
 * engine accepts. When stdout is not a terminal each changed screen is appended instead. Polls
 * every `intervalMs`; ends when the release ends (exit 0 only for `succeeded`), or after
 * `timeoutMs` with an error.
 */
import { armsLine, metricLine, srmLine } from "../domain/gate/summary.ts";
import type { Release } from "../domain/types.ts";
import { duration, imageLabel, imageRole, time } from "../views/format.ts";
import type { LanesView } from "../views/lanes.ts";
import { stepProgress } from "../views/list-row.ts";
import { summarize, whyToShow } from "../views/summary.ts";
import { gatePlace } from "../views/where.ts";
import type { EngineClient } from "./client.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { acceptedCommands, type RecordJson, TERMINAL } from "./output.ts";

export interface StatusWatchOptions {
  intervalMs: number;
  timeoutMs: number;
  /** Where the screen goes; on a TTY it is redrawn in place (`columns` cuts long lines). */
  out: { write(s: string): unknown; isTTY?: boolean; columns?: number };
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

function pad(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd(),
  );
}

/** `10%`, `—` for a weight not set or not read. */
const pct = (w: number | null | undefined) => (w === null || w === undefined ? "—" : `${w}%`);

/**
 * The screen of release `rec` with its lanes (`GET /v1/releases/:id/lanes`; null when the
 * engine has no such route): plain lines, no colour.
 */
export function statusScreen(rec: RecordJson, lanes: LanesView | null): string[] {
  const r = rec as unknown as Release;
  const f = summarize(r, rec.history, []);
  const total = rec.manifest.steps.length;
  const lines = [
    `${rec.id}  ${rec.state}  ${rec.manifest.recipe_name} / ${rec.manifest.model}  ·  ${stepProgress({ ...rec, step_count: total })}  ·  generation ${rec.generation}`,
    `  ${f.headline}`,
  ];
  const why = whyToShow(f);
  if (why) lines.push(`  why: ${why}`);
  lines.push("");
  const rows = [["LANE", "WAVE", "IMAGE", "SET", "OBSERVED"]];
  const byId = new Map((lanes?.lanes ?? []).map((l) => [l.id, l]));
  for (const l of f.lanes) {
    const seen = byId.get(l.id)?.observed;
    rows.push([
      l.id,
      l.wave > 0 ? String(l.wave) : "—",
      imageLabel(l.ref, imageRole(r, l.image)),
      pct(l.weight),
      seen ? `${pct(seen.weight)}${seen.excluded ? " excluded" : ""}` : "—",
    ]);
  }
  lines.push(...pad(rows).map((x) => `  ${x}`));
  lines.push(
    lanes === null
      ? "  (observed: this engine does not report its lanes)"
      : lanes.read_error
        ? `  (observed: unknown; the control plane did not answer: ${lanes.read_error})`
        : "  (set: Baton's last traffic write; observed: the control plane now)",
  );
  // The gate in force, else the latest one, with its latest bounds.
  const gates = rec.gates ?? [];
  const g =
    (r.gate
      ? gates.findLast((x) => x.wave === r.gate?.wave && x.generation === rec.generation)
      : null) ?? gates.at(-1);
  if (g) {
    lines.push(
      "",
      `  ${gatePlace(r, g)}: ${g.decision.toUpperCase()} after ${g.evaluations} ${g.evaluations === 1 ? "evaluation" : "evaluations"} (${duration(g.elapsed_ms)}): ${g.reason}`,
      `    ${armsLine(g)}`,
      `    ${srmLine(g)}`,
      ...g.metrics.map((m) => `    ${metricLine(m)}`),
    );
  } else if (r.gate) {
    lines.push("", `  ${gatePlace(r, r.gate)}: waiting for its first evaluation`);
  }
  const cmds = acceptedCommands(rec);
  if (cmds.length > 0) lines.push("", "what you can do:", ...cmds.map((c) => `  ${c}`));
  return lines;
}

/** Watches release `id` as one screen; resolves to the exit code. @throws CliError. */
export async function statusWatch(
  client: EngineClient,
  id: string,
  o: StatusWatchOptions,
): Promise<ExitCode> {
  const now = o.now ?? Date.now;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const tty = Boolean(o.out.isTTY);
  const until = now() + o.timeoutMs;
  const cut = (s: string) => {
    const w = o.out.columns ?? 0;
    return tty && w > 1 && s.length > w - 1 ? `${s.slice(0, w - 2)}…` : s;
  };
  let drawn = 0;
  let last = "";
  for (;;) {
    const path = `/v1/releases/${encodeURIComponent(id)}`;
    const rec = await client.call<RecordJson>("GET", path);
    let lanes: LanesView | null = null;
    try {
      lanes = await client.call<LanesView>("GET", `${path}/lanes`);
    } catch (err) {
      // An engine without the route still draws the screen, without the observed column.
      if (!(err instanceof CliError)) throw err;
    }
    const screen = statusScreen(rec, lanes);
    const text = screen.join("\n");
    if (text !== last) {
      if (tty) {
        // Back to the first line of the previous screen, clear to the end, draw again.
        const lines = screen.map(cut);
        o.out.write(`${drawn > 0 ? `\x1b[${drawn}F\x1b[J` : ""}${lines.join("\n")}\n`);
        drawn = lines.length;
      } else {
        o.out.write(`--- ${time(now())}\n${text}\n`);
      }
      last = text;
    }
    if (TERMINAL.has(rec.state)) return rec.state === "succeeded" ? EXIT.ok : EXIT.failed;
    if (now() >= until) {
      throw new CliError(
        `[cli] still ${rec.state} after ${duration(o.timeoutMs)}; run baton status ${id} -w again or raise --timeout`,
      );
    }
    await sleep(o.intervalMs);
  }
}
