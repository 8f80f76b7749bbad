/** @jsxImportSource hono/jsx */
/** Pages around operator actions: sign in, confirmation, result, and errors. */
import type { Role } from "./auth.ts";
import { Layout, State } from "./layout.tsx";

/** An operator action the dashboard offers. */
export type ActionName =
  | "abort"
  | "resume"
  | "retry"
  | "resolve"
  | "abandon"
  | "pause"
  | "release"
  | "promote"
  | "rollback"
  | "roll_forward"
  | "confirm_restore"
  | "verify";

const WHAT: Record<ActionName, (target: string) => string> = {
  abort: (t) =>
    `Abort release ${t}? If any forward step may have taken effect, the engine compensates: it runs the backward steps from the high-water mark down to step 1. This cannot be undone; a finished release needs a new release.`,
  resume: (t) =>
    `Resume release ${t}? It goes on from where it waits: a step run it is paused on is dispatched again, or the next step begins.`,
  pause: (t) =>
    `Pause release ${t}? Nothing new starts (no next step, lane or wave). Step runs already in flight settle first, a gate under way keeps deciding, and a failure still follows the step's policy. It waits paused, with your name and reason, until resume.`,
  release: (t) =>
    `Release ${t}? The candidate, deployed at 0% exposure, gets its first traffic: the first wave's traffic is set, then the rollout goes on wave by wave.`,
  promote: (t) =>
    `Promote release ${t}? It widens exposure to the next wave (past a manual promotion, or accepting the risk of an inconclusive gate).`,
  retry: (t) =>
    `Retry step run ${t}? It is dispatched again under a new dispatch number; older attempts are fenced out.`,
  resolve: (t) =>
    `Resolve step run ${t}? Say what you did by hand: the engine records it as done (with your reason) and compensation continues with the steps below it.`,
  rollback: (t) =>
    `Roll back release ${t}? ${t} stays succeeded (a closed release never changes): a NEW release runs the previous admitted manifest of its model again, admitted as an explicit rollback, after the engine asks each lane's machine that the previous image is still present and loadable with room to run. Its own undo would restore ${t}'s image.`,
  roll_forward: (t) =>
    `Roll forward past release ${t}? A NEW release of a fixed recipe of the same model replaces it without going back. The dashboard cannot take a recipe: run the command below with the fixed recipe (and its signature bundle when admission requires one).`,
  confirm_restore: (t) =>
    `Confirm the restore action of release ${t}? Its traffic was rolled back, but its recipe's recovery class is recoverable: the restore action must have been run. Say what you ran and what it showed; the engine records it with your name, ends the release rolled back, and frees its lanes.`,
  verify: (t) =>
    `Verify release ${t}? The engine reads every lane now: weight, excluded marker and capabilities from the control plane, and the image and health check of the lanes a runner step touched at their machines, and compares them with what they should be (the observed baseline after an undo, the manifest's end state after a success). Nothing is written to the fleet; the result is recorded on the release.`,
  abandon: (t) =>
    `Abandon release ${t}? It ends abandoned without further compensation. Confirm, for every lane, the image it runs now (name@sha256:…, or none); the lanes are then free for a new release.`,
};

/** What an action leads to, for people: steps grouped by lane, in the order they run. */
export interface PlanWords {
  /** `Will be undone, in this order` / `Will run, in this order` / `Will NOT be undone`. */
  heading: string;
  /** Lane (or `traffic (all lanes)`) -> step descriptions in run order. */
  lanes: { lane: string; steps: string[] }[];
  /** When nothing runs: what happens instead. */
  empty: string;
}

/** An action the engine accepts now, as a link (the refusal page lists them). */
export interface AcceptedLink {
  label: string;
  href: string | null;
  command: string;
}

function PlanTable(props: { plan: PlanWords }) {
  const { plan } = props;
  return (
    <section aria-labelledby="plan-h" id="plan">
      <h2 id="plan-h">{plan.heading}</h2>
      {plan.lanes.length === 0 ? (
        <p class="muted">{plan.empty}</p>
      ) : (
        <div class="scroll">
          <table class="compact">
            <thead>
              <tr>
                <th scope="col">Lane</th>
                <th scope="col">Steps, in order</th>
              </tr>
            </thead>
            <tbody>
              {plan.lanes.map((l) => (
                <tr>
                  <th scope="row">{l.lane}</th>
                  <td class="wrap">{l.steps.join(" → ")}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/**
 * The confirmation step: what the action will do (lane by lane), then a POST form with the
 * CSRF token and an explicit confirm field. An action the engine would refuse now
 * (`offered: false`) gets no form: the page says so and lists `accepted`.
 */
export function ConfirmPage(props: {
  action: ActionName;
  target: string;
  back: string;
  csrf: string;
  role: Role;
  state: string;
  /** Lane ids of the release (abandon asks what each runs). */
  lanes?: string[];
  /** Whether the engine accepts this action now (its `availableActions`). */
  offered?: boolean;
  /** What it will undo or run, by lane (`planOf`). */
  plan?: PlanWords | null;
  /** The actions the engine accepts now (shown when this one is not). */
  accepted?: AcceptedLink[];
  /** The CLI command that takes the action, when the dashboard cannot (no form then). */
  command?: string;
  /** Why the engine would refuse it, when the state alone does not say (the API's reason). */
  refusal?: string;
}) {
  const verb = props.action[0]!.toUpperCase() + props.action.slice(1).replace("_", " ");
  return (
    <Layout title={`${verb} ${props.target}`} role={props.role}>
      <h1>{`${verb} ${props.target}`}</h1>
      <p>
        {"Current state: "}
        <State state={props.state} />
      </p>
      <p>{WHAT[props.action](props.target)}</p>
      {props.offered === false ? (
        <>
          <p class="notice bad" role="alert">
            {props.refusal
              ? `The engine does not accept ${props.action.replace("_", "-")} for ${props.target} now: ${props.refusal}.`
              : `The engine does not accept ${props.action.replace("_", "-")} for ${props.target} now (it is ${props.state.replaceAll("_", " ")}); it would refuse it.`}
          </p>
          {props.accepted && props.accepted.length > 0 ? (
            <>
              <p>It accepts:</p>
              <ul>
                {props.accepted.map((a) => (
                  <li>
                    {a.href ? <a href={a.href}>{a.label}</a> : a.label}{" "}
                    <code class="small">{a.command}</code>
                  </li>
                ))}
              </ul>
            </>
          ) : (
            <p>It is finished: no action is accepted. Start a new release to change what runs.</p>
          )}
          <p>
            <a href={props.back}>Back</a>
          </p>
        </>
      ) : null}
      {props.offered !== false && props.plan ? <PlanTable plan={props.plan} /> : null}
      {props.offered !== false && props.command ? (
        <>
          <p>Run, with the fixed recipe:</p>
          <pre class="wrap">
            <code>{props.command}</code>
          </pre>
          <p>
            <a href={props.back}>Back</a>
          </p>
        </>
      ) : null}
      {props.offered === false || props.command ? null : (
        <>
          {props.role !== "operator" ? (
            <p class="notice bad">
              {props.role === "viewer"
                ? "You are signed in with the viewer token, which only reads: the engine will refuse this action."
                : "You are not signed in with the operator token: the engine will refuse this action."}
            </p>
          ) : null}
          <form method="post" action={`${props.back}/${props.action.replaceAll("_", "-")}`}>
            <input type="hidden" name="csrf" value={props.csrf} />
            <input type="hidden" name="confirm" value="yes" />
            {props.action === "abort" ? (
              <p>
                <label for="reason">
                  Reason (required: say why you abort it; kept in the history with who did it)
                </label>
                <input id="reason" name="reason" size={60} maxlength={1000} required />
              </p>
            ) : null}
            {props.action === "pause" ? (
              <p>
                <label for="reason">
                  Reason (required; kept in the history and shown on the release)
                </label>
                <input id="reason" name="reason" size={60} maxlength={1000} required />
              </p>
            ) : null}
            {props.action === "release" ||
            props.action === "promote" ||
            props.action === "rollback" ? (
              <p>
                <label for="reason">Reason (kept in the history)</label>
                <input id="reason" name="reason" size={60} maxlength={1000} />
              </p>
            ) : null}
            {props.action === "resolve" ||
            props.action === "abandon" ||
            props.action === "confirm_restore" ? (
              <p>
                <label for="reason">Reason (required; kept in the history with who did it)</label>
                <input id="reason" name="reason" size={60} maxlength={1000} required />
              </p>
            ) : null}
            {props.action === "abandon"
              ? (props.lanes ?? []).map((l) => (
                  <p>
                    <label for={`lane-${l}`}>{`${l} runs now (image@sha256:… or none)`}</label>
                    <input id={`lane-${l}`} name={`lane:${l}`} size={80} maxlength={512} required />
                  </p>
                ))
              : null}
            <div class="bar">
              <button
                type="submit"
                class={
                  props.action === "abort" ||
                  props.action === "abandon" ||
                  props.action === "rollback"
                    ? "danger"
                    : undefined
                }
              >
                {`Yes, ${props.action === "rollback" ? "roll back" : props.action === "confirm_restore" ? "confirm the restore of" : props.action} ${props.target}`}
              </button>
              <a href={props.back}>Cancel</a>
            </div>
          </form>
        </>
      )}
    </Layout>
  );
}

/** What happened after an action: accepted with the release's new state, or refused. */
export function ResultPage(props: {
  ok: boolean;
  title: string;
  message: string;
  releaseId: string | null;
  state: string | null;
  back: string;
  role: Role;
}) {
  return (
    <Layout title={props.title} role={props.role}>
      <h1>{props.title}</h1>
      <p class={`notice ${props.ok ? "ok" : "bad"}`} role="status">
        {props.message}
      </p>
      {props.state && props.releaseId ? (
        <p>
          {`Release ${props.releaseId} is now `}
          <State state={props.state} />
        </p>
      ) : null}
      <p>
        <a href={props.back}>Back</a>
      </p>
    </Layout>
  );
}

/** Sign in with the operator or viewer token. */
export function LoginPage(props: { role: Role; next: string; error?: string; open: boolean }) {
  return (
    <Layout title="Sign in" role={props.role}>
      <h1>Sign in</h1>
      {props.error ? (
        <p class="notice bad" role="alert">
          {props.error}
        </p>
      ) : null}
      {props.open ? (
        <p class="notice">
          No tokens are configured (BATON_OPERATOR_TOKEN, BATON_VIEWER_TOKEN): pages are readable by
          anyone and every action is refused.
        </p>
      ) : null}
      <form method="post" action="/login">
        <input type="hidden" name="next" value={props.next} />
        <p>
          <label for="token">Operator or viewer token</label>
          <input
            id="token"
            name="token"
            type="password"
            autocomplete="current-password"
            size={40}
            required
          />
        </p>
        <button type="submit">Sign in</button>
      </form>
      <p class="muted small">
        The viewer token reads; the operator token may also abort, resume and retry. The token is
        kept in an HttpOnly cookie for this site only.
      </p>
    </Layout>
  );
}

/** An error page: one clear sentence, never a stack trace. */
export function ErrorPage(props: { title: string; message: string; role: Role }) {
  return (
    <Layout title={props.title} role={props.role}>
      <h1>{props.title}</h1>
      <p class="notice bad" role="alert">
        {props.message}
      </p>
      <p>
        <a href="/releases">All releases</a>
      </p>
    </Layout>
  );
}
