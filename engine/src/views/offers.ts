/**
 * The operator actions the release page and `baton status` offer, each with what it will do:
 * exactly the domain's `availableActions` (domain/transition/exits.ts, which asks the
 * transition itself), so neither offers what the engine would refuse. Abort, resume and retry
 * have confirmation pages; resolve and abandon (which need a reason and lane confirmations)
 * are shown with their CLI command.
 */

import { blueLanes, blueWeights } from "../domain/blue-green.ts";
import {
  type LifecycleLookups,
  type LifecycleVerb,
  lifecycleActions,
} from "../domain/lifecycle.ts";
import { stepWords } from "../domain/step-words.ts";
import { switchBackWords } from "../domain/switch-back-words.ts";
import {
  type AvailableAction,
  availableActions,
  Probe,
  verifyAction,
} from "../domain/transition/exits.ts";
import { type PlannedStep, planOf } from "../domain/transition/plan.ts";
import { rollbackDone } from "../domain/transition/recovery.ts";
import type { Release } from "../domain/types.ts";
import { dashboardPath } from "../domain/verbs.ts";
import { stepAction } from "./summary.ts";

/**
 * What an action leads to, for people: the steps in the order they will run (each with its
 * lane), or, for a rollback (a new release), what each lane goes back to.
 */
export interface PlanWords {
  /** `Will be undone, in this order` / `Will run, in this order` / `Will NOT be undone`. */
  heading: string;
  /**
   * The steps in the order they run, lanes interleaved as the engine runs them: `lane` is the
   * lane (or `traffic (all lanes)`), `step` the step in words. Empty when nothing runs.
   */
  steps: { lane: string; step: string }[];
  /** Per lane, what it goes through (a rollback); empty for the other actions. */
  lanes: { lane: string; steps: string[] }[];
  /** When nothing runs: what happens instead. */
  empty: string;
}

/** One action offered. */
export interface Offer {
  action: AvailableAction["action"];
  /** Release id or step run id. */
  target: string;
  /** Button text. */
  label: string;
  /** What the engine will do, in one sentence. */
  effect: string;
  /** The dashboard's confirmation page, or null when the CLI takes it. */
  href: string | null;
  danger: boolean;
  /** The CLI command that does the same. */
  command: string;
}

const ORDER: Record<AvailableAction["action"], number> = {
  retry: 0,
  confirm_restore: 0,
  restore_state: 0,
  verify: 0,
  resume: 1,
  release: 2,
  promote: 3,
  resolve: 4,
  pause: 5,
  abort: 6,
  abandon: 7,
};

/**
 * The actions the engine accepts for `r` now, most useful first; a closed release's `verify`
 * (which records a verification and changes no state) with them.
 */
export function offers(r: Release): Offer[] {
  const steps = r.manifest.steps;
  const where = (target: string) => {
    const sr = r.step_runs.find((s) => s.id === target);
    const step = sr ? steps[sr.step_index] : undefined;
    return { sr, words: step ? stepWords(step) : target };
  };
  const probe = new Probe(r);
  const closedVerify = isClosed(r) ? verifyAction(r, probe) : null;
  return [...availableActions(r, probe), ...(closedVerify ? [closedVerify] : [])]
    .sort((a, b) => ORDER[a.action] - ORDER[b.action])
    .map((a): Offer => {
      const { sr, words } = where(a.target);
      const undo = sr?.direction === "bwd";
      switch (a.action) {
        case "retry":
          return {
            action: a.action,
            target: a.target,
            label: undo ? `Retry the undo of ${words}…` : `Retry ${words}…`,
            effect: a.effect,
            href: dashboardPath(a.action, a.target),
            danger: false,
            command: a.command,
          };
        case "resume":
          return {
            action: a.action,
            target: a.target,
            label: r.state === "pending" ? "Start release…" : "Resume release…",
            effect: a.effect,
            href: dashboardPath(a.action, a.target),
            danger: false,
            command: a.command,
          };
        case "abort":
          return {
            action: a.action,
            target: a.target,
            label: "Abort release…",
            effect:
              r.high_water_mark < 0
                ? a.effect
                : `undoes every step that may have taken effect, from step ${r.high_water_mark + 1} down to step 1, then ends rolled back`,
            href: dashboardPath(a.action, a.target),
            danger: true,
            command: a.command,
          };
        case "pause":
          return {
            action: a.action,
            target: a.target,
            label: "Pause release…",
            effect: a.effect,
            href: dashboardPath(a.action, a.target),
            danger: false,
            command: a.command,
          };
        case "release":
          return {
            action: a.action,
            target: a.target,
            label: "Release (first exposure)…",
            effect: a.effect,
            href: dashboardPath(a.action, a.target),
            danger: false,
            command: a.command,
          };
        case "restore_state":
          return {
            action: a.action,
            target: a.target,
            label: "Run the restore tool…",
            effect: a.effect,
            href: dashboardPath(a.action, a.target),
            danger: true,
            command: a.command,
          };
        case "confirm_restore":
          return {
            action: a.action,
            target: a.target,
            label: "Confirm the restore action…",
            effect: a.effect,
            href: dashboardPath(a.action, a.target),
            danger: false,
            command: a.command,
          };
        case "verify":
          return {
            action: a.action,
            target: a.target,
            label: r.state === "needs_operator" ? "Verify the lanes again…" : "Verify the lanes…",
            effect: a.effect,
            href: dashboardPath(a.action, a.target),
            danger: false,
            command: a.command,
          };
        case "promote":
          return {
            action: a.action,
            target: a.target,
            label:
              r.hold?.kind === "promotion"
                ? "Promote to the next wave…"
                : "Promote past the inconclusive gate…",
            effect: a.effect,
            href: dashboardPath(a.action, a.target),
            danger: false,
            command: a.command,
          };
        default:
          return {
            action: a.action,
            target: a.target,
            label: a.action === "resolve" ? `Resolve the undo of ${words} (CLI)` : "Abandon (CLI)",
            effect: a.effect,
            href: null,
            danger: a.action === "abandon",
            command: a.command,
          };
      }
    });
}

function isClosed(r: Release): boolean {
  return r.state === "succeeded" || r.state === "rolled_back";
}

/** A lifecycle verb offered on a finished (or roll-forward-held) release; shaped as `Offer`. */
export interface LifecycleOffer extends Omit<Offer, "action"> {
  action: LifecycleVerb;
}

/**
 * The lifecycle verbs `r` accepts now (`lifecycleActions`, domain/lifecycle.ts), as offers:
 * rollback has a confirmation page (of a blue-green release it is the switch back, labelled
 * so); roll forward needs a fixed recipe (and its bundle), so its page explains the CLI
 * command. `o` as `lifecycleActions` takes it: the store's lookups (`rollbackTo` null: no
 * earlier release kept its recipe; `rollbackClosed`: the rollback window has closed;
 * `supersededBy`: a later release defines the lanes), each of which withdraws rollback.
 */
export function lifecycleOffers(r: Release, o: LifecycleLookups = {}): LifecycleOffer[] {
  return lifecycleActions(r, o).map((a) =>
    a.action === "rollback"
      ? {
          action: a.action,
          target: a.target,
          label: r.manifest.strategy === "blue_green" ? "Switch back…" : "Roll back…",
          effect: a.effect,
          href: dashboardPath(a.action, a.target),
          danger: true,
          command: a.command,
        }
      : {
          action: a.action,
          target: a.target,
          label: "Roll forward (CLI)…",
          effect: a.effect,
          href: dashboardPath(a.action, a.target),
          danger: false,
          command: a.command,
        },
  );
}

/**
 * What a rollback of succeeded `r` will do, lane by lane: a new release runs the previous
 * admitted manifest of the model again, so each lane goes back to `r`'s `previous_image`
 * (the image the lanes ran before `r`), and that release's undo restores `r`'s image. Of a
 * blue-green release it is the switch back (domain/blue-green.ts `switchBackPlan`,
 * `switchBackWords`): a health check of each old-environment lane, then one traffic write puts
 * every request on those lanes (`blueWeights`), still running the previous image, and the green
 * lanes keep running the candidate at 0%; nothing is redeployed.
 */
export function rollbackWords(r: Release): PlanWords {
  const m = r.manifest;
  if (m.strategy === "blue_green") {
    const blue = new Set(blueLanes(m));
    const back = blueWeights(m);
    return {
      heading: `Rolling back ${r.id} is ${switchBackWords(r.id, { lanes: [...blue], image: m.previous_image })}`,
      steps: [],
      lanes: m.lanes.map((l) => ({
        lane: l.id,
        steps: blue.has(l.id)
          ? [`warm on ${m.previous_image} at 0% now`, `carries ${back[l.id] ?? 0}% again`]
          : [`serves ${m.image} now`, `carries 0%, still running ${m.image} (warm)`],
      })),
      empty: `${r.id} names no lanes: nothing switches.`,
    };
  }
  return {
    heading: `A new release runs the previous admitted manifest of ${m.model} again; each lane goes back to the image it ran before ${r.id}`,
    steps: [],
    lanes: m.lanes.map((l) => ({
      lane: l.id,
      steps: [`runs ${m.image} now`, `runs ${m.previous_image} again`],
    })),
    empty: `${r.id} names no lanes: nothing goes back.`,
  };
}

/** Lane label of steps that concern no single lane (traffic writes of the whole model). */
const ALL_LANES = "traffic (all lanes)";

/** The planned steps in their order, each with its lane (never regrouped by lane). */
function inOrder(r: Release, steps: PlannedStep[]): PlanWords["steps"] {
  return steps.flatMap((p) => {
    const step = r.manifest.steps[p.index];
    return step
      ? [{ lane: p.lane ?? ALL_LANES, step: `${stepWords(step)} ${stepAction(step, p.direction)}` }]
      : [];
  });
}

/**
 * What taking `action` on `target` will do to `r`, in words and in the order the engine runs
 * it (`planOf`): the undo steps (abort, resolve, retry of an undo), the steps that run
 * (resume, retry), or for abandon the undo steps that will not run.
 */
export function planWords(r: Release, action: Offer["action"], target: string): PlanWords {
  const plan = planOf(r, { action, target });
  if (action === "abandon") {
    return {
      heading: "Will NOT be undone (their effect stays; you confirm what each lane runs)",
      steps: inOrder(r, plan.leftAsIs),
      lanes: [],
      empty: "Nothing is left to undo.",
    };
  }
  if (action === "confirm_restore") {
    return {
      heading: "Nothing runs",
      steps: [],
      lanes: [],
      empty: rollbackDone(r)
        ? `The rollback of ${r.lineage?.of} is done (traffic and images are back). Run ${r.lineage?.of}'s restore action first: ${r.restore?.action ?? "(none named)"}. Confirming records who ran it and what it showed; the rollback then ends succeeded and its lanes become free.`
        : `Compensation is done (traffic rolled back). Run the restore action first: ${r.restore?.action ?? "(none named)"}. Confirming records who ran it and what it showed; the release then ends rolled back and its lanes become free.`,
    };
  }
  if (action === "verify") {
    return {
      heading: "Nothing runs",
      steps: [],
      lanes: [],
      empty:
        "The engine reads every lane (the control plane, and the machines of the lanes a runner step touched) and records what it found against what each lane should be; nothing is written.",
    };
  }
  if (action === "pause") {
    return {
      heading: "In flight: these settle, then nothing new starts",
      steps: inOrder(r, plan.runs),
      lanes: [],
      empty: "Nothing is in flight: the release waits at once; nothing new starts until resume.",
    };
  }
  const undo = plan.runs.length > 0 && plan.runs.every((p) => p.direction === "bwd");
  return {
    heading: undo ? "Will be undone, in this order" : "Will run, in this order",
    steps: inOrder(r, plan.runs),
    lanes: [],
    empty:
      action === "abort"
        ? "Nothing took effect: the release ends aborted and nothing is undone."
        : "No further step runs: the release ends.",
  };
}
