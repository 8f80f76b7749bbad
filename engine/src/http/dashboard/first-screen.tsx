/** @jsxImportSource hono/jsx */
/**
 * The first screen of a release page: the 2am answers, above the fold at 1280×800. State and
 * why, the actions the engine accepts with what each does, the failed step with its failing
 * check and evidence, what was undone and what is still to undo, and what Baton last set the
 * lanes to. Built from `summarize` (views/summary.ts) and `offers` (views/offers.ts).
 */
import { TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
import { stepWords } from "../../domain/step-words.ts";
import type { Release } from "../../domain/types.ts";
import { visible } from "../../domain/visible-text.ts";
import { imageRole, shortImage, trafficOn } from "../../views/format.ts";
import { readOnce } from "../../views/history-label.ts";
import type { LifecycleOffer, Offer } from "../../views/offers.ts";
import { type ReleaseSummaryFacts, stepAction, whyToShow } from "../../views/summary.ts";
import { State } from "./layout.tsx";

function Offers(props: { release: Release; offers: (Offer | LifecycleOffer)[] }) {
  const r = props.release;
  if (props.offers.length === 0) {
    return (
      <p class="muted small" id="offers">
        {TERMINAL_RELEASE_STATES.has(r.state)
          ? "The release has ended: no action is accepted. A new release undoes or redoes it."
          : r.state === "running" || r.state === "compensating"
            ? "No action needed: the engine is moving the release on by itself."
            : "No action is accepted in this state."}
      </p>
    );
  }
  return (
    <ul class="offers" id="offers" aria-label="Actions the engine accepts now">
      {props.offers.map((o) => (
        <li>
          {o.href ? (
            <a class={o.danger ? "btn danger" : "btn"} href={o.href}>
              {o.label}
            </a>
          ) : (
            <code class="wrap">{o.command}</code>
          )}{" "}
          <span class="small">{o.effect}</span>
        </li>
      ))}
    </ul>
  );
}

function Failed(props: { facts: ReleaseSummaryFacts }) {
  const f = props.facts.failed;
  if (!f) return null;
  const ev = f.evidence;
  return (
    <section class="panel bad" aria-labelledby="what-failed" id="failed">
      <h2 id="what-failed">
        {f.run.direction === "bwd" ? "Undo step that failed: " : "Failed step: "}
        <a href={`/step-runs/${f.run.id}`}>{f.title}</a> <State state={f.run.state} />
      </h2>
      {f.error ? <p class="mono wrap">{visible(readOnce(f.error))}</p> : null}
      {ev ? (
        <dl class="kv">
          <dt>Failing check</dt>
          <dd>
            <strong>{visible(String(ev.check.name))}</strong> <State state={ev.check.status} />
            {` exit code ${ev.check.exit_code}`}
            {ev.http_status ? ` · HTTP ${ev.http_status}` : ""}
          </dd>
          {ev.check.message ? (
            <>
              <dt>Message</dt>
              <dd class="wrap">{visible(String(ev.check.message))}</dd>
            </>
          ) : null}
          {ev.excerpt ? (
            <>
              <dt>Response</dt>
              <dd>
                <pre class="excerpt">{visible(ev.excerpt)}</pre>
              </dd>
            </>
          ) : null}
        </dl>
      ) : f.run.kind === "runner" ? (
        <p class="muted small">No check record was reported for this step run.</p>
      ) : null}
      <p class="small">
        <a href={`/step-runs/${f.run.id}`}>All checks, the log and every attempt →</a>
      </p>
    </section>
  );
}

function Undo(props: { facts: ReleaseSummaryFacts; release: Release }) {
  const { facts } = props;
  const op = facts.operator;
  if (facts.undone.length === 0 && facts.toUndo.length === 0 && !op) return null;
  return (
    <section aria-labelledby="undo" id="undo-part">
      <h2 id="undo">Undo</h2>
      {op ? (
        <p class="notice bad">
          {`Fix lane ${op.lane ?? "(none)"} by hand so that its ${stepAction(op.step, "bwd")} holds, then retry the undo of ${stepWords(op.step)}.`}
          {facts.toUndo.length > 1
            ? ` After it: ${facts.toUndo
                .filter((s) => s.index !== op.step.index)
                .map((s) => `step ${s.index + 1}`)
                .join(", ")}.`
            : ""}
        </p>
      ) : null}
      {facts.toUndo.length > 0 ? (
        <p class="small">
          <strong>Still to undo: </strong>
          {facts.toUndo.map((s) => `step ${s.index + 1} ${stepAction(s, "bwd")}`).join(" · ")}
        </p>
      ) : null}
      {facts.undone.length > 0 ? (
        <p class="small">
          <strong>{`Undone (${facts.undone.length}): `}</strong>
          {facts.undone
            .map((u) => `step ${u.step.index + 1} ${stepAction(u.step, "bwd")}`)
            .join(" · ")}
        </p>
      ) : (
        <p class="small muted">Nothing undone yet.</p>
      )}
    </section>
  );
}

function LiveNow(props: { facts: ReleaseSummaryFacts; release: Release }) {
  const { facts, release: r } = props;
  return (
    <section aria-labelledby="live-now" id="live-now-part">
      <h2 id="live-now">Live now (as Baton last set it)</h2>
      <p class="small muted">
        {facts.traffic
          ? `Traffic ${facts.traffic.percent}% on ${trafficOn(r)} ${shortImage(r.manifest.image)}, set by ${facts.traffic.by}. `
          : "No traffic step has run: the baseline weights hold. "}
        <a href={`/fleet?model=${encodeURIComponent(r.manifest.model)}`}>
          What the control plane reports →
        </a>
      </p>
      <div class="scroll">
        <table class="compact">
          <thead>
            <tr>
              <th scope="col">Lane</th>
              <th scope="col">Wave</th>
              <th scope="col">Image</th>
              <th scope="col">Traffic</th>
            </tr>
          </thead>
          <tbody>
            {facts.lanes.map((l) => (
              <tr>
                <td class="nowrap">{l.id}</td>
                <td>{l.wave > 0 ? String(l.wave) : "—"}</td>
                <td class="wrap">
                  <span class="mono" title={l.ref}>
                    {shortImage(l.ref)}
                  </span>{" "}
                  <span class={l.image === "new" ? "tag cand" : "tag base"}>
                    {imageRole(r, l.image)}
                  </span>
                </td>
                <td>{l.weight === null ? "baseline" : `${l.weight}%`}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

/** The first screen: headline, why, offers, failed step, undo and live-now. */
export function FirstScreen(props: {
  release: Release;
  facts: ReleaseSummaryFacts;
  /** Operator actions, then lifecycle verbs (rollback, roll forward). */
  offers: (Offer | LifecycleOffer)[];
}) {
  const { release: r, facts } = props;
  const why = whyToShow(facts);
  return (
    <div id="first-screen">
      <p class="headline" id="headline">
        {facts.headline}
        {facts.cause === "operator_abort" ? (
          <span class="tag op">operator abort</span>
        ) : facts.cause === "failure" ? (
          <span class="tag bad">failure</span>
        ) : null}
      </p>
      {why ? (
        <p class="why" id="why">
          <strong>Why: </strong>
          {why}
        </p>
      ) : null}
      <Offers release={r} offers={props.offers} />
      <Failed facts={facts} />
      <div class="cols tight">
        <LiveNow facts={facts} release={r} />
        <Undo facts={facts} release={r} />
      </div>
    </div>
  );
}
