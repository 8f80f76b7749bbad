/** @jsxImportSource hono/jsx */
/**
 * The retry model panel (engine/src/domain/markov.ts): for one step of a release, the chance
 * that it completes within t attempts, with p defaulting to the step's observed per-attempt
 * success rate and q to 0. Server-rendered for reading without JavaScript (a GET form
 * recomputes); a tiny inline script adds Step / Play (2 steps/s) / Pause / Reset.
 */
import { behaviourWords, fmt, probCompleted, stationary } from "../../domain/markov.ts";
import type { Release, StepRun } from "../../domain/types.ts";
import { MARKOV_SCRIPT } from "./markov-script.ts";

/** Parameters from the page's query (`model`, `mp`, `mq`, `mt`); unset = defaults. */
export interface MarkovQuery {
  step?: number | undefined;
  p?: number | undefined;
  q?: number | undefined;
  t?: number | undefined;
}

/** Values of t shown in the panel's table. */
const TABLE_T = [0, 1, 2, 3, 4, 5, 6, 8, 10];

/**
 * Observed attempts of a step's forward step run in this release: runner attempts that ended
 * (a fenced attempt counts as a try that did not complete the step), or control-plane tries
 * (the last one succeeded when the step run did).
 */
export function observedAttempts(r: Release, stepIndex: number): { ok: number; total: number } {
  return attemptsOf(r.step_runs.find((s) => s.step_index === stepIndex && s.direction === "fwd"));
}

/** `observedAttempts` of one forward step run (none: nothing observed). */
function attemptsOf(run: StepRun | undefined): { ok: number; total: number } {
  if (!run) return { ok: 0, total: 0 };
  if (run.kind === "runner") {
    const ended = run.attempts.filter((a) => a.state !== "running");
    return { ok: ended.filter((a) => a.state === "succeeded").length, total: ended.length };
  }
  const done = ["succeeded", "failed", "unknown"].includes(run.state);
  if (!done) return { ok: 0, total: 0 };
  return { ok: run.state === "succeeded" ? 1 : 0, total: Math.max(run.tries, 1) };
}

/** Observed per-attempt success rate of a step in [0, 1]; null when nothing was observed. */
export function observedSuccessRate(r: Release, stepIndex: number): number | null {
  return observedRate(r.step_runs.find((s) => s.step_index === stepIndex && s.direction === "fwd"));
}

/** `observedSuccessRate` of the step whose forward step run is `run` (none: null). */
export function observedRate(run: StepRun | undefined): number | null {
  const o = attemptsOf(run);
  return o.total === 0 ? null : o.ok / o.total;
}

/**
 * Each step's forward step run by step index, looked up once per page instead of searched
 * for per step.
 */
export function forwardRuns(r: Release): Map<number, StepRun> {
  const out = new Map<number, StepRun>();
  for (const sr of r.step_runs) {
    if (sr.direction === "fwd" && !out.has(sr.step_index)) out.set(sr.step_index, sr);
  }
  return out;
}

function defaultStep(r: Release): number {
  const stuck = r.step_runs.find(
    (s) => s.direction === "fwd" && ["failed", "unknown", "dispatch_failed"].includes(s.state),
  );
  if (stuck) return stuck.step_index;
  return Math.min(Math.max(r.cursor, 0), Math.max(r.manifest.steps.length - 1, 0));
}

const prob = (v: number | undefined) => (v !== undefined && v >= 0 && v <= 1 ? v : undefined);

/** The panel for `release`; `query` may pick the step and override p, q and t. */
export function MarkovPanel(props: { release: Release; query: MarkovQuery }) {
  const r = props.release;
  const steps = r.manifest.steps;
  if (steps.length === 0) return null;
  const qs = props.query.step;
  const stepIndex = qs !== undefined && qs >= 0 && qs < steps.length ? qs : defaultStep(r);
  const fwds = forwardRuns(r);
  const observed = attemptsOf(fwds.get(stepIndex));
  const pDefault = observed.total === 0 ? 0.5 : observed.ok / observed.total;
  const p = prob(props.query.p) ?? pDefault;
  const q = prob(props.query.q) ?? 0;
  const tq = props.query.t;
  const t = tq !== undefined && Number.isInteger(tq) && tq >= 0 && tq <= 10_000 ? tq : 0;
  const st = stationary(p, q);
  const step = steps[stepIndex]!;
  return (
    <section
      id="retry-model"
      class="panel"
      aria-labelledby="retry-model-h"
      data-p0={String(pDefault)}
      data-q0="0"
    >
      <h2 id="retry-model-h">Retry model: a liveness estimate</h2>
      <p class="small">
        A two-state Markov chain: state 0 “not completed”, state 1 “completed”; p = P(0→1) per
        attempt, q = P(1→0); it starts with all probability in state 0. With q = 0 it reads as “the
        chance this step completes within t attempts”.{" "}
        <strong>
          It is a liveness estimate only: it says nothing about whether an unsafe intermediate state
          was reached.
        </strong>
      </p>
      <form method="get" action={`/releases/${r.id}#retry-model`} class="bar">
        <label for="mk-step">Step</label>
        <select id="mk-step" name="model">
          {steps.map((s) => {
            const rate = observedRate(fwds.get(s.index));
            return (
              <option
                value={String(s.index)}
                selected={s.index === stepIndex}
                data-p={String(rate ?? 0.5)}
              >
                {`${s.index + 1} ${s.name}${s.lane ? ` (${s.lane})` : ""}`}
              </option>
            );
          })}
        </select>
        <label for="mk-p">p, P(0→1) per attempt</label>
        <input id="mk-p" name="mp" type="number" min="0" max="1" step="any" value={fmt(p)} />
        <label for="mk-q">q, P(1→0)</label>
        <input id="mk-q" name="mq" type="number" min="0" max="1" step="any" value={fmt(q)} />
        <label for="mk-t">t, steps</label>
        <input id="mk-t" name="mt" type="number" min="0" max="10000" step="1" value={String(t)} />
        <button type="submit">Compute</button>
      </form>
      <fieldset class="bar" data-mk-controls hidden>
        <legend class="small muted">Playback</legend>
        <button type="button" data-mk="step" aria-label="Step: advance one attempt">
          Step
        </button>
        <button type="button" data-mk="play" aria-label="Play: two steps a second">
          Play
        </button>
        <button type="button" data-mk="pause" aria-label="Pause playback">
          Pause
        </button>
        <button type="button" data-mk="reset" aria-label="Reset: default p and q, time 0">
          Reset
        </button>
      </fieldset>
      <dl class="kv">
        <dt>Step</dt>
        <dd>{`${step.index + 1} ${step.name}${step.lane ? ` (${step.lane})` : ""}, ${step.retries} retries allowed`}</dd>
        <dt>Default p</dt>
        <dd>
          {observed.total === 0
            ? "no attempt observed yet: 0.5 assumed"
            : `observed per-attempt success rate: ${observed.ok} of ${observed.total} = ${fmt(pDefault)}`}
        </dd>
        <dt>After t steps</dt>
        <dd>
          <output
            id="mk-out-t"
            aria-live="polite"
          >{`P(completed after ${t} steps) = ${fmt(probCompleted(p, q, t))}`}</output>
        </dd>
        <dt>Stationary</dt>
        <dd>
          <output id="mk-out-s">
            {st === null ? "every distribution is stationary (p = q = 0)" : `p/(p+q) = ${fmt(st)}`}
          </output>
        </dd>
        <dt>Behaviour</dt>
        <dd>
          <output id="mk-out-b">{behaviourWords(p, q)}</output>
        </dd>
      </dl>
      <table class="small" style="width:auto;margin-top:.6rem">
        <caption>Probability of “completed” after t steps</caption>
        <thead>
          <tr>
            <th scope="row">t</th>
            {TABLE_T.map((x) => (
              <th scope="col">{String(x)}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          <tr id="mk-row">
            <th scope="row">P</th>
            {TABLE_T.map((x) => (
              <td>{fmt(probCompleted(p, q, x))}</td>
            ))}
          </tr>
        </tbody>
      </table>
      <script dangerouslySetInnerHTML={{ __html: MARKOV_SCRIPT }} />
    </section>
  );
}
