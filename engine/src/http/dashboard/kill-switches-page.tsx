/** @jsxImportSource hono/jsx */
/**
 * The kill-switches page (docs/recovery-actions.md): every kill switch, those in force first,
 * each with every withdraw and restore: who, why, when, the lanes' capabilities read at the
 * control plane before and after, and the verdict. Actions are taken with the CLI or the API.
 */
import type { KillSwitch, LaneCapabilities } from "../../domain/kill-switch.ts";
import { time } from "../../views/format.ts";
import type { Role } from "./auth.ts";
import { Layout } from "./layout.tsx";

const lanes = (ls: LaneCapabilities[] | null) =>
  ls === null
    ? "(the read failed)"
    : ls.map((l) => `${l.lane}: ${l.capabilities.join(", ") || "none"}`).join("; ");

function KillSwitchSection(props: { ks: KillSwitch }) {
  const { ks } = props;
  const inForce = ks.state === "withdrawn";
  return (
    <section class={inForce ? "notice" : ""}>
      <h2>{`${ks.id} · ${inForce ? "IN FORCE" : "restored"} · ${ks.capability} of ${ks.model}`}</h2>
      <p>{`Taken from: ${ks.lanes.join(", ") || "no lane"}.`}</p>
      {inForce ? (
        <p>
          {"Restore it: "}
          <code>{`baton kill-switch ${ks.model} ${ks.capability} --restore --reason "<why>"`}</code>
        </p>
      ) : null}
      <table>
        <thead>
          <tr>
            <th>When</th>
            <th>Action</th>
            <th>Who</th>
            <th>Why</th>
            <th>Before (control plane)</th>
            <th>After (control plane)</th>
            <th>Verification</th>
          </tr>
        </thead>
        <tbody>
          {ks.actions.map((a) => (
            <tr>
              <td>{time(a.at)}</td>
              <td>{`${a.kind} (generation ${a.generation})`}</td>
              <td>{a.actor}</td>
              <td>{a.reason}</td>
              <td>{lanes(a.before)}</td>
              <td>{lanes(a.after)}</td>
              <td>
                {a.verification}
                {a.incidents.map((id) => (
                  <>
                    {" "}
                    <a href={`/incidents/${id}`}>{id}</a>
                  </>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** Every kill switch, in force first, then newest first. */
export function KillSwitchesPage(props: { switches: KillSwitch[]; role: Role }) {
  const sorted = [...props.switches].sort(
    (a, b) => Number(a.state !== "withdrawn") - Number(b.state !== "withdrawn"),
  );
  return (
    <Layout title="Kill switches" role={props.role}>
      <h1>Kill switches</h1>
      {sorted.length === 0 ? (
        <p class="muted">
          No kill switches. Withdraw a capability with baton kill-switch &lt;model&gt;
          &lt;capability&gt; --reason "&lt;why&gt;" (docs/recovery-actions.md).
        </p>
      ) : (
        sorted.map((ks) => <KillSwitchSection ks={ks} />)
      )}
    </Layout>
  );
}
