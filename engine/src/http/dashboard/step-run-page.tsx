/** @jsxImportSource hono/jsx */
/**
 * Step-run page: what the step run did, its attempts with GitHub run links, and for one
 * attempt the `checks.json` table (failing checks first), the log tail with a download of the
 * full stored log, the raw callback and the preflight record.
 */

import { availableActions } from "../../domain/transition/exits.ts";
import type { Release, StepRun } from "../../domain/types.ts";
import { visible } from "../../domain/visible-text.ts";
import type { AttemptResult } from "../../ports/store.ts";
import { checkRows, prettyJson, runLink, span, tail, time } from "../../views/format.ts";
import type { Role } from "./auth.ts";
import { Layout, State } from "./layout.tsx";

/** Lines of the log shown on the page; the download has all of it. */
export const LOG_TAIL_LINES = 200;

export interface StepRunPageProps {
  release: Release;
  run: StepRun;
  results: AttemptResult[];
  /** Attempt asked for with `?attempt=`, if any. */
  attempt: number | undefined;
  role: Role;
  /** The signed-in person (their own token), named in the header. */
  person?: string | null;
  repository: string | undefined;
  now: number;
}

function Checks(props: { result: AttemptResult }) {
  const rows = checkRows(props.result.checks);
  if (rows === null) {
    return (
      <>
        <p class="notice bad">checks.json is not an array of checks; shown as received:</p>
        <pre>{visible(JSON.stringify(props.result.checks, null, 2) ?? "")}</pre>
      </>
    );
  }
  const failing = rows.filter((r) => r.failing).length;
  return (
    <table>
      <caption>{`checks.json of attempt ${props.result.attempt}: ${rows.length} checks, ${failing} failing (failing first)`}</caption>
      <thead>
        <tr>
          <th scope="col">Check</th>
          <th scope="col">Status</th>
          <th scope="col">Exit code</th>
          <th scope="col">Signal</th>
          <th scope="col">Duration</th>
          <th scope="col">Message</th>
        </tr>
      </thead>
      <tbody>
        {rows.length === 0 ? (
          <tr>
            <td colspan={6} class="muted">
              No checks were reported.
            </td>
          </tr>
        ) : (
          rows.map((c) => (
            <tr class={c.failing ? "failing" : undefined}>
              <td>{visible(String(c.name))}</td>
              <td>
                <State state={c.status} />
              </td>
              <td class="mono">{c.exit_code}</td>
              <td class="mono">{c.signal}</td>
              <td>{c.duration}</td>
              <td>
                {c.message === undefined || c.message === null
                  ? c.message
                  : visible(String(c.message))}
              </td>
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}

function Result(props: { run: StepRun; result: AttemptResult }) {
  const { result } = props;
  const log = tail(result.log, LOG_TAIL_LINES);
  const logHref = `/step-runs/${props.run.id}/attempts/${result.attempt}/log`;
  return (
    <>
      <h2 id="checks">{`Checks (attempt ${result.attempt})`}</h2>
      <p>
        {`Reported ${time(result.received_at)}: status `}
        <State state={result.status} />
        {" overall "}
        <State state={result.overall} />
      </p>
      <Checks result={result} />
      <h2 id="log">Log</h2>
      <p class="bar">
        <span class="muted">
          {log.cut > 0
            ? `Last ${LOG_TAIL_LINES} lines shown (${log.cut} earlier lines omitted).`
            : "Whole log shown."}
          {result.log_truncated ? " The runner cut the log to its tail before sending it." : ""}
        </span>
        <a class="btn" href={logHref} download={`${props.run.id}-attempt-${result.attempt}.log`}>
          Download the full stored log
        </a>
      </p>
      <pre>{visible(log.text) || "(empty log)"}</pre>
      <div class="cols">
        <div>
          <h2 id="callback">Raw callback</h2>
          <details>
            <summary>
              Callback body as received ({String(Buffer.byteLength(result.raw_callback))} bytes)
            </summary>
            <pre>{visible(result.raw_callback)}</pre>
          </details>
        </div>
        <div>
          <h2 id="preflight">Preflight record</h2>
          <pre>{prettyJson(JSON.stringify(result.preflight))}</pre>
        </div>
      </div>
    </>
  );
}

/** The whole step-run page. */
export function StepRunPage(props: StepRunPageProps) {
  const { release: r, run } = props;
  const step = r.manifest.steps[run.step_index];
  const action = run.direction === "fwd" ? step?.forward : step?.backward;
  const latestWithResult = [...props.results].sort((a, b) => b.attempt - a.attempt)[0];
  const chosen =
    props.attempt !== undefined
      ? props.results.find((x) => x.attempt === props.attempt)
      : latestWithResult;
  // Only what the engine would accept now for this step run (the domain's own list).
  const exits = availableActions(r).filter((a) => a.target === run.id);
  return (
    <Layout title={`Step run ${run.id}`} role={props.role} person={props.person ?? null}>
      <p class="small">
        <a href={`/releases/${r.id}`}>{`← Release ${r.id}`}</a> <State state={r.state} />
      </p>
      <h1>
        {`Step run ${run.id} `}
        <State state={run.state} />
      </h1>
      {run.last_error ? <p class="notice bad">{run.last_error}</p> : null}
      {exits.length > 0 ? (
        <nav class="bar" aria-label="Operator actions">
          {exits.map((a) => (
            <a class="btn" href={`/step-runs/${run.id}/${a.action}`} title={a.effect}>
              {`${a.action === "retry" ? "Retry" : "Resolve"} ${run.id}…`}
            </a>
          ))}
        </nav>
      ) : null}
      <dl class="kv">
        <dt>Step</dt>
        <dd>{`${run.step_index + 1} ${action?.name ?? step?.name ?? "?"}${step?.lane ? ` (lane ${step.lane})` : ""}`}</dd>
        <dt>Direction</dt>
        <dd>{run.direction === "fwd" ? "forward" : "backward (compensating)"}</dd>
        <dt>Runs on</dt>
        <dd>
          {run.kind === "runner"
            ? `GitHub runner, tool ${action?.kind === "runner" ? action.tool : "?"}`
            : "control plane"}
        </dd>
        <dt>Operation key</dt>
        <dd class="mono">{run.operation_key}</dd>
        <dt>Dispatch</dt>
        <dd>{`${run.dispatch} (engine retries used: ${run.retries_used} of ${step?.retries ?? 0})`}</dd>
        <dt>Started</dt>
        <dd class="mono">{time(run.started_at)}</dd>
        <dt>Finished</dt>
        <dd class="mono">{time(run.finished_at)}</dd>
        <dt>Duration</dt>
        <dd>{span(run.started_at, run.finished_at, props.now)}</dd>
      </dl>
      {run.kind === "runner" ? (
        <>
          <h2 id="attempts">Attempts</h2>
          <table>
            <caption>
              Each attempt is one GitHub run attempt; a newer attempt fences older ones out.
            </caption>
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">State</th>
                <th scope="col">GitHub run</th>
                <th scope="col">Commit</th>
                <th scope="col">Preflight</th>
                <th scope="col">Callback</th>
                <th scope="col">Duration</th>
                <th scope="col">Result</th>
              </tr>
            </thead>
            <tbody>
              {run.attempts.length === 0 ? (
                <tr>
                  <td colspan={8} class="muted">
                    No attempt yet: no runner has passed preflight for this step run.
                  </td>
                </tr>
              ) : (
                run.attempts.map((a) => {
                  const href = runLink(props.repository, a.run_id, a.run_attempt);
                  const label = `run ${a.run_id} · attempt ${a.run_attempt}`;
                  const has = props.results.some((x) => x.attempt === a.n);
                  return (
                    <tr>
                      <td>{a.n}</td>
                      <td>
                        <State state={a.state} />
                      </td>
                      <td>{href ? <a href={href}>{label}</a> : label}</td>
                      <td class="mono">{a.sha.slice(0, 12)}</td>
                      <td class="mono">{time(a.preflight_at)}</td>
                      <td class="mono">{time(a.callback_at)}</td>
                      <td>{span(a.preflight_at, a.callback_at, props.now)}</td>
                      <td>
                        {has ? (
                          <a
                            href={`/step-runs/${run.id}?attempt=${a.n}#checks`}
                          >{`checks of #${a.n}`}</a>
                        ) : (
                          <span class="muted">no callback</span>
                        )}
                      </td>
                    </tr>
                  );
                })
              )}
            </tbody>
          </table>
          {chosen ? (
            <Result run={run} result={chosen} />
          ) : (
            <p class="muted">
              {props.attempt !== undefined
                ? `No callback stored for attempt ${props.attempt}.`
                : "No callback received for this step run yet."}
            </p>
          )}
        </>
      ) : (
        <>
          <h2 id="request">Control-plane request</h2>
          <pre>{action ? JSON.stringify(action, null, 2) : "—"}</pre>
        </>
      )}
    </Layout>
  );
}
