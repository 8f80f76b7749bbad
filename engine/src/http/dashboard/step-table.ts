/**
 * The release page's step table, grouped by wave: one row per step with its forward run and,
 * beside it, its backward (undo) run with their attempts, the high-water mark as a row, and each
 * step's chance of completing (the retry model). Numbers count from 1.
 *
 * Written with `markup` (every interpolated string escaped as JSX escapes it) rather than JSX:
 * a long release has hundreds of rows of a dozen elements each, and building and
 * walking a JSX node per element was most of the page's render time. The markup is what the
 * JSX gave, byte for byte.
 */
import { probCompleted } from "../../domain/markov.ts";
import type { ManifestStep, Release, StepRun } from "../../domain/types.ts";
import { duration, runLinks, span } from "../../views/format.ts";
import { stepAction } from "../../views/summary.ts";
import { stateHtml } from "./layout.tsx";
import { forwardRuns, observedRate } from "./markov-panel.tsx";
import { type Markup, markup } from "./markup.ts";

/** The step run states that end a step run badly (the row is marked `failing`). */
const BAD: ReadonlySet<string> = new Set(["failed", "unknown", "dispatch_failed"]);

/** Builds an attempt's GitHub run link (`runLinks`); null: no link. */
type Linker = ((runId: string, runAttempt: number) => string) | null;

/** A step run's attempts: its runner attempts with their GitHub run links, or its tries. */
function attemptsHtml(run: StepRun, link: Linker): Markup {
  if (run.kind === "control_plane") {
    return markup`<span class="muted">${`${run.tries} ${run.tries === 1 ? "try" : "tries"} (control plane)`}</span>`;
  }
  if (run.attempts.length === 0) return markup`<span class="muted">no attempt yet</span>`;
  return markup`<ul style="margin:0;padding-left:1rem">${run.attempts.map((a) => {
    const href = link?.(a.run_id, a.run_attempt);
    const label = `run ${a.run_id} · attempt ${a.run_attempt}`;
    return markup`<li>${`#${a.n} `}${stateHtml(a.state)} ${href ? markup`<a href="${href}">${label}</a>` : markup`<span>${label}</span>`}${a.callback_at ? markup`<span class="muted"> ${duration(a.callback_at - a.preflight_at)}</span>` : null}</li>`;
  })}</ul>`;
}

/** A step run's cell: its state, id (linked), time taken and, if asked, its attempts. */
function runCellHtml(
  run: StepRun | undefined,
  link: Linker,
  now: number,
  attempts: boolean,
): Markup {
  if (!run) return stateHtml("planned");
  return markup`${stateHtml(run.state)} <a href="${`/step-runs/${run.id}`}">${run.id}</a><span class="muted small"> ${span(run.started_at, run.finished_at, now)} </span>${attempts ? attemptsHtml(run, link) : null}`;
}

function hwmRowHtml(hwm: number): Markup {
  return markup`<tr class="hwm"><td colspan="5">${
    hwm < 0
      ? "▼ high-water mark: none yet — no forward action has taken effect"
      : `▲ high-water mark: step ${hwm + 1} — forward actions of steps 1 to ${hwm + 1} may have taken effect; undoing starts here`
  }</td></tr>`;
}

function stepRowHtml(
  step: ManifestStep,
  fwd: StepRun | undefined,
  bwd: StepRun | undefined,
  link: Linker,
  now: number,
): Markup {
  const p = observedRate(fwd);
  const chance = p === null ? null : probCompleted(p, 0, step.retries + 1);
  const bad = (s: StepRun | undefined) => s !== undefined && BAD.has(s.state);
  const cls = [bwd ? "bwd" : "", bad(fwd) || bad(bwd) ? "failing" : ""].join(" ").trim();
  const undo = bwd
    ? markup`${"← "}${runCellHtml(bwd, link, now, bwd.kind === "runner")}`
    : markup`<span class="muted small">${step.backward ? "—" : step.custom?.irreversible ? "irreversible" : "check only"}</span>`;
  const title =
    chance === null
      ? "No attempt observed yet: open the retry model"
      : "Open this step in the retry model";
  return markup`<tr${cls ? markup` class="${cls}"` : null} id="${`step-${step.index + 1}`}"><td>${String(step.index + 1)}</td><td>${stepAction(step)}<span class="muted small">${step.kind === "runner" ? " · runner" : " · control plane"}</span></td><td>${runCellHtml(fwd, link, now, true)}</td><td>${undo}</td><td class="wide"><a href="${`?model=${step.index}#retry-model`}" title="${title}">${chance === null ? "model" : `${Math.round(chance * 100)}%`}</a></td></tr>`;
}

/** The step table of `release` (see the module comment); `now` times the runs still going. */
export function stepTableHtml(
  release: Release,
  repository: string | undefined,
  now: number,
): Markup {
  const r = release;
  const m = r.manifest;
  const link = runLinks(repository);
  const fwds = forwardRuns(r);
  const bwds = new Map<number, StepRun>();
  for (const sr of r.step_runs) if (sr.direction === "bwd") bwds.set(sr.step_index, sr);
  const groups: { wave: number; rows: Markup[] }[] = [];
  if (r.high_water_mark < 0) groups.push({ wave: -1, rows: [hwmRowHtml(r.high_water_mark)] });
  for (const step of m.steps) {
    let g = groups.at(-1);
    if (!g || g.wave !== step.wave) {
      g = { wave: step.wave, rows: [] };
      groups.push(g);
    }
    g.rows.push(stepRowHtml(step, fwds.get(step.index), bwds.get(step.index), link, now));
    if (step.index === r.high_water_mark) g.rows.push(hwmRowHtml(r.high_water_mark));
  }
  const caption = `Steps by wave: each step's forward run and, beside it, its undo run. ${
    r.cursor >= 0 && r.cursor < m.steps.length
      ? `${r.state === "compensating" || r.state === "needs_operator" ? "Undoing at" : "At"} step ${r.cursor + 1} of ${m.steps.length}.`
      : `${m.steps.length} steps.`
  }`;
  return markup`<div class="scroll"><table class="steps"><caption>${caption}</caption><thead><tr><th scope="col">#</th><th scope="col">Step</th><th scope="col">→ Forward</th><th scope="col">← Undo</th><th scope="col" class="wide" title="Retry model: chance of completing within its allowed attempts">Completes (est.)</th></tr></thead>${groups.map(
    (g) => {
      const w = m.waves[g.wave];
      return markup`<tbody>${
        g.wave >= 0
          ? markup`<tr class="wave"><th colspan="5" scope="rowgroup">${
              w
                ? `Wave ${g.wave + 1} · lanes ${w.lanes.join(", ")} · traffic ${w.traffic}%`
                : `Wave ${g.wave + 1}`
            }</th></tr>`
          : null
      }${g.rows}</tbody>`;
    },
  )}</table></div>`;
}
