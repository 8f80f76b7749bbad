/** @jsxImportSource hono/jsx */
/**
 * The engine's dashboard as a Hono sub-app, mounted at `/` by the HTTP app:
 * `/releases`, `/releases/:id`, `/step-runs/:id`, their operator actions (confirm with GET,
 * act with POST + CSRF token + operator token), `/login`, live updates over SSE, and the
 * stored log download. Server-rendered with Hono JSX; readable without JavaScript.
 */

import { type Context, Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { BatonError } from "../../domain/errors.ts";
import { INCIDENT_ID_PATTERN } from "../../domain/incidents.ts";
import { type LifecycleLookups, lifecycleActions, lifecycleNote } from "../../domain/lifecycle.ts";
import { RELEASE_STATES, type ReleaseState } from "../../domain/states.ts";
import { availableActions, verifyAction } from "../../domain/transition/exits.ts";
import type { Release } from "../../domain/types.ts";
import { suggestedCommand, VERB_NAMES, VERBS } from "../../domain/verbs.ts";
import type { ControlPlane } from "../../ports/control-plane.ts";
import { isReleaseId } from "../../protocol/ids.ts";
import type { Accepted, Refusal, ReleaseApi, ReleaseRecord } from "../../service/api.ts";
import { loadFleet } from "../../service/fleet-load.ts";
import { releaseOfStepRun } from "../../views/format.ts";
import { lifecycleOffers, offers, planWords, rollbackWords } from "../../views/offers.ts";
import { storeUnavailable } from "../errors.ts";
import { VERB_CALLS, type VerbBody } from "../verb-calls.ts";
import { type ActionName, ConfirmPage, ErrorPage, LoginPage, ResultPage } from "./action-pages.tsx";
import {
  type Caller,
  type DashboardTokens,
  identityOf,
  noTokens,
  SESSION_COOKIE,
  Sessions,
  sameOrigin,
} from "./auth.ts";
import { CredentialsPage } from "./credentials-page.tsx";
import { FleetPage } from "./fleet-page.tsx";
import { readForm } from "./form.ts";
import { IncidentPage, IncidentsPage } from "./incidents-page.tsx";
import { KillSwitchesPage } from "./kill-switches-page.tsx";
import { liveStream, markStream } from "./live.ts";
import { HISTORY_FILTERS, type HistoryFilter, ReleasePage } from "./release-page.tsx";
import { PAGE_SIZE, ReleasesPage } from "./releases-page.tsx";
import { safeNext } from "./safe-next.ts";
import { StepRunPage } from "./step-run-page.tsx";

/** What the dashboard needs from the engine. `repository` (owner/name) enables run links. */
export interface DashboardDeps {
  api: ReleaseApi;
  /** The shared operator and viewer tokens, and people's own (BATON_OPERATORS). */
  tokens: DashboardTokens;
  publicUrl: string;
  repository?: string;
  /** Clock for durations of running work (epoch ms); defaults to Date.now. */
  now?: () => number;
  /** The control plane the fleet page reads (its `lanes`); without it, observed is unknown. */
  controlPlane?: Pick<ControlPlane, "lanes">;
}

/**
 * Who a dashboard action is recorded as: the signed-in person (`operator:<name>`, as the API
 * records a person's own token), or `dashboard (operator token)` for the shared token, which
 * says nothing about who holds it.
 */
export function dashboardActor(who: Pick<Caller, "person">): string {
  return who.person !== null ? `operator:${who.person}` : "dashboard (operator token)";
}
/** States in which something may hold a release (a gate, a pause, a verb it waits for). */
const HELD_STATES: ReadonlySet<ReleaseState> = new Set(["running", "paused"]);

/** How often an open fleet page's stream reads the releases list and the control plane (ms). */
export const FLEET_POLL_MS = 2000;

function int(v: string | undefined): number | undefined {
  if (v === undefined || v === "" || !/^[0-9]{1,15}$/.test(v)) return undefined;
  return Number(v);
}
function num(v: string | undefined): number | undefined {
  if (v === undefined || v.trim() === "") return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

/**
 * Builds the dashboard sub-app. Pages need the viewer or operator token when either is
 * configured; actions need the operator token. Errors render as one sentence with the HTTP
 * status of the underlying `BatonError` (404, 409, …), 503 (with Retry-After) when the store
 * does not answer, or 500 for anything else.
 */
export function dashboardApp(deps: DashboardDeps): Hono {
  const app = new Hono();
  const now = deps.now ?? Date.now;
  const open = noTokens(deps.tokens);
  const secure = deps.publicUrl.startsWith("https:");
  const sessions = new Sessions(deps.tokens, now);

  const fail = (c: Context, who: Caller, err: unknown) => {
    if (!(err instanceof BatonError) && storeUnavailable(err)) {
      // The database is down, full or closed: a page that says so and when to try again
      // (503 + Retry-After), not an error with internals.
      c.header("Retry-After", "5");
      return c.html(
        <ErrorPage
          title="Store unavailable"
          message="[dashboard] the store does not answer (database down, full or closed); nothing was changed; reload in a few seconds"
          role={who.role}
          person={who.person}
        />,
        503,
      );
    }
    const status = err instanceof BatonError ? err.status : 500;
    const message =
      err instanceof BatonError
        ? err.message
        : `[dashboard] the engine could not answer: ${(err as Error)?.message ?? String(err)}`;
    if (!(err instanceof BatonError)) console.error(message);
    return c.html(
      <ErrorPage
        title={status === 404 ? "Not found" : "Error"}
        message={message}
        role={who.role}
        person={who.person}
      />,
      status,
    );
  };

  /** The caller if they may read; otherwise a redirect to sign in (or 401 for non-pages). */
  const reader = async (c: Context, page = true): Promise<Caller | Response> => {
    const who = await sessions.caller(c);
    if (who.role !== "none") return who;
    if (!page) return c.text("[dashboard] sign in with the viewer or operator token", 401);
    const next = new URL(c.req.url);
    return c.redirect(`/login?next=${encodeURIComponent(next.pathname + next.search)}`, 303);
  };

  app.get("/", (c) => c.redirect("/releases", 302));

  app.get("/login", async (c) => {
    const who = await sessions.caller(c);
    return c.html(
      <LoginPage
        role={who.role}
        person={who.person}
        next={safeNext(c.req.query("next"))}
        open={open}
      />,
    );
  });

  app.post("/login", async (c) => {
    const who = await sessions.caller(c);
    const read = await readForm(c);
    if (!read.ok) {
      const error = `[dashboard] sign-in refused: ${read.reason}`;
      return c.html(
        <LoginPage
          role={who.role}
          person={who.person}
          next="/releases"
          open={open}
          error={error}
        />,
        400,
      );
    }
    const form = read.fields;
    const token = typeof form.token === "string" ? form.token.trim() : "";
    const next = safeNext(form.next);
    const signer = identityOf(token || null, deps.tokens);
    if (
      !sameOrigin(c, deps.publicUrl) ||
      (signer.role !== "operator" && signer.role !== "viewer")
    ) {
      const error = open
        ? "[dashboard] no tokens are configured, so there is nothing to sign in with"
        : "[dashboard] that token is not your own (BATON_OPERATORS), the operator or the viewer token; check BATON_OPERATORS / BATON_OPERATOR_TOKEN / BATON_VIEWER_TOKEN";
      return c.html(
        <LoginPage role={who.role} person={who.person} next={next} open={open} error={error} />,
        401,
      );
    }
    // The cookie holds a signed session (role, person, random id, expiry), never the token.
    const session = await sessions.issue(signer);
    setCookie(c, SESSION_COOKIE, session.value, {
      httpOnly: true,
      sameSite: "Strict",
      path: "/",
      secure,
      maxAge: session.maxAge,
    });
    return c.redirect(next, 303);
  });

  app.post("/logout", async (c) => {
    // The session ends here and now, not only in this browser: its id is refused from now on.
    const signedIn = await sessions.verify(getCookie(c, SESSION_COOKIE));
    if (signedIn?.session) sessions.revoke(signedIn.session);
    deleteCookie(c, SESSION_COOKIE, { path: "/", secure, httpOnly: true, sameSite: "Strict" });
    return c.redirect("/login", 303);
  });

  app.get("/releases", async (c) => {
    const who = await reader(c);
    if (who instanceof Response) return who;
    const s = c.req.query("state");
    if (s && !RELEASE_STATES.includes(s as ReleaseState)) {
      const msg = `[dashboard] state "${s}" is not a release state; use one of ${RELEASE_STATES.join(", ")}`;
      return c.html(
        <ErrorPage title="Bad filter" message={msg} role={who.role} person={who.person} />,
        400,
      );
    }
    const state = (s || undefined) as ReleaseState | undefined;
    const before = int(c.req.query("before"));
    try {
      const rows = await deps.api.list({ state, before, limit: PAGE_SIZE + 1 });
      // What holds a live release (a gate, a pause, a verb it waits for) is in the release
      // itself: read those of the page's live rows, not their history.
      const live = rows.slice(0, PAGE_SIZE).filter((r) => HELD_STATES.has(r.state));
      const peek = deps.api.peek?.bind(deps.api);
      const releases = new Map<string, Release>();
      if (peek) {
        for (const r of await Promise.all(live.map((x) => peek(x.id)))) {
          if (r) releases.set(r.id, r);
        }
      }
      return c.html(
        <ReleasesPage
          rows={rows}
          releases={releases}
          state={state}
          before={before}
          role={who.role}
          person={who.person}
          now={now()}
        />,
      );
    } catch (err) {
      return fail(c, who, err);
    }
  });

  app.get("/incidents", async (c) => {
    const who = await reader(c);
    if (who instanceof Response) return who;
    try {
      return c.html(<IncidentsPage incidents={await deps.api.incidents.list()} role={who.role} />);
    } catch (err) {
      return fail(c, who, err);
    }
  });

  app.get("/credentials", async (c) => {
    const who = await reader(c);
    if (who instanceof Response) return who;
    try {
      return c.html(
        <CredentialsPage revocations={await deps.api.credentials.list()} role={who.role} />,
      );
    } catch (err) {
      return fail(c, who, err);
    }
  });

  app.get("/kill-switches", async (c) => {
    const who = await reader(c);
    if (who instanceof Response) return who;
    try {
      return c.html(
        <KillSwitchesPage switches={await deps.api.killSwitches.list()} role={who.role} />,
      );
    } catch (err) {
      return fail(c, who, err);
    }
  });

  app.get("/incidents/:id", async (c) => {
    const who = await reader(c);
    if (who instanceof Response) return who;
    const id = c.req.param("id");
    try {
      if (!INCIDENT_ID_PATTERN.test(id))
        throw new BatonError(
          "not_found",
          `[dashboard] ${JSON.stringify(id.slice(0, 64))} is not an incident id; see /incidents`,
        );
      const t = await deps.api.incidents.timeline(id);
      return c.html(<IncidentPage incident={t.incident} timeline={t.timeline} role={who.role} />);
    } catch (err) {
      return fail(c, who, err);
    }
  });

  app.get("/fleet", async (c) => {
    const who = await reader(c);
    if (who instanceof Response) return who;
    const model = c.req.query("model") || null;
    try {
      const fleet = await loadFleet(deps.api, deps.controlPlane, model);
      return c.html(
        <FleetPage
          models={fleet.models}
          model={model}
          mark={fleet.mark}
          role={who.role}
          person={who.person}
          now={now()}
        />,
      );
    } catch (err) {
      return fail(c, who, err);
    }
  });

  app.get("/fleet/events", async (c) => {
    const who = await reader(c, false);
    if (who instanceof Response) return who;
    const model = c.req.query("model") || null;
    return markStream(
      c,
      async () => (await loadFleet(deps.api, deps.controlPlane, model, { markOnly: true })).mark,
      FLEET_POLL_MS,
    );
  });

  const loadRelease = async (id: string) => {
    if (!isReleaseId(id)) {
      throw new BatonError(
        "not_found",
        `[dashboard] "${id}" is not a release id; ids look like r17`,
      );
    }
    return deps.api.get(id);
  };

  /**
   * As GET /v1/releases/:id: rollback is offered only when a manifest would be found, and
   * neither lifecycle verb once a later release has replaced this one on the lanes.
   */
  const rollbackOpts = async (release: Release): Promise<LifecycleLookups> =>
    deps.api.lifecycleLookups
      ? deps.api.lifecycleLookups(release)
      : release.state === "succeeded" && deps.api.previousAdmitted
        ? { rollbackTo: (await deps.api.previousAdmitted(release))?.prev.id ?? null }
        : {};

  app.get("/releases/:id", async (c) => {
    const who = await reader(c);
    if (who instanceof Response) return who;
    try {
      const record = await loadRelease(c.req.param("id"));
      const lifecycle = await rollbackOpts(record.release);
      return c.html(
        <ReleasePage
          record={record}
          lifecycle={lifecycle}
          role={who.role}
          person={who.person}
          now={now()}
          repository={deps.repository}
          events={{
            offset: int(c.req.query("ev")) ?? 0,
            filter: HISTORY_FILTERS.includes(c.req.query("only") as HistoryFilter)
              ? (c.req.query("only") as HistoryFilter)
              : "main",
          }}
          model={{
            step: int(c.req.query("model")),
            p: num(c.req.query("mp")),
            q: num(c.req.query("mq")),
            t: int(c.req.query("mt")),
          }}
        />,
      );
    } catch (err) {
      return fail(c, who, err);
    }
  });

  app.get("/releases/:id/events", async (c) => {
    const who = await reader(c, false);
    if (who instanceof Response) return who;
    const id = c.req.param("id");
    if (!isReleaseId(id)) return c.text(`[dashboard] "${id}" is not a release id`, 404);
    return liveStream(c, deps.api, id);
  });

  const loadStepRun = async (id: string) => {
    const rid = releaseOfStepRun(id);
    if (!rid) {
      throw new BatonError(
        "not_found",
        `[dashboard] "${id}" is not a step run id; ids look like sr_17_6_f`,
      );
    }
    const record = await loadRelease(rid);
    const run = record.release.step_runs.find((s) => s.id === id);
    if (!run)
      throw new BatonError("not_found", `[dashboard] release ${rid} has no step run ${id} (yet)`);
    return { record, run };
  };

  app.get("/step-runs/:id", async (c) => {
    const who = await reader(c);
    if (who instanceof Response) return who;
    try {
      const { record, run } = await loadStepRun(c.req.param("id"));
      return c.html(
        <StepRunPage
          release={record.release}
          run={run}
          results={record.attempt_results.filter((a) => a.step_run_id === run.id)}
          attempt={int(c.req.query("attempt"))}
          role={who.role}
          person={who.person}
          repository={deps.repository}
          now={now()}
        />,
      );
    } catch (err) {
      return fail(c, who, err);
    }
  });

  app.get("/step-runs/:id/attempts/:n/log", async (c) => {
    const who = await reader(c, false);
    if (who instanceof Response) return who;
    try {
      const { record, run } = await loadStepRun(c.req.param("id"));
      const n = int(c.req.param("n"));
      const result = record.attempt_results.find(
        (a) => a.step_run_id === run.id && a.attempt === n,
      );
      if (!result)
        return c.text(`[dashboard] no stored log for ${run.id} attempt ${c.req.param("n")}`, 404);
      c.header("content-type", "text/plain; charset=utf-8");
      c.header("x-content-type-options", "nosniff");
      c.header("content-disposition", `attachment; filename="${run.id}-attempt-${n}.log"`);
      return c.body(result.log);
    } catch (err) {
      return fail(c, who, err);
    }
  });

  // ------------------------------------------------------------ operator actions

  const onStepRun = (action: ActionName) => VERBS[action].on === "step_run";
  const lifecycle = (action: ActionName): action is "rollback" | "roll_forward" =>
    action === "rollback" || action === "roll_forward";

  const confirm = async (c: Context, action: ActionName, target: string) => {
    const who = await reader(c);
    if (who instanceof Response) return who;
    try {
      const release = onStepRun(action)
        ? (await loadStepRun(target)).record.release
        : (await loadRelease(target)).release;
      const state = onStepRun(action)
        ? (release.step_runs.find((s) => s.id === target)?.state ?? "?")
        : release.state;
      const back = onStepRun(action) ? `/step-runs/${target}` : `/releases/${target}`;
      const lifecycleOpts = await rollbackOpts(release);
      const offered = lifecycle(action)
        ? lifecycleActions(release, lifecycleOpts).some((a) => a.action === action)
        : action === "verify"
          ? verifyAction(release) !== null
          : availableActions(release).some((a) => a.action === action && a.target === target);
      const plan = !offered
        ? null
        : action === "rollback"
          ? rollbackWords(release)
          : action === "roll_forward"
            ? null
            : planWords(release, action, target);
      return c.html(
        <ConfirmPage
          action={action}
          target={target}
          back={back}
          csrf={sessions.csrfToken(who, action, target)}
          role={who.role}
          person={who.person}
          state={state}
          lanes={release.manifest.lanes.map((l) => l.id)}
          offered={offered}
          {...(!offered && lifecycle(action) && lifecycleNote(release, lifecycleOpts)
            ? // The API's refusal (no_previous_manifest, superseded), in its words.
              { refusal: lifecycleNote(release, lifecycleOpts) as string }
            : {})}
          plan={plan}
          command={
            action === "roll_forward"
              ? lifecycleActions(release).find((a) => a.action === action)?.command
              : undefined
          }
          accepted={[...offers(release), ...lifecycleOffers(release, lifecycleOpts)].map((o) => ({
            label: o.label,
            href: o.href,
            command: o.command,
          }))}
        />,
        offered ? 200 : 409,
      );
    } catch (err) {
      return fail(c, who, err);
    }
  };

  const act = async (c: Context, action: ActionName, target: string) => {
    const who = await sessions.caller(c);
    const back = onStepRun(action) ? `/step-runs/${target}` : `/releases/${target}`;
    const refuse = (status: 400 | 403, message: string) =>
      c.html(
        <ResultPage
          ok={false}
          title={`${action} refused`}
          message={message}
          releaseId={null}
          state={null}
          back={back}
          role={who.role}
          person={who.person}
        />,
        status,
      );
    if (!sameOrigin(c, deps.publicUrl)) {
      return refuse(403, "[dashboard] refused: the form was posted from another site");
    }
    if (who.role !== "operator" && who.role !== "viewer") {
      return refuse(
        403,
        open
          ? `[dashboard] refused: ${action} needs the operator token, and none is configured; set BATON_OPERATOR_TOKEN`
          : `[dashboard] refused: ${action} needs the operator token; sign in with it on /login`,
      );
    }
    const read = await readForm(c);
    if (!read.ok) return refuse(400, `[dashboard] ${action} refused: ${read.reason}`);
    const form = read.fields;
    if (!sessions.csrfValid(who, action, target, form.csrf)) {
      return refuse(
        403,
        "[dashboard] refused: the form's CSRF token is missing or stale; open the page again and confirm",
      );
    }
    if (who.role !== "operator") {
      return refuse(
        403,
        `[dashboard] refused: the viewer token only reads; ${action} needs the operator token`,
      );
    }
    if (form.confirm !== "yes") {
      return refuse(
        400,
        `[dashboard] ${action} was not confirmed; use the confirmation page's button`,
      );
    }
    let res: Accepted | Refusal;
    let releaseId: string;
    try {
      const text = (v: unknown) => (typeof v === "string" ? v.trim().slice(0, 1000) : "");
      const page = VERBS[action].dashboard;
      if (!page?.form) {
        // Roll forward needs a fixed recipe, which the dashboard cannot take.
        return refuse(
          400,
          `[dashboard] ${action.replace("_", " ")} needs a fixed recipe, which the dashboard cannot take; run ${lifecycleActions((await loadRelease(target)).release).find((a) => a.action === action)?.command ?? suggestedCommand(action, { target })}`,
        );
      }
      const release = onStepRun(action)
        ? (await loadStepRun(target)).record.release
        : (await loadRelease(target)).release;
      releaseId = release.id;
      const body: VerbBody = {};
      if (page.reason) body.reason = text(form.reason);
      if (page.lanes) {
        const lanes: Record<string, string> = {};
        for (const l of release.manifest.lanes) {
          const v = text(form[`lane:${l.id}`]);
          if (v) lanes[l.id] = v;
        }
        body.lanes = lanes;
      }
      if (
        action === "abort" &&
        !body.reason &&
        availableActions(release).some((a) => a.action === "abort")
      ) {
        // The engine requires the operator's reason (422 reason_required); the dashboard
        // never invents one, and asks nothing of the engine without it. (A release that
        // refuses abort anyway gets the engine's refusal, which says why.)
        return c.html(
          <ResultPage
            ok={false}
            title="abort needs a reason"
            message={`[dashboard] abort of ${target} not sent: the reason is empty. Say why you abort it (kept in the history with who did it, and read by whoever rolls forward), e.g. "p99 latency on lane-a doubled"; go back and fill in the Reason field.`}
            releaseId={null}
            state={null}
            back={`${back}/abort`}
            role={who.role}
            person={who.person}
          />,
          422,
        );
      }
      res = await VERB_CALLS[action](deps.api, target, dashboardActor(who), body);
      // A verb that starts a new release (rollback): the new release is the one to look at.
      if (res.ok && VERBS[action].status === 201) releaseId = res.release.id;
    } catch (err) {
      return fail(c, who, err);
    }
    if (!res.ok) {
      return c.html(
        <ResultPage
          ok={false}
          title={`${action} refused`}
          message={res.reason}
          releaseId={null}
          state={null}
          back={back}
          role={who.role}
          person={who.person}
        />,
        res.status,
      );
    }
    return c.html(
      <ResultPage
        ok={true}
        title={`${action} accepted`}
        message={
          action === "rollback"
            ? `[dashboard] rollback of ${target} accepted: release ${releaseId} runs the previous admitted manifest again.`
            : `[dashboard] ${action} of ${target} accepted${res.changed ? "" : " (it was already done)"}.`
        }
        releaseId={releaseId}
        state={res.release.state}
        back={`/releases/${releaseId}`}
        role={who.role}
        person={who.person}
      />,
    );
  };

  // A confirmation page (GET) and its form (POST) per verb the dashboard offers (domain/verbs.ts).
  for (const name of VERB_NAMES) {
    if (name === "accept") continue;
    const v = VERBS[name];
    if (!v.dashboard) continue;
    const path = `/${v.on === "step_run" ? "step-runs" : "releases"}/:id/${v.command}`;
    app.get(path, (c) => confirm(c, name, c.req.param("id") ?? ""));
    if (v.dashboard.form) app.post(path, (c) => act(c, name, c.req.param("id") ?? ""));
  }

  return app;
}

export type { ReleaseRecord };
