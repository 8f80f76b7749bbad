/** @jsxImportSource hono/jsx */
/**
 * Release page. First screen (first-screen.tsx): state and why, the accepted actions with what
 * each does, the failed step with its failing check and evidence, undo and live-now. Below:
 * each gated wave's evidence (gate-panel.tsx: decision, reason, counts per arm, SRM, bounds
 * over time as SVG), the step table by wave (forward and undo runs side by side, attempts with GitHub run links,
 * the high-water mark), the history (newest first, paginated, filterable; refused events
 * hidden by default, operator decisions marked), the manifest, and the retry model folded.
 */

import { currentDependencyDrift } from "../../domain/dependency-drift.ts";
import { driftedValues } from "../../domain/drift.ts";
import { currentDrillDue } from "../../domain/drills.ts";
import { type LifecycleLookups, lifecycleNote } from "../../domain/lifecycle.ts";
import { TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
import type { HistoryEntry, Release } from "../../domain/types.ts";
import type { ReleaseRecord } from "../../service/api.ts";
import { currentDrift, type ModelDrift } from "../../service/drift.ts";
import { span, time } from "../../views/format.ts";
import {
  historyLabel,
  housekeepingLine,
  isHousekeeping,
  readOnce,
  refusalReason,
} from "../../views/history-label.ts";
import { lifecycleOffers, offers } from "../../views/offers.ts";
import { OPERATOR_EVENTS, summarize } from "../../views/summary.ts";
import type { Role } from "./auth.ts";
import { DependencyDriftBanner } from "./dependency-drift.tsx";
import { DrillDueBanner } from "./drill-due.tsx";
import { FirstScreen } from "./first-screen.tsx";
import { GatePanel } from "./gate-panel.tsx";
import { Layout, State } from "./layout.tsx";
import { LIVE_SCRIPT, liveVersion } from "./live.ts";
import { MarkovPanel, type MarkovQuery } from "./markov-panel.tsx";
import { type Markup, markup, toHtml } from "./markup.ts";
import { OldEnvironmentPanel } from "./old-environment.tsx";
import { stepTableHtml } from "./step-table.ts";

/** History entries per timeline page. */
export const TIMELINE_PAGE = 100;

export interface ReleasePageProps {
  record: ReleaseRecord;
  role: Role;
  /** The signed-in person (their own token), named in the header. */
  person?: string | null;
  now: number;
  repository: string | undefined;
  /** Timeline offset from the newest event, and which events to show. */
  events: { offset: number; filter: HistoryFilter };
  model: MarkovQuery;
  notice?: { kind: "ok" | "bad"; text: string } | undefined;
  /**
   * The engine's lifecycle lookups of the release (`ReleaseApi.lifecycleLookups`): what a
   * rollback would run again, a later release that replaced it, a closed rollback window, a
   * blue-green release's old environment. Absent: the lifecycle verbs by state alone.
   */
  lifecycle?: LifecycleLookups | undefined;
}

/**
 * Why an event was refused, or `refused` when nothing says (kept for callers and tests; the
 * timeline uses `historyLabel`).
 */
export function reasonOf(e: HistoryEntry): string {
  return refusalReason(e) ?? "refused";
}

/**
 * History filters: `main` (the default) hides the engine's housekeeping refusals (late,
 * duplicate or fenced messages it refused for itself) but never an operator's refused action,
 * `decisions` shows only operators', `gates` only the gate's evaluations (each names its
 * decision).
 */
export type HistoryFilter = "main" | "all" | "refused" | "decisions" | "gates";
export const HISTORY_FILTERS: readonly HistoryFilter[] = [
  "main",
  "all",
  "refused",
  "decisions",
  "gates",
];

function keep(e: HistoryEntry, f: HistoryFilter): boolean {
  if (f === "all") return true;
  if (f === "refused") return e.outcome === "refused";
  if (f === "decisions") return e.outcome === "accepted" && OPERATOR_EVENTS.has(e.kind);
  if (f === "gates") return e.kind === "gate";
  return !isHousekeeping(e);
}

const FILTER_WORDS: Record<HistoryFilter, string> = {
  main: "Accepted",
  all: "All",
  refused: "Refused only",
  decisions: "Operator decisions",
  gates: "Gate decisions",
};

/**
 * One history entry as a timeline row (written with `markup`: a page holds a hundred rows).
 * Housekeeping refusals are marked as changing nothing, operator decisions stand out.
 */
function historyRowHtml(e: HistoryEntry): Markup {
  const decision = e.outcome === "accepted" && OPERATOR_EVENTS.has(e.kind);
  const chore = isHousekeeping(e);
  const cls = chore ? "housekeeping" : e.outcome === "refused" ? "refused" : decision ? "op" : null;
  const event = decision
    ? markup`<strong>${`operator ${e.kind}`}</strong>`
    : chore
      ? `engine housekeeping: ${e.kind}`
      : e.kind;
  const run = e.step_run_id
    ? markup`<a href="${`/step-runs/${e.step_run_id}`}">${e.step_run_id}</a>`
    : "—";
  const outcome = chore
    ? markup`<span class="muted">${`${historyLabel(e)} (changed nothing)`}</span>`
    : e.outcome === "refused"
      ? markup`<strong class="st st-failed">${historyLabel(e)}</strong>`
      : markup`<span class="muted">accepted</span>`;
  const message = chore
    ? markup`${housekeepingLine(e)}<span class="muted small">${` — ${readOnce(e.message)}`}</span>`
    : readOnce(e.message);
  return markup`<tr${cls ? markup` class="${cls}"` : null}><td class="mono">${time(e.at).slice(11)}</td><td>${event}</td><td class="wide">${run}</td><td class="wide">${outcome}</td><td class="wrap">${message}</td></tr>`;
}

function Timeline(props: {
  id: string;
  history: HistoryEntry[];
  offset: number;
  filter: HistoryFilter;
}) {
  const all = props.history.filter((e) => keep(e, props.filter));
  const total = all.length;
  const refusedCount = props.history.reduce((n, e) => n + (e.outcome === "refused" ? 1 : 0), 0);
  const housekeeping = props.history.reduce((n, e) => n + (isHousekeeping(e) ? 1 : 0), 0);
  const operatorRefused = refusedCount - housekeeping;
  // Newest first: index 0 of the page is the newest event not yet shown.
  const end = Math.max(0, total - props.offset);
  const start = Math.max(0, end - TIMELINE_PAGE);
  const page = all.slice(start, end).reverse();
  const link = (offset: number, filter: HistoryFilter) => {
    const p = new URLSearchParams();
    if (offset > 0) p.set("ev", String(offset));
    if (filter !== "main") p.set("only", filter);
    const s = p.toString();
    return `/releases/${props.id}${s ? `?${s}` : ""}#history`;
  };
  return (
    <section aria-labelledby="history">
      <h2 id="history">History</h2>
      <p class="muted small">
        {`${props.history.length} events, ${refusedCount} refused: ${housekeeping} by the engine's own housekeeping (late, duplicate, fenced or forged messages from runners and its own timers; they change nothing and are kept for the record)${operatorRefused > 0 ? `, ${operatorRefused} ${operatorRefused === 1 ? "operator action" : "operator actions"} (shown)` : ""}`}
        {props.filter === "main" && housekeeping > 0
          ? "; the housekeeping refused events are hidden. "
          : ". "}
      </p>
      <nav class="filters small" aria-label="History filter">
        {HISTORY_FILTERS.map((f) =>
          f === props.filter ? (
            <strong aria-current="true">{FILTER_WORDS[f]}</strong>
          ) : (
            <a href={link(0, f)}>{FILTER_WORDS[f]}</a>
          ),
        )}
      </nav>
      <div class="scroll">
        <table class="history">
          <caption>
            {total === 0
              ? "No events."
              : `Events ${total - end + 1}–${total - start} of ${total}, newest first`}
          </caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Event</th>
              <th scope="col" class="wide">
                Step run
              </th>
              <th scope="col" class="wide">
                Outcome
              </th>
              <th scope="col">Message</th>
            </tr>
          </thead>
          <tbody>{toHtml(markup`${page.map((e) => historyRowHtml(e))}`)}</tbody>
        </table>
      </div>
      <nav class="pages" aria-label="History pages">
        {props.offset > 0 ? (
          <a href={link(Math.max(0, props.offset - TIMELINE_PAGE), props.filter)}>← Newer events</a>
        ) : null}
        {start > 0 ? (
          <a href={link(props.offset + TIMELINE_PAGE, props.filter)}>Older events →</a>
        ) : null}
      </nav>
    </section>
  );
}

const shown = (v: unknown): string => (v === undefined ? "—" : JSON.stringify(v));

/**
 * The drift banner: shown while the release's history has a current drift (`currentDrift`,
 * service/drift.ts), lane by lane with each differing field's desired and observed values.
 */
export function DriftBanner(props: { drift: ModelDrift | null }) {
  const d = props.drift;
  if (!d) return null;
  return (
    <section class="panel bad" id="drift" role="alert" aria-labelledby="drift-h">
      <h2 id="drift-h">
        {`Drift: model ${d.model}'s lanes differ from what its last releases left them at (since ${time(d.observed_at)})`}
      </h2>
      {d.lanes.length > 0 ? (
        <div class="scroll">
          <table class="compact">
            <thead>
              <tr>
                <th scope="col">Lane</th>
                <th scope="col">Field</th>
                <th scope="col">Desired</th>
                <th scope="col">Observed</th>
              </tr>
            </thead>
            <tbody>
              {d.lanes.flatMap((l) =>
                driftedValues(l).map((v) => (
                  <tr>
                    <th scope="row">{l.id}</th>
                    <td>{v.field}</td>
                    <td class="mono wrap">{shown(v.desired)}</td>
                    <td class="mono wrap">{shown(v.observed)}</td>
                  </tr>
                )),
              )}
            </tbody>
          </table>
        </div>
      ) : null}
      {d.mixed ? (
        <p>
          {`Mixed versions outside a release: ${d.images.map((i) => `${i.ref} on ${i.lanes.join(", ")}`).join("; ")}`}
        </p>
      ) : null}
    </section>
  );
}

function ManifestSummary(props: { release: Release }) {
  const r = props.release;
  const m = r.manifest;
  return (
    <section aria-labelledby="manifest" class="cols">
      <div>
        <h2 id="manifest">Manifest</h2>
        <dl class="kv">
          <dt>Recipe</dt>
          <dd>{m.recipe_name}</dd>
          <dt>Model</dt>
          <dd>{m.model}</dd>
          <dt>Image</dt>
          <dd class="mono">{m.image}</dd>
          <dt>Previous image</dt>
          <dd class="mono">{m.previous_image}</dd>
          <dt>Manifest digest</dt>
          <dd class="mono">{r.manifest_digest}</dd>
          <dt>Tool revision</dt>
          <dd class="mono">{m.tool_revision ?? "not pinned"}</dd>
          <dt>Generation</dt>
          <dd>{r.generation}</dd>
        </dl>
      </div>
      <div>
        <h2 id="lanes">Lanes and waves</h2>
        <table>
          <caption>{`${m.lanes.length} lanes, ${m.waves.length} waves`}</caption>
          <thead>
            <tr>
              <th scope="col">Lane</th>
              <th scope="col">Host</th>
              <th scope="col">Queue</th>
              <th scope="col">Wave</th>
            </tr>
          </thead>
          <tbody>
            {m.lanes.map((l) => {
              const w = m.waves.findIndex((x) => x.lanes.includes(l.id));
              return (
                <tr>
                  <td>{l.id}</td>
                  <td class="mono wrap">{`${l.user}@${l.host}:${l.port}`}</td>
                  <td>{l.queue}</td>
                  <td>{w < 0 ? "—" : `${w + 1} (traffic ${m.waves[w]!.traffic}%)`}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </section>
  );
}

/** The whole release page. */
export function ReleasePage(props: ReleasePageProps) {
  const r = props.record.release;
  const live = !TERMINAL_RELEASE_STATES.has(r.state);
  const facts = summarize(r, props.record.history, props.record.attempt_results);
  const lifecycle = lifecycleOffers(r, props.lifecycle);
  return (
    <Layout
      title={`Release ${r.id}`}
      role={props.role}
      person={props.person ?? null}
      refreshSeconds={live ? 10 : undefined}
    >
      <div
        id="live"
        data-release={r.id}
        data-version={liveVersion(props.record)}
        data-live={live ? "1" : "0"}
      >
        <div id="part-head" data-part>
          <h1>
            {`Release ${r.id} `}
            <span role="status" aria-live="polite">
              <State state={r.state} />
            </span>
            <span class="sub">
              {`${r.manifest.recipe_name} · ${r.manifest.model} · started ${time(r.created_at)} · ${live ? "running for" : "took"} ${span(r.created_at, live ? null : r.updated_at, props.now)}`}
            </span>
          </h1>
          {props.notice ? <p class={`notice ${props.notice.kind}`}>{props.notice.text}</p> : null}
          <DriftBanner drift={currentDrift(props.record.history)} />
          <DependencyDriftBanner drift={currentDependencyDrift(props.record.history)} />
          <DrillDueBanner due={currentDrillDue(props.record.history)} />
          <FirstScreen release={r} facts={facts} offers={[...offers(r), ...lifecycle]} />
          <OldEnvironmentPanel
            releaseId={r.id}
            env={props.lifecycle?.oldEnvironment}
            offer={lifecycle.find((o) => o.action === "rollback")}
            note={lifecycleNote(r, props.lifecycle)}
          />
        </div>
        <div id="part-gates" data-part>
          <GatePanel
            release={r}
            evidence={props.record.gate_evidence ?? []}
            history={props.record.history}
          />
        </div>
        <h2 id="steps">Steps</h2>
        <div id="part-steps" data-part>
          {toHtml(stepTableHtml(r, props.repository, props.now))}
        </div>
        <div id="part-history" data-part>
          <Timeline
            id={r.id}
            history={props.record.history}
            offset={props.events.offset}
            filter={props.events.filter}
          />
        </div>
        <ManifestSummary release={r} />
        <details class="panel" id="retry-model-box" open={props.model.step !== undefined}>
          <summary>Retry model: the chance each step completes within its allowed attempts</summary>
          <MarkovPanel release={r} query={props.model} />
        </details>
      </div>
      {live ? <script dangerouslySetInnerHTML={{ __html: LIVE_SCRIPT }} /> : null}
    </Layout>
  );
}
