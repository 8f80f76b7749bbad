/**
 * The working copy of one transition: a copy of the release that handlers change in place
 * (deep for every part they may write, `draftCopy`), plus the effects, history and reply they
 * produce. The input release is never touched (it may be frozen); `transition.ts` turns a
 * draft into a `TransitionResult`.
 */
import { stepRunId } from "../../protocol/ids.ts";
import { conformanceOf, pairWords } from "../conformance.ts";
import type { Problem } from "../errors.ts";
import { restoreIndex, restoreStepOf } from "../restore-state.ts";
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
import { countDeepCopy, countingWork } from "../work-counts.ts";

/** A refusal produced by a handler: HTTP status, a stable code and one sentence. */
export interface Refusal {
  status: 404 | 409 | 422;
  code: string;
  reason: string;
  /** The bad fields of the request, each with its fix (a 422's `problems`). */
  problems?: Problem[];
}

export class Draft {
  /** Copy of the input release (`draftCopy`); handlers change this one only. */
  readonly release: Release;
  readonly effects: Effect[] = [];
  readonly history: HistoryEntry[] = [];
  reply: Record<string, Json> = {};
  /** Set by `accept`: the release changed and must be written. */
  changed = false;

  /**
   * `inPlace`: handlers work on `original` itself, which must then be a deep-frozen probe copy
   * (`frozenProbeCopy`): the first write into it throws a `TypeError` (exits.ts `Probe`).
   */
  constructor(
    readonly original: Readonly<Release>,
    readonly event: ReleaseEvent,
    readonly now: number,
    inPlace = false,
  ) {
    this.release = inPlace ? (original as Release) : draftCopy(original);
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

/**
 * Parts of a release no handler writes into, neither in place nor nested: the draft shares
 * them with the input instead of copying them. The manifest (~20 KB) is immutable; the observed
 * baseline, the admission report and the lineage are set when the release is created and only
 * read afterwards. `transition.purity.test.ts` runs the transitions on deep-frozen releases,
 * so a handler that wrote into a shared part would throw there.
 */
const SHARED: ReadonlySet<string> = new Set(["manifest", "baseline", "admission", "lineage"]);

/**
 * The draft's working copy of `original`: every part a handler may write (step runs and their
 * attempts, the gate, holds, restore, prerequisites…) deep-copied, the `SHARED` parts shared;
 * keys in the input's order with the manifest last. A hand-written copy of plain JSON data:
 * `structuredClone` (a serialise and deserialise through V8's value serializer) cost several
 * times as much for the same release.
 */
function draftCopy(original: Readonly<Release>): Release {
  const out: Record<string, unknown> = {};
  const count = { nodes: 1 };
  for (const k of Object.keys(original)) {
    if (k === "manifest") continue;
    const v = (original as unknown as Record<string, unknown>)[k];
    out[k] = SHARED.has(k) ? v : copyJson(v, count);
  }
  out.manifest = original.manifest;
  if (countingWork()) countDeepCopy(count.nodes);
  return out as unknown as Release;
}

/**
 * A copy of `release` for probing (`Draft` with `inPlace`): the draft's copy with every copied
 * part deep-frozen, so a handler's first write into it throws instead of changing it. The
 * `SHARED` parts stay the caller's, unfrozen (handlers never write into them, as with any draft).
 */
export function frozenProbeCopy(release: Readonly<Release>): Readonly<Release> {
  const copy = draftCopy(release) as unknown as Record<string, unknown>;
  for (const k of Object.keys(copy)) if (!SHARED.has(k)) deepFreeze(copy[k]);
  return Object.freeze(copy) as unknown as Release;
}

function deepFreeze(v: unknown): void {
  if (v === null || typeof v !== "object") return;
  Object.freeze(v);
  for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
}

/** A deep copy of plain JSON data (objects, arrays, primitives); counts what it allocates. */
function copyJson(v: unknown, count: { nodes: number }): unknown {
  if (v === null || typeof v !== "object") return v;
  count.nodes++;
  if (Array.isArray(v)) {
    const a = new Array(v.length);
    for (let i = 0; i < v.length; i++) a[i] = copyJson(v[i], count);
    return a;
  }
  const o: Record<string, unknown> = {};
  for (const k of Object.keys(v)) o[k] = copyJson((v as Record<string, unknown>)[k], count);
  return o;
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

/**
 * The row at `index`: the step table's, or one past it the restore step of a recipe that
 * declares `restore_state` (domain/restore-state.ts). Undefined otherwise.
 */
export function stepAt(release: Release, index: number): ManifestStep | undefined {
  return (
    release.manifest.steps[index] ??
    (index === restoreIndex(release) ? restoreStepOf(release) : undefined)
  );
}

export function stepOf(release: Release, sr: StepRun): ManifestStep {
  const step = stepAt(release, sr.step_index);
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
 * id, a wire format that keeps the 0-based index, only follows in brackets. A conformance step
 * adds its check: `step 1 assert_conformance_passed \`old-reader-new-writer\` (old reader × new
 * writer), forward (…)`.
 */
export function describe(release: Release, sr: StepRun): string {
  const action = actionOf(release, sr);
  const dir = sr.direction === "fwd" ? "forward" : "backward";
  // A conformance step names its check and pair in every history line about it.
  const c = conformanceOf(stepOf(release, sr));
  const what = c ? ` \`${c.name}\` (${pairWords(c)})` : "";
  return `step ${sr.step_index + 1} ${action.name}${what}, ${dir} (step run ${sr.id})`;
}
