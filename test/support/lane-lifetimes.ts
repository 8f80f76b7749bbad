/**
 * One release per lane, judged from the record and the control plane (docs/guarantees.md G9;
 * used by the many-engines chaos scenario): the lifetimes of releases accepted for the same
 * lane must not overlap, and each lane's writers at the control plane must not interleave.
 * Pure functions: no store, no process.
 */
import type { ChangeRecord } from "../../engine/src/control-plane/model.ts";
import { type ReleaseState, TERMINAL_RELEASE_STATES } from "../../engine/src/domain/states.ts";

/**
 * An accepted release's lifetime as its engine recorded it (epoch ms): `created` when the start
 * was handled (the release and its lane claims commit after it, before `answeredAt`), `ended`
 * the time of its last accepted history entry once it is terminal (the transition that ended
 * it), null while it is not.
 */
export interface Lifetime {
  id: string;
  name: string;
  created: number;
  answeredAt: number;
  state: string;
  ended: number | null;
}

/** The lifetime of `w` from its release row and history (null release: never stored). */
export function lifetimeOf(
  w: { id: string; name: string; answeredAt: number },
  r: { created_at: number; state: string } | null,
  history: { at: number; outcome: string }[],
): Lifetime {
  const terminal = r !== null && TERMINAL_RELEASE_STATES.has(r.state as ReleaseState);
  const last = history.filter((h) => h.outcome === "accepted").at(-1);
  return {
    ...w,
    created: r?.created_at ?? w.answeredAt,
    state: r?.state ?? "missing",
    ended: terminal ? (last?.at ?? null) : null,
  };
}

/**
 * Several starts of one overlap round accepted: one lane per release at a time holds if each
 * pair's lifetimes do not overlap, i.e. one of them had ended before the other's start was
 * answered (its commit lies between `created` and `answeredAt`). Judged with the bounds the
 * record gives: a pair is a violation when each was answered 201 before the other ended (or
 * the other never ended). Returns the problem with both timelines, or a note for the log.
 */
export function checkOverlapRound(
  o: { round: number; shared: string },
  lives: Lifetime[],
  t0: number,
): { problem: string | null; note: string } {
  const at = (t: number | null) => (t === null ? "never" : `+${t - t0} ms`);
  const line = (l: Lifetime) =>
    `${l.id} (${l.name}) start handled ${at(l.created)}, answered 201 ${at(l.answeredAt)}, ended ${l.state} ${at(l.ended)}`;
  const sorted = [...lives].sort((a, b) => a.created - b.created);
  const clash: string[] = [];
  for (let i = 0; i < sorted.length; i++)
    for (let j = i + 1; j < sorted.length; j++) {
      const a = sorted[i]!;
      const b = sorted[j]!;
      const apart =
        (a.ended !== null && a.ended <= b.answeredAt) ||
        (b.ended !== null && b.ended <= a.answeredAt);
      if (!apart) clash.push(`${line(a)}; ${line(b)}`);
    }
  return clash.length > 0
    ? {
        problem: `overlap round ${o.round}: ${lives.length} starts sharing lane ${o.shared} accepted with overlapping lifetimes (${clash.length} pairs): ${clash.slice(0, 3).join(" | ")}${clash.length > 3 ? ` | and ${clash.length - 3} more pairs` : ""}`,
        note: "",
      }
    : {
        problem: null,
        note: `overlap round ${o.round}: ${lives.length} starts accepted one after another (each after the one before had ended): ${sorted.map(line).join("; ")}`,
      };
}

/**
 * Lanes a `set_traffic` change concerns: those whose weight it changed or left above 0 (the
 * model's other lanes it lists at 0, untouched, are not held by the writer).
 */
export function touchedByTraffic(c: ChangeRecord): string[] {
  if (c.kind !== "set_traffic") return [];
  const before = (c.before ?? {}) as Record<string, number>;
  const after = (c.after ?? {}) as Record<string, number>;
  return Object.keys(after).filter((id) => after[id]! > 0 || before[id] !== after[id]);
}

/**
 * From the control plane's history: for each lane, the releases that wrote it in application
 * order. A lane passes from one release to the next; one release writing it again after
 * another did (A, B, A) means two releases held it at once.
 */
export function interleavedHolders(history: ChangeRecord[]): {
  lanes: number;
  handovers: number;
  problems: string[];
} {
  const writers = new Map<string, { release: string; change: number }[]>();
  for (const c of history) {
    for (const lane of c.lane !== null ? [c.lane] : touchedByTraffic(c)) {
      const seq = writers.get(lane) ?? [];
      if (seq.at(-1)?.release !== c.release_id) seq.push({ release: c.release_id, change: c.id });
      writers.set(lane, seq);
    }
  }
  let handovers = 0;
  const problems: string[] = [];
  for (const [lane, seq] of writers) {
    handovers += seq.length - 1;
    const seen = new Set<string>();
    for (const w of seq) {
      if (seen.has(w.release)) {
        problems.push(
          `lane ${lane} held by two releases at once at the control plane: written by ${seq.map((x) => `${x.release} (change ${x.change})`).join(", then ")}`,
        );
        break;
      }
      seen.add(w.release);
    }
  }
  return { lanes: writers.size, handovers, problems };
}
