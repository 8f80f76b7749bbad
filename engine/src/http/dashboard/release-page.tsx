/** @jsxImportSource hono/jsx */
/**
 * Release page: manifest summary, step table (forward and backward rows, attempts with
 * GitHub run links, durations, the high-water mark), the retry model panel and the history
 * timeline (newest first, paginated; refused events labelled with their reason).
 */

import { probCompleted } from "../../domain/markov.ts";
import { TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
import type { HistoryEntry, Release, StepRun } from "../../domain/types.ts";
import type { ReleaseRecord } from "../../service/api.ts";
import type { Role } from "./auth.ts";
import { awaitsRetry, duration, runLink, span, time } from "./format.ts";
import { historyLabel, readOnce, refusalReason } from "./history-label.ts";
import { Layout, State } from "./layout.tsx";
import { LIVE_SCRIPT, liveVersion } from "./live.ts";
import { MarkovPanel, type MarkovQuery, observedSuccessRate } from "./markov-panel.tsx";

/** History entries per timeline page. */
export const TIMELINE_PAGE = 100;

export interface ReleasePageProps {
  record: ReleaseRecord;
  role: Role;
  now: number;
  repository: string | undefined;
  /** Timeline offset from the newest event, and whether to show refused events only. */
  events: { offset: number; refusedOnly: boolean };
  model: MarkovQuery;
  notice?: { kind: "ok" | "bad"; text: string } | undefined;
}

function Attempts(props: { run: StepRun; repository: string | undefined }) {
  const { run } = props;
  if (run.kind === "control_plane") {
    return (
      <span class="muted">{`${run.tries} ${run.tries === 1 ? "try" : "tries"} (control plane)`}</span>
    );
  }
  if (run.attempts.length === 0) return <span class="muted">no attempt yet</span>;
  return (
    <ul style="margin:0;padding-left:1rem">
      {run.attempts.map((a) => {
        const href = runLink(props.repository, a.run_id, a.run_attempt);
        const label = `run ${a.run_id} · attempt ${a.run_attempt}`;
        return (
          <li>
            {`#${a.n} `}
            <State state={a.state} /> {href ? <a href={href}>{label}</a> : <span>{label}</span>}
            {a.callback_at ? (
              <span class="muted"> {duration(a.callback_at - a.preflight_at)}</span>
            ) : null}
          </li>
        );
      })}
    </ul>
  );
}

function RunRow(props: {
  index: number;
  name: string;
  lane: string | null;
  run: StepRun | undefined;
  direction: "forward" | "backward";
  repository: string | undefined;
  now: number;
  /** Chance of completing within the allowed attempts; null when nothing was observed. */
  chance: number | null;
}) {
  const { run } = props;
  return (
    <tr class={props.direction === "backward" ? "bwd" : undefined}>
      <td>{props.index}</td>
      <td>
        {props.name}
        {props.lane ? <span class="muted"> · {props.lane}</span> : null}
      </td>
      <td>{props.direction === "forward" ? "→ forward" : "← backward"}</td>
      <td>{run ? <State state={run.state} /> : <State state="planned" />}</td>
      <td>
        {run ? <Attempts run={run} repository={props.repository} /> : <span class="muted">—</span>}
      </td>
      <td>{run ? span(run.started_at, run.finished_at, props.now) : "—"}</td>
      <td>
        {run ? (
          <a href={`/step-runs/${run.id}`}>{run.id}</a>
        ) : (
          <span class="muted">not started</span>
        )}
      </td>
      <td>
        {props.direction === "forward" ? (
          <a
            href={`?model=${props.index}#retry-model`}
            title={
              props.chance === null
                ? "No attempt observed yet: open the retry model"
                : "Open this step in the retry model"
            }
          >
            {props.chance === null ? "model" : `${Math.round(props.chance * 100)} %`}
          </a>
        ) : null}
      </td>
    </tr>
  );
}

function HwmRow(props: { hwm: number }) {
  return (
    <tr class="hwm">
      <td colspan={8}>
        {props.hwm < 0
          ? "▼ high-water mark: none yet — no forward action has taken effect"
          : `▲ high-water mark: step ${props.hwm} — forward actions of steps 0 to ${props.hwm} may have taken effect; compensation starts here`}
      </td>
    </tr>
  );
}

function StepTable(props: { release: Release; repository: string | undefined; now: number }) {
  const r = props.release;
  const runs = new Map<string, StepRun>();
  for (const sr of r.step_runs) runs.set(`${sr.step_index}:${sr.direction}`, sr);
  const rows = [];
  if (r.high_water_mark < 0) rows.push(<HwmRow hwm={r.high_water_mark} />);
  for (const step of r.manifest.steps) {
    const fwd = runs.get(`${step.index}:fwd`);
    const bwd = runs.get(`${step.index}:bwd`);
    const p = observedSuccessRate(r, step.index);
    rows.push(
      <RunRow
        index={step.index}
        name={step.name}
        lane={step.lane}
        run={fwd}
        direction="forward"
        repository={props.repository}
        now={props.now}
        chance={p === null ? null : probCompleted(p, 0, step.retries + 1)}
      />,
    );
    if (bwd) {
      rows.push(
        <RunRow
          index={step.index}
          name={step.backward?.name ?? step.name}
          lane={step.lane}
          run={bwd}
          direction="backward"
          repository={props.repository}
          now={props.now}
          chance={null}
        />,
      );
    }
    if (step.index === r.high_water_mark) rows.push(<HwmRow hwm={r.high_water_mark} />);
  }
  return (
    <table>
      <caption>
        Step table: every step's forward run and, after a failure, its backward (compensating) run.
        Cursor at step {r.cursor}.
      </caption>
      <thead>
        <tr>
          <th scope="col">#</th>
          <th scope="col">Step</th>
          <th scope="col">Direction</th>
          <th scope="col">State</th>
          <th scope="col">Attempts</th>
          <th scope="col">Duration</th>
          <th scope="col">Step run</th>
          <th scope="col" title="Retry model: chance of completing within its allowed attempts">
            Completes (est.)
          </th>
        </tr>
      </thead>
      <tbody>{rows}</tbody>
    </table>
  );
}

/**
 * Why an event was refused, or `refused` when nothing says (kept for callers and tests; the
 * timeline uses `historyLabel`).
 */
export function reasonOf(e: HistoryEntry): string {
  return refusalReason(e) ?? "refused";
}

function Timeline(props: {
  id: string;
  history: HistoryEntry[];
  offset: number;
  refusedOnly: boolean;
}) {
  const all = props.refusedOnly
    ? props.history.filter((e) => e.outcome === "refused")
    : props.history;
  const total = all.length;
  const refusedCount = props.refusedOnly
    ? total
    : props.history.reduce((n, e) => n + (e.outcome === "refused" ? 1 : 0), 0);
  // Newest first: index 0 of the page is the newest event not yet shown.
  const end = Math.max(0, total - props.offset);
  const start = Math.max(0, end - TIMELINE_PAGE);
  const page = all.slice(start, end).reverse();
  const link = (offset: number, refused: boolean) => {
    const p = new URLSearchParams();
    if (offset > 0) p.set("ev", String(offset));
    if (refused) p.set("only", "refused");
    const s = p.toString();
    return `/releases/${props.id}${s ? `?${s}` : ""}#history`;
  };
  return (
    <section aria-labelledby="history">
      <h2 id="history">History</h2>
      <p class="muted small">
        {`${props.history.length} events, ${refusedCount} refused (late, duplicate, fenced or forged messages change nothing and are kept for the record). `}
        {props.refusedOnly ? (
          <a href={link(0, false)}>Show all events</a>
        ) : (
          <a href={link(0, true)}>Show refused events only</a>
        )}
      </p>
      <table>
        <caption>
          {total === 0
            ? "No events."
            : `Events ${total - end + 1}–${total - start} of ${total}, newest first`}
        </caption>
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Event</th>
            <th scope="col">Step run</th>
            <th scope="col">Outcome</th>
            <th scope="col">Message</th>
          </tr>
        </thead>
        <tbody>
          {page.map((e) => (
            <tr class={e.outcome === "refused" ? "refused" : undefined}>
              <td class="mono">{time(e.at)}</td>
              <td>{e.kind}</td>
              <td>
                {e.step_run_id ? <a href={`/step-runs/${e.step_run_id}`}>{e.step_run_id}</a> : "—"}
              </td>
              <td>
                {e.outcome === "refused" ? (
                  <strong class="st st-failed">{historyLabel(e)}</strong>
                ) : (
                  <span class="muted">accepted</span>
                )}
              </td>
              <td>{readOnce(e.message)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <nav class="pages" aria-label="History pages">
        {props.offset > 0 ? (
          <a href={link(Math.max(0, props.offset - TIMELINE_PAGE), props.refusedOnly)}>
            ← Newer events
          </a>
        ) : null}
        {start > 0 ? (
          <a href={link(props.offset + TIMELINE_PAGE, props.refusedOnly)}>Older events →</a>
        ) : null}
      </nav>
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
                  <td class="mono">{`${l.user}@${l.host}:${l.port}`}</td>
                  <td>{l.queue}</td>
                  <td>{w < 0 ? "—" : `${w} (traffic ${m.waves[w]!.traffic} %)`}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function Actions(props: { release: Release }) {
  const r = props.release;
  const canAbort = ["pending", "running", "paused"].includes(r.state);
  const waiting = r.step_runs.filter((s) => awaitsRetry(r.state, s));
  if (!canAbort && r.state !== "paused" && waiting.length === 0) return null;
  return (
    <nav class="bar" aria-label="Operator actions">
      {canAbort ? (
        <a class="btn danger" href={`/releases/${r.id}/abort`}>
          Abort release…
        </a>
      ) : null}
      {r.state === "paused" ? (
        <a class="btn" href={`/releases/${r.id}/resume`}>
          Resume release…
        </a>
      ) : null}
      {waiting.map((s) => (
        <a class="btn" href={`/step-runs/${s.id}/retry`}>{`Retry ${s.id}…`}</a>
      ))}
    </nav>
  );
}

/** The whole release page. */
export function ReleasePage(props: ReleasePageProps) {
  const r = props.record.release;
  const live = !TERMINAL_RELEASE_STATES.has(r.state);
  return (
    <Layout title={`Release ${r.id}`} role={props.role} refreshSeconds={live ? 10 : undefined}>
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
          </h1>
          {props.notice ? <p class={`notice ${props.notice.kind}`}>{props.notice.text}</p> : null}
          {r.reason ? <p class="notice bad">{readOnce(r.reason)}</p> : null}
          <p class="muted">
            {`${r.manifest.recipe_name} / ${r.manifest.model} · started ${time(r.created_at)} · `}
            {`${live ? "running for" : "took"} ${span(r.created_at, live ? null : r.updated_at, props.now)}`}
            {live ? " · this page updates itself" : ""}
          </p>
          <Actions release={r} />
        </div>
        <ManifestSummary release={r} />
        <h2 id="steps">Steps</h2>
        <div id="part-steps" data-part>
          <StepTable release={r} repository={props.repository} now={props.now} />
        </div>
        <MarkovPanel release={r} query={props.model} />
        <div id="part-history" data-part>
          <Timeline
            id={r.id}
            history={props.record.history}
            offset={props.events.offset}
            refusedOnly={props.events.refusedOnly}
          />
        </div>
      </div>
      {live ? <script dangerouslySetInnerHTML={{ __html: LIVE_SCRIPT }} /> : null}
    </Layout>
  );
}
