/** @jsxImportSource hono/jsx */
/**
 * A succeeded blue-green release's old environment on its release page (docs/dashboard.md
 * "Release page"): its lanes and the image they keep running, warm until the rollback window
 * closes or retired since it closed (domain/blue-green.ts `oldEnvironment`, as the engine's
 * lookups give it), and the switch back when the engine offers it: the rollback offer from the
 * one list of lifecycle verbs (views/offers.ts `lifecycleOffers`), never a rule of its own.
 * Without the offer, why not (`note`, the API's words).
 */
import { type OldEnvironment, oldEnvironmentWords } from "../../domain/blue-green.ts";
import { time } from "../../views/format.ts";
import type { LifecycleOffer } from "../../views/offers.ts";

export function OldEnvironmentPanel(props: {
  releaseId: string;
  env: OldEnvironment | null | undefined;
  /** The rollback (switch back) offer, when the engine accepts it now. */
  offer: LifecycleOffer | undefined;
  /** Why no lifecycle verb is offered (`lifecycleNote`), or null. */
  note: string | null;
}) {
  const env = props.env;
  if (!env) return null;
  const warm = env.state === "warm";
  return (
    <section class={warm ? "panel" : "panel muted"} id="old-environment" aria-labelledby="old-env">
      <h2 id="old-env">
        {warm
          ? `Old environment: warm until ${time(env.until)}`
          : `Old environment: retired at ${time(env.until)}`}
      </h2>
      <p class="small">{oldEnvironmentWords(props.releaseId, env)}</p>
      <ul class="small" aria-label="Old environment lanes">
        {env.lanes.map((l) => (
          <li>
            <strong>{l}</strong> <span class="mono wrap">{env.image}</span>{" "}
            <span class={warm ? "tag base" : "tag"}>{warm ? "warm, 0%" : "retired"}</span>
          </li>
        ))}
      </ul>
      {props.offer?.href ? (
        <p>
          <a class="btn danger" href={props.offer.href} id="switch-back">
            {props.offer.label}
          </a>{" "}
          <span class="small">{props.offer.effect}</span>
        </p>
      ) : props.note ? (
        <p class="small muted">{props.note}</p>
      ) : null}
    </section>
  );
}
