/**
 * How many lanes of a parallel wave the limits let out of service together, as compiled, and
 * the least number of rounds that makes the wave take (docs/recipes.md "Parallel waves").
 * Pure: reads the manifest only, the same rules as the engine's walk (transition/lanes.ts): at
 * most `max_unavailable` out, and a lane may not be the last of its failure domain still in
 * service (a domain of one lane, or a lane with no domain, excepted); a lane its domain holds
 * back lets the lanes after it go, so the wave begins with `at_once` lanes. Lanes already excluded on the
 * control plane at the start are not known here, so this is the bound with every lane in
 * service.
 */
import type { Manifest } from "./types.ts";

/** What bounds one parallel wave. Counts are lanes; `wave` is 1-based. */
export interface WaveRounds {
  wave: number;
  lanes: number;
  /** The wave's compiled `max_unavailable` (after `min_serving`). */
  max_unavailable: number;
  /** Most lanes of the wave out of service at once under the failure-domain rule too. */
  at_once: number;
  /**
   * Failure domains with more than one lane whose every lane is in this wave: each keeps one
   * lane in service, so that lane waits for another of its domain to come back.
   */
  held_domains: string[];
  /** ⌈lanes ÷ at_once⌉: the least number of rounds (deploy, model load, smoke) the wave takes. */
  min_rounds: number;
}

/** One entry per parallel wave (`max_unavailable` above 1), in wave order. */
export function waveRounds(m: Manifest): WaveRounds[] {
  const size = new Map<string, number>();
  for (const l of m.lanes)
    if (l.failure_domain !== undefined)
      size.set(l.failure_domain, (size.get(l.failure_domain) ?? 0) + 1);
  const domainOf = new Map(m.lanes.map((l) => [l.id, l.failure_domain]));
  const out: WaveRounds[] = [];
  m.waves.forEach((w, i) => {
    const k = w.max_unavailable ?? 1;
    if (k <= 1) return;
    const inWave = new Map<string, number>();
    let free = 0;
    for (const id of w.lanes) {
      const d = domainOf.get(id);
      if (d === undefined || (size.get(d) ?? 0) <= 1) free += 1;
      else inWave.set(d, (inWave.get(d) ?? 0) + 1);
    }
    const held: string[] = [];
    let fromDomains = 0;
    for (const [d, n] of inWave) {
      const all = size.get(d) ?? 0;
      if (n >= all) held.push(d);
      fromDomains += Math.min(n, all - 1);
    }
    const atOnce = Math.max(1, Math.min(k, w.lanes.length, free + fromDomains));
    out.push({
      wave: i + 1,
      lanes: w.lanes.length,
      max_unavailable: k,
      at_once: atOnce,
      held_domains: held.sort(),
      min_rounds: Math.ceil(w.lanes.length / atOnce),
    });
  });
  return out;
}

/**
 * A one-line note for each parallel wave the failure-domain rule holds below its
 * `max_unavailable` (none when it does not bind), with what to change to go in one round.
 */
export function waveRoundNotes(m: Manifest): { path: string; message: string }[] {
  return waveRounds(m)
    .filter((r) => r.at_once < Math.min(r.max_unavailable, r.lanes))
    .map((r) => ({
      path: `rollout.waves.${r.wave - 1}.max_unavailable`,
      message: `wave ${r.wave} can have at most ${r.at_once} of its ${r.lanes} lanes out of service at once, not ${Math.min(r.max_unavailable, r.lanes)}: failure domain${r.held_domains.length > 1 ? "s" : ""} ${r.held_domains.join(", ")} ${r.held_domains.length > 1 ? "have" : "has"} every lane in this wave and each keeps one in service, so the wave takes at least ${r.min_rounds} round${r.min_rounds > 1 ? "s" : ""}; to let its lanes go together, keep one lane of ${r.held_domains.length > 1 ? "each of those domains" : r.held_domains[0]} out of this wave`,
    }));
}

/**
 * A note for each wave whose `drain_wave` leaves fewer lanes with traffic than the recipe's
 * `min_serving`: the floor counts lanes in service (not excluded), and the drain moves the
 * wave's lanes to weight 0 before any leaves service, so while the wave redeploys only the
 * lanes the drain gives weight carry the model's traffic (until the wave's `set_traffic`).
 * None without `min_serving`.
 */
export function drainCapacityNotes(m: Manifest): { path: string; message: string }[] {
  const floor = m.min_serving;
  if (floor === undefined || floor < 1) return [];
  const notes: { path: string; message: string }[] = [];
  for (const s of m.steps) {
    if (s.name !== "drain_wave" || s.forward.kind !== "control_plane") continue;
    const req = s.forward.request;
    if (req.op !== "set_traffic") continue;
    const serving = Object.entries(req.weights)
      .filter(([, w]) => w > 0)
      .map(([id]) => id);
    if (serving.length >= floor) continue;
    const shown = serving.length > 5 ? `${serving.slice(0, 5).join(", ")}, …` : serving.join(", ");
    notes.push({
      path: "min_serving",
      message: `while wave ${s.wave + 1} redeploys, its drain_wave sends all of the model's traffic to ${serving.length} lane${serving.length === 1 ? "" : "s"} (${shown}), fewer than min_serving ${floor}: min_serving counts lanes in service (not excluded), and the wave's lanes, drained to weight 0, get no traffic until its set_traffic; to spread the load, move lanes out of wave ${s.wave + 1} (lanes outside a wave carry its traffic)`,
    });
  }
  return notes;
}
