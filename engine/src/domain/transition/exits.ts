/**
 * The ways out of a release's current state (docs/state-machine.md "Ways out"). One source of
 * truth: each candidate operator event is put to `transition` itself, and only those it would
 * accept are offered. The API (`GET /v1/releases/:id` → `available_actions`), the CLI
 * (`baton status` suggestions) and the dashboard (buttons) show exactly this list.
 */
import { transition, wouldChange } from "../transition.ts";
import type { Release, ReleaseEvent } from "../types.ts";
import { suggestedCommand, type VerbName } from "../verbs.ts";
import { frozenProbeCopy } from "./draft.ts";
import { guards } from "./guards.ts";
import { holdWords } from "./holds.ts";
import { LANE_RUNS_NOTHING } from "./operator.ts";
import { pastRollForwardPoint, rollbackDone, rollForwardPointLabel } from "./recovery.ts";

/**
 * Operator actions on a release in flight (the verbs of domain/verbs.ts that are transitions
 * of the release they name; the lifecycle verbs and accept are not).
 */
export type OperatorAction = Exclude<VerbName, "rollback" | "roll_forward" | "accept">;

/** One exit the engine would accept now. */
export interface AvailableAction {
  action: OperatorAction;
  /** Release id (abort, resume, abandon) or step run id (retry, resolve). */
  target: string;
  /** Whether the request must carry a reason (resolve, abandon, pause, confirm_restore). */
  needs_reason: boolean;
  /** abandon: lane ids whose current image the operator must confirm. */
  lanes?: string[];
  /** One sentence: what the engine does when it is taken. */
  effect: string;
  /** The CLI command line that takes it. */
  command: string;
}

/** Placeholders only for probing; never stored (the probe's result is thrown away). */
const PROBE_ACTOR = "probe";
const PROBE_REASON = "probe";

/**
 * Asks `transition` which events one release would accept (each answer as `transition` gives
 * it, the result discarded), copying the release once for all the questions instead of once
 * per question (`wouldChange` runs each probe in place on one deep-frozen copy).
 */
export class Probe {
  private frozen: Readonly<Release> | null = null;
  constructor(readonly release: Release) {}

  /** True when `transition(release, event, release.updated_at)` would accept and change it. */
  accepts(event: ReleaseEvent): boolean {
    this.frozen ??= frozenProbeCopy(this.release);
    return wouldChange(this.release, this.frozen, event, this.release.updated_at);
  }
}

/**
 * What `resume` does to `release` now, in one sentence, read from what the transition itself
 * does (its history names each step run it sends again): after a plain operator pause nothing
 * is sent again (the step in flight settles, or the next step begins); a release paused on a
 * failed step run sends that step run again. Pure; only for a release that accepts resume.
 */
export function resumeEffect(release: Release): string {
  if (release.state === "pending") return "starts the release at step 1";
  const h = release.hold;
  const lifts = h?.kind === "pause" ? `lifts ${h.actor}'s pause` : null;
  if (release.gate?.decision === "inconclusive")
    return `${lifts ?? "lifts the operator's pause"}; the release stays paused at the inconclusive gate of wave ${release.gate.wave + 1} until promote or abort`;
  const res = transition(release, { type: "resume", actor: PROBE_ACTOR }, release.updated_at);
  const resent = res.ok
    ? res.history
        .filter((e) => e.step_run_id && e.message.includes("sent again on resume"))
        .map((e) => e.step_run_id as string)
    : [];
  if (resent.length > 0) {
    return `${lifts ? `${lifts}; ` : ""}sends ${resent.join(", ")} again (a new dispatch, same operation key), then runs forward`;
  }
  const cursor = release.step_runs.find(
    (sr) => sr.step_index === release.cursor && sr.direction === "fwd",
  );
  const next = release.manifest.steps[release.cursor];
  const then = release.gate
    ? `the gate of wave ${release.gate.wave + 1} goes on deciding; a pass begins the next wave`
    : cursor && guards.inFlight(cursor)
      ? `${cursor.id} in flight settles, then the release runs forward`
      : next && (!cursor || cursor.state !== "succeeded")
        ? `step ${release.cursor + 1} (${next.forward.name}${next.lane ? ` ${next.lane}` : ""}) begins and the release runs forward`
        : "the release runs forward";
  return `${lifts ?? "resumes"}: nothing is sent again; ${then}`;
}

/**
 * `verify` as `release` accepts it now (`transition` asked, the result discarded), or null:
 * after an undo whose verification failed (an exit of `needs_operator`), and on a `succeeded`
 * or `rolled_back` release, where it records a new verification and changes no state.
 */
export function verifyAction(
  release: Release,
  probe: Probe = new Probe(release),
): AvailableAction | null {
  if (!probe.accepts({ type: "verify", actor: PROBE_ACTOR })) return null;
  const effect =
    release.state === "succeeded"
      ? "reads every lane and its machine against the manifest's end state and records it; the state stays"
      : release.state === "rolled_back"
        ? "reads every lane against its observed baseline and records it; the state stays"
        : "reads every lane again (control plane, and the machines of the lanes a runner step touched): rolled_back if each is as it was at start, else it waits here again naming the lane and field";
  return {
    action: "verify",
    target: release.id,
    needs_reason: false,
    effect,
    command: suggestedCommand("verify", { target: release.id }),
  };
}

/**
 * The operator exits `transition` accepts from `release` as it is: a pure function of the
 * release (the probes' results are discarded). Empty for terminal releases (their `verify` is
 * `verifyAction`). A `running` or `compensating` release also moves on by itself (deadlines
 * bound every step run and every verification read).
 */
export function availableActions(
  release: Release,
  probe: Probe = new Probe(release),
): AvailableAction[] {
  if (probe.release !== release) throw new Error("[engine] a Probe answers for its own release");
  const accepts = (e: ReleaseEvent) => probe.accepts(e);
  const id = release.id;
  const out: AvailableAction[] = [];
  if (accepts({ type: "resume", actor: PROBE_ACTOR })) {
    out.push({
      action: "resume",
      target: id,
      needs_reason: false,
      effect: resumeEffect(release),
      command: suggestedCommand("resume", { target: id }),
    });
  }
  if (accepts({ type: "release", actor: PROBE_ACTOR, reason: PROBE_REASON })) {
    out.push({
      action: "release",
      target: id,
      needs_reason: false,
      effect: `exposes the candidate for the first time: step ${release.cursor + 1} sets the first wave's traffic, then the rollout goes on`,
      command: suggestedCommand("release", { target: id }),
    });
  }
  if (accepts({ type: "promote", actor: PROBE_ACTOR, reason: PROBE_REASON })) {
    const manual = release.hold?.kind === "promotion";
    out.push({
      action: "promote",
      target: id,
      needs_reason: false,
      effect: manual
        ? `widens to wave ${(release.hold?.wave ?? 0) + 1}: the recipe's promotion is manual and the previous wave is done`
        : release.hold?.kind === "pause"
          ? `accepts the risk of the inconclusive gate of wave ${(release.gate?.wave ?? 0) + 1}; the release stays paused (${holdWords(release.hold)}) until resume, then runs on into the next wave`
          : `accepts the risk of the inconclusive gate of wave ${(release.gate?.wave ?? 0) + 1} and runs on into the next wave`,
      command: suggestedCommand("promote", {
        target: id,
        flags: {
          "--reason": manual ? '"<why the wave is good>"' : '"<why the risk is acceptable>"',
        },
      }),
    });
  }
  if (accepts({ type: "pause", actor: PROBE_ACTOR, reason: PROBE_REASON })) {
    const flying = release.step_runs.filter((sr) => sr.direction === "fwd" && guards.inFlight(sr));
    out.push({
      action: "pause",
      target: id,
      needs_reason: true,
      effect:
        flying.length > 0
          ? `starts nothing new: ${flying.map((sr) => sr.id).join(", ")} in flight settle${release.gate ? " and the gate keeps deciding" : ""}, then the release waits paused until resume`
          : `starts nothing new: the release waits paused until resume${release.gate ? " (the gate keeps deciding)" : ""}`,
      command: suggestedCommand("pause", { target: id }),
    });
  }
  for (const sr of release.step_runs) {
    // Retry and resolve are accepted only for the step run at the cursor (guards.isCurrent is
    // part of both guards): probing the others would cost a walk per step run for nothing.
    if (sr.step_index !== release.cursor) continue;
    if (accepts({ type: "retry", actor: PROBE_ACTOR, step_run_id: sr.id })) {
      out.push({
        action: "retry",
        target: sr.id,
        needs_reason: false,
        effect: `sends ${sr.id} again with the same operation key (a new dispatch; older attempts fenced)`,
        command: suggestedCommand("retry", { target: sr.id }),
      });
    }
    if (
      accepts({ type: "resolve", actor: PROBE_ACTOR, step_run_id: sr.id, reason: PROBE_REASON })
    ) {
      out.push({
        action: "resolve",
        target: sr.id,
        needs_reason: true,
        effect: `records that you did ${sr.id}'s backward effect by hand; it counts as done and compensation continues`,
        command: suggestedCommand("resolve", { target: sr.id }),
      });
    }
  }
  if (accepts({ type: "abort", actor: PROBE_ACTOR, reason: PROBE_REASON })) {
    out.push({
      action: "abort",
      target: id,
      needs_reason: true,
      effect:
        release.high_water_mark < 0
          ? "ends the release aborted (nothing took effect)"
          : pastRollForwardPoint(release)
            ? `ends the release aborted without undoing anything: its recovery class is roll_forward_only and ${rollForwardPointLabel(release)} may have taken effect; then roll it forward`
            : "compensates: undoes every step that may have taken effect, from the high-water mark down",
      command: suggestedCommand("abort", { target: id }),
    });
  }
  if (accepts({ type: "confirm_restore", actor: PROBE_ACTOR, reason: PROBE_REASON })) {
    out.push({
      action: "confirm_restore",
      target: id,
      needs_reason: true,
      effect: rollbackDone(release)
        ? `records that you ran the restore action of ${release.lineage?.of} (${release.restore?.action ?? ""}), whose rollback this is, and what it showed; the rollback ends succeeded and its lanes become free`
        : `records that you ran the recipe's restore action (${release.restore?.action ?? ""}) and what it showed; the release ends rolled_back and its lanes become free`,
      command: suggestedCommand("confirm_restore", { target: id }),
    });
  }
  if (accepts({ type: "restore_state", actor: PROBE_ACTOR, reason: PROBE_REASON })) {
    const spec = release.manifest.recovery?.restore_state;
    out.push({
      action: "restore_state",
      target: id,
      needs_reason: true,
      effect: `runs the recipe's restore tool \`${spec?.tool ?? "?"}\` to the point you name (default ${spec?.point ?? "latest"}): it reports the data lost, then the lanes are verified again and the release ends rolled_back`,
      command: suggestedCommand("restore_state", { target: id }),
    });
  }
  const verify = guards.isTerminal(release) ? null : verifyAction(release, probe);
  if (verify) out.push(verify);
  const lanes = release.manifest.lanes.map((l) => l.id);
  const confirmAll = Object.fromEntries(lanes.map((l) => [l, LANE_RUNS_NOTHING]));
  if (accepts({ type: "abandon", actor: PROBE_ACTOR, reason: PROBE_REASON, lanes: confirmAll })) {
    out.push({
      action: "abandon",
      target: id,
      needs_reason: true,
      lanes,
      effect:
        "ends the release abandoned without further compensation, once you confirm what every lane runs; its lanes become free",
      command: suggestedCommand("abandon", { target: id, lanes }),
    });
  }
  return out;
}
