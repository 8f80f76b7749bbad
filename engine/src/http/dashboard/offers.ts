/**
 * The operator actions the release page offers, each with what it will do. The rule of which
 * actions the engine accepts is the one the page always used (`awaitsRetry`, abort before
 * compensation, resume when paused); it moves to the domain's `availableActions` once that
 * lands, so the dashboard and CLI never offer what the engine would refuse.
 */
import type { Release } from "../../domain/types.ts";
import { awaitsRetry } from "./format.ts";
import { stepWords } from "./summary.ts";

/** One action the page offers. */
export interface Offer {
  action: "abort" | "resume" | "retry";
  /** Release id or step run id. */
  target: string;
  /** Button text. */
  label: string;
  /** What the engine will do, in one sentence. */
  effect: string;
  /** The confirmation page. */
  href: string;
  danger: boolean;
  /** The CLI command that does the same. */
  command: string;
}

/** The actions the engine accepts for `r` now, most useful first. */
export function offers(r: Release): Offer[] {
  const out: Offer[] = [];
  const steps = r.manifest.steps;
  for (const s of r.step_runs.filter((x) => awaitsRetry(r.state, x))) {
    const step = steps[s.step_index];
    const where = step ? stepWords(step) : s.id;
    out.push({
      action: "retry",
      target: s.id,
      label: s.direction === "bwd" ? `Retry the undo of ${where}…` : `Retry ${where}…`,
      effect:
        s.direction === "bwd"
          ? `sends the undo of ${where} again with the same operation key; when it succeeds, undoing continues down to step 1`
          : `sends ${where} again with the same operation key (older attempts are fenced out); the release runs forward if it succeeds`,
      href: `/step-runs/${s.id}/retry`,
      danger: false,
      command: `baton retry ${s.id}`,
    });
  }
  if (r.state === "paused") {
    out.push({
      action: "resume",
      target: r.id,
      label: "Resume release…",
      effect: "runs forward again from the step the release is paused on",
      href: `/releases/${r.id}/resume`,
      danger: false,
      command: `baton resume ${r.id}`,
    });
  }
  if (r.state === "pending") {
    out.push({
      action: "resume",
      target: r.id,
      label: "Start release…",
      effect: "starts the release at step 1",
      href: `/releases/${r.id}/resume`,
      danger: false,
      command: `baton resume ${r.id}`,
    });
  }
  if (["pending", "running", "paused"].includes(r.state)) {
    const hwm = r.high_water_mark;
    out.push({
      action: "abort",
      target: r.id,
      label: "Abort release…",
      effect:
        hwm < 0
          ? "ends the release aborted: nothing has taken effect, so nothing is undone"
          : `undoes every step that may have taken effect, from step ${hwm + 1} down to step 1, then ends rolled back`,
      href: `/releases/${r.id}/abort`,
      danger: true,
      command: `baton abort ${r.id} --reason "<why>"`,
    });
  }
  return out;
}
