/** @jsxImportSource hono/jsx */
/** Pages around operator actions: sign in, confirmation, result, and errors. */
import { VERBS, type VerbName } from "../../domain/verbs.ts";
import type { PlanWords } from "../../views/offers.ts";
import type { Role } from "./auth.ts";
import { Layout, State } from "./layout.tsx";

/** An operator verb the dashboard offers a confirmation page for (domain/verbs.ts). */
export type ActionName = Exclude<VerbName, "accept">;

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
      {plan.steps.length > 0 ? (
        <div class="scroll">
          <table class="compact">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Lane</th>
                <th scope="col">Step</th>
              </tr>
            </thead>
            <tbody>
              {plan.steps.map((s, i) => (
                <tr>
                  <td>{String(i + 1)}</td>
                  <td>{s.lane}</td>
                  <td class="wrap">{s.step}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : plan.lanes.length === 0 ? (
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
 * The confirmation step: what the action will do (in the order it runs), then a POST form with the
 * CSRF token and an explicit confirm field. An action the engine would refuse now
 * (`offered: false`) gets no form: the page says so and lists `accepted`.
 */
export function ConfirmPage(props: {
  action: ActionName;
  target: string;
  back: string;
  csrf: string;
  role: Role;
  /** The signed-in person (their own token), named in the header. */
  person?: string | null;
  state: string;
  /** Lane ids of the release (abandon asks what each runs). */
  lanes?: string[];
  /** Whether the engine accepts this action now (its `availableActions`). */
  offered?: boolean;
  /** What it will undo or run, in order (`planOf`). */
  plan?: PlanWords | null;
  /** The actions the engine accepts now (shown when this one is not). */
  accepted?: AcceptedLink[];
  /** The CLI command that takes the action, when the dashboard cannot (no form then). */
  command?: string;
  /** Why the engine would refuse it, when the state alone does not say (the API's reason). */
  refusal?: string;
}) {
  const verb = props.action[0]!.toUpperCase() + props.action.slice(1).replace("_", " ");
  const page = VERBS[props.action].dashboard!;
  return (
    <Layout title={`${verb} ${props.target}`} role={props.role} person={props.person ?? null}>
      <h1>{`${verb} ${props.target}`}</h1>
      <p>
        {"Current state: "}
        <State state={props.state} />
      </p>
      <p>{page.confirm(props.target)}</p>
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
          <form method="post" action={`${props.back}/${VERBS[props.action].command}`}>
            <input type="hidden" name="csrf" value={props.csrf} />
            <input type="hidden" name="confirm" value="yes" />
            {page.reason ? (
              <p>
                <label for="reason">{page.reason.label}</label>
                <input
                  id="reason"
                  name="reason"
                  size={60}
                  maxlength={1000}
                  required={page.reason.required}
                />
              </p>
            ) : null}
            {page.lanes
              ? (props.lanes ?? []).map((l) => (
                  <p>
                    <label for={`lane-${l}`}>{`${l} runs now (image@sha256:… or none)`}</label>
                    <input id={`lane-${l}`} name={`lane:${l}`} size={80} maxlength={512} required />
                  </p>
                ))
              : null}
            <div class="bar">
              <button type="submit" class={page.danger ? "danger" : undefined}>
                {`Yes, ${page.button} ${props.target}`}
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
  /** The signed-in person (their own token), named in the header. */
  person?: string | null;
}) {
  return (
    <Layout title={props.title} role={props.role} person={props.person ?? null}>
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
export function LoginPage(props: {
  role: Role;
  person?: string | null;
  next: string;
  error?: string;
  open: boolean;
}) {
  return (
    <Layout title="Sign in" role={props.role} person={props.person ?? null}>
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
          <label for="token">Your own token (or the operator or viewer token)</label>
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
        Your own token (BATON_OPERATORS) acts as you: every action you take here is recorded with
        your name. The shared operator token acts too, recorded only as "dashboard (operator
        token)"; the viewer token reads. The token itself is never stored: an HttpOnly cookie for
        this site holds a signed session.
      </p>
    </Layout>
  );
}

/** An error page: one clear sentence, never a stack trace. */
export function ErrorPage(props: {
  title: string;
  message: string;
  role: Role;
  person?: string | null;
}) {
  return (
    <Layout title={props.title} role={props.role} person={props.person ?? null}>
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
