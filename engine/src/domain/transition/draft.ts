/**
 * The working copy of one transition: a deep copy of the release that handlers change in
 * place, plus the effects, history and reply they produce. The input release is never
 * touched (it may be frozen); `transition.ts` turns a draft into a `TransitionResult`.
 */
import { stepRunId } from "../../protocol/ids.ts";
import type { Direction } from "../states.ts";
import type {
  Effect,
  HistoryEntry,
  Json,
  ManifestStep,
  Release,
  ReleaseEvent,
  StepAction,
  StepRun,
} from "../types.ts";

/** A refusal produced by a handler: HTTP status, a stable code and one sentence. */
export interface Refusal {
  status: 404 | 409 | 422;
  code: string;
  reason: string;
}

export class Draft {
  /** Deep copy of the input release; handlers change this one only. */
  readonly release: Release;
  readonly effects: Effect[] = [];
  readonly history: HistoryEntry[] = [];
  reply: Record<string, Json> = {};
  /** Set by `accept`: the release changed and must be written. */
  changed = false;

  constructor(
    readonly original: Readonly<Release>,
    readonly event: ReleaseEvent,
    readonly now: number,
  ) {
    // The manifest is immutable and never written by a handler, so it is shared; everything
    // else is deep-copied (the input may be deep-frozen, and a handler writes nested objects:
    // `restore.confirmed`, the gate's seq and decision). A shallow copy let a probe of
    // availableActions write its placeholder into the caller's release.
    const { manifest, ...rest } = original;
    this.release = { ...structuredClone(rest), manifest } as Release;
  }

  /** Records an accepted change; `message` must start with `[engine]`. */
  accept(message: string, stepRunId: string | null = null, data: Json = {}): void {
    this.changed = true;
    this.note("accepted", message, stepRunId, data);
  }

  /** Records an event that changed nothing (duplicate, late, stale deadline). */
  ignore(message: string, stepRunId: string | null = null): void {
    this.note("refused", message, stepRunId, eventData(this.event));
  }

  emit(effect: Effect): void {
    this.effects.push(effect);
  }

  private note(
    outcome: HistoryEntry["outcome"],
    message: string,
    stepRunId: string | null,
    data: Json,
  ): void {
    const first = this.history.length === 0;
    this.history.push({
      release_id: this.release.id,
      at: this.now,
      kind: first ? this.event.type : "transition",
      step_run_id: stepRunId,
      outcome,
      message,
      data: first && outcome === "accepted" ? mergeData(eventData(this.event), data) : data,
    });
  }
}

/** The event as history data (events are plain JSON by construction). */
export function eventData(event: ReleaseEvent): Json {
  return event as unknown as Json;
}

function mergeData(a: Json, b: Json): Json {
  if (b && typeof b === "object" && !Array.isArray(b) && Object.keys(b).length > 0) {
    return { event: a, ...b };
  }
  return a;
}

/** Number part of a release id: `r17` -> 17. */
export function releaseNumber(release: Pick<Release, "id">): number {
  return Number(release.id.slice(1));
}

/** `{release}:{step}:{fwd|bwd}:{target}` (docs/glossary.md operation key). */
export function operationKey(release: Pick<Release, "id">, step: ManifestStep, dir: Direction) {
  const action = dir === "fwd" ? step.forward : step.backward;
  return `${release.id}:${step.index}:${dir}:${action?.target ?? "none"}`;
}

export function stepRunIdOf(release: Pick<Release, "id">, index: number, dir: Direction): string {
  return stepRunId(releaseNumber(release), index, dir === "bwd");
}

export function findStepRun(release: Release, id: string): StepRun | undefined {
  return release.step_runs.find((sr) => sr.id === id);
}

export function stepRunAt(release: Release, index: number, dir: Direction): StepRun | undefined {
  return release.step_runs.find((sr) => sr.step_index === index && sr.direction === dir);
}

export function stepOf(release: Release, sr: StepRun): ManifestStep {
  const step = release.manifest.steps[sr.step_index];
  if (!step)
    throw new Error(
      `[engine] step run ${sr.id} names step ${sr.step_index + 1}, not in the manifest`,
    );
  return step;
}

/** The action a step run performs (forward or backward). */
export function actionOf(release: Release, sr: StepRun): StepAction {
  const step = stepOf(release, sr);
  const action = sr.direction === "fwd" ? step.forward : step.backward;
  if (!action) throw new Error(`[engine] step ${step.index + 1} has no backward action`);
  return action;
}

/**
 * Words for a step run in messages, e.g. `step 4 set_traffic, forward (step run sr_17_3_f)`:
 * the step number people read comes first (index + 1, as the dashboard and CLI show it); the
 * id, a wire format that keeps the 0-based index, only follows in brackets.
 */
export function describe(release: Release, sr: StepRun): string {
  const action = actionOf(release, sr);
  const dir = sr.direction === "fwd" ? "forward" : "backward";
  return `step ${sr.step_index + 1} ${action.name}, ${dir} (step run ${sr.id})`;
}
