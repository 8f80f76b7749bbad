/** @jsxImportSource hono/jsx */
/**
 * The fleet page (`/fleet`, `/fleet?model=m`): per model and per lane, what Baton's releases
 * declared (desired) beside what the control plane holds and the target reported (observed),
 * differences and mixed versions marked. Live: an SSE stream says when anything changed.
 */

import type { FleetLane, FleetModel } from "../../domain/fleet.ts";
import { shortImage, time } from "../../views/format.ts";
import type { Role } from "./auth.ts";
import { Layout } from "./layout.tsx";
import { LIVE_SCRIPT } from "./live.ts";

/** `candidate` or `baseline` when `ref` is one of the lane's release's images, else null. */
function roleOf(d: FleetLane["desired"], ref: string): string | null {
  if (!d) return null;
  return ref === d.candidate ? "candidate" : ref === d.baseline ? "baseline" : null;
}

const yesNo = (v: boolean) => (v ? "yes" : "no");
const caps = (c: string[], advertised: boolean | null) =>
  `${c.length ? c.join(", ") : "none"}${advertised === false ? " (not advertised)" : ""}`;

/** One desired/observed pair: `want` above `now`, marked when they differ. */
function Pair(props: {
  label: string;
  want: string | null;
  now: string | null;
  differs: boolean;
  full?: string[];
}) {
  return (
    <td class={props.differs ? "differs" : undefined} data-label={props.label}>
      <span class="want" title={props.full?.[0]}>
        <span class="muted">want </span>
        {props.want ?? "—"}
      </span>
      <br />
      <span class="now" title={props.full?.[1]}>
        <span class="muted">now </span>
        {props.now ?? "unknown"}
      </span>
      {props.differs ? <span class="tag bad">differs</span> : null}
    </td>
  );
}

function LaneRow(props: { lane: FleetLane }) {
  const { id, desired: d, observed: o, differs } = props.lane;
  const img = o?.image;
  return (
    <tr class={differs.length ? "failing" : undefined}>
      <th scope="row">
        {id}
        {d ? (
          <span class="small muted block">
            {"by "}
            <a href={`/releases/${d.release_id}`}>{d.release_id}</a>
            {d.wave > 0 ? ` · wave ${d.wave}` : ""}
          </span>
        ) : (
          <span class="small muted block">no release of Baton names it</span>
        )}
      </th>
      <Pair
        label="Image"
        want={
          d
            ? `${shortImage(d.image)} (${d.image_is === "confirmed" ? "confirmed by operator" : d.image_is === "new" ? "candidate" : "baseline"})`
            : null
        }
        now={
          img
            ? `${shortImage(img.ref)} (${[roleOf(d, img.ref), img.source === "control_plane" ? "control plane" : `target, ${img.step ?? "step"}`].filter(Boolean).join(", ")})`
            : o
              ? "not reported"
              : null
        }
        differs={differs.includes("image")}
        full={[d?.image ?? "", img?.ref ?? ""]}
      />
      <Pair
        label="Traffic"
        want={d ? (d.weight === null ? "not set" : `${d.weight}%`) : null}
        now={o ? `${o.weight}%` : null}
        differs={differs.includes("weight")}
      />
      <Pair
        label="Excluded"
        want={d ? (d.excluded === null ? "not set" : yesNo(d.excluded)) : null}
        now={o ? yesNo(o.excluded) : null}
        differs={differs.includes("excluded")}
      />
      <Pair
        label="Capabilities"
        want={d ? (d.capabilities === null ? "not set" : caps(d.capabilities, d.advertised)) : null}
        now={o ? caps(o.capabilities, o.advertised) : null}
        differs={differs.includes("capabilities")}
      />
      <td class="wide small muted">{o ? time(o.updated_at) : "—"}</td>
    </tr>
  );
}

function ModelSection(props: { m: FleetModel }) {
  const { m } = props;
  const drift = m.lanes.filter((l) => l.differs.length > 0);
  return (
    <section aria-labelledby={`model-${m.model}`} class="panel" data-model={m.model}>
      <h2 id={`model-${m.model}`}>
        {`Model ${m.model}`}
        {m.mixed ? <span class="tag bad">mixed versions</span> : null}
        {drift.length ? <span class="tag bad">{`${drift.length} lane(s) differ`}</span> : null}
      </h2>
      {m.readError ? (
        <p class="notice bad" role="alert">
          {`The control plane did not answer, so what the lanes run now is unknown: ${m.readError}`}
        </p>
      ) : null}
      <p class="small">
        {m.active ? (
          <>
            {"Release "}
            <a href={`/releases/${m.active}`}>{m.active}</a>
            {" is under way: differences may be its work in progress. "}
          </>
        ) : null}
        {m.images.length === 0
          ? "No lane takes traffic."
          : m.mixed
            ? `Mixed versions: ${m.images.map((i) => `${shortImage(i.ref)} on ${i.lanes.join(", ")} (${i.weight}%)`).join("; ")}.`
            : `One version serves all traffic: ${shortImage(m.images[0]!.ref)}.`}
      </p>
      <div class="scroll">
        <table class="compact fleet">
          <caption>Per lane: want (what Baton declared) and now (what is observed)</caption>
          <thead>
            <tr>
              <th scope="col">Lane</th>
              <th scope="col">Image</th>
              <th scope="col">Traffic</th>
              <th scope="col">Excluded</th>
              <th scope="col">Capabilities</th>
              <th scope="col" class="wide">
                Changed (control plane)
              </th>
            </tr>
          </thead>
          <tbody>
            {m.lanes.map((l) => (
              <LaneRow lane={l} />
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

/** The page. `mark` is the live fingerprint; `model` the filter (null = every model). */
export function FleetPage(props: {
  models: FleetModel[];
  model: string | null;
  mark: string;
  role: Role;
  /** The signed-in person (their own token), named in the header. */
  person?: string | null;
  now: number;
}) {
  const q = props.model ? `?model=${encodeURIComponent(props.model)}` : "";
  return (
    <Layout title="Fleet" role={props.role} person={props.person ?? null} refreshSeconds={10}>
      <div id="live" data-live="1" data-version={props.mark} data-events={`/fleet/events${q}`}>
        <h1>
          {props.model ? `Fleet · ${props.model}` : "Fleet"}
          <span class="sub">
            {
              "Desired (what Baton's releases declared) against observed (the control plane's lanes; the image as the control plane or the target reported it). "
            }
            {props.model ? <a href="/fleet">All models</a> : null}
          </span>
        </h1>
        <div id="fleet-part" data-part="1">
          <p class="small muted" role="status" aria-live="polite">
            {`Read at ${time(props.now)}`}
          </p>
          {props.models.length === 0 ? (
            <p class="notice">No release names a lane and the control plane lists none.</p>
          ) : (
            props.models.map((m) => <ModelSection m={m} />)
          )}
        </div>
      </div>
      <script dangerouslySetInnerHTML={{ __html: LIVE_SCRIPT }} />
    </Layout>
  );
}
