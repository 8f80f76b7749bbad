/** @jsxImportSource hono/jsx */
/**
 * The incidents pages (docs/incidents.md): every incident, open ones first, each with its
 * severity, summary, models, roles and what it freezes; one incident's page adds its timeline.
 */
import type { Incident } from "../../domain/incidents.ts";
import { ROLES } from "../../domain/incidents.ts";
import type { TimelineEntry } from "../../service/use-cases/incidents.ts";
import { time } from "../../views/format.ts";
import type { Role } from "./auth.ts";
import { Layout } from "./layout.tsx";

function IncidentSummary(props: { i: Incident; link: boolean }) {
  const { i } = props;
  const open = i.resolved_at === null;
  return (
    <section class={open ? "notice" : ""}>
      <h2>
        {props.link ? <a href={`/incidents/${i.id}`}>{i.id}</a> : i.id}
        {` · ${open ? "OPEN" : "resolved"} · ${i.severity.toUpperCase()} · ${i.summary}`}
      </h2>
      <p>{`Affects ${i.models.join(", ")}; declared ${time(i.opened_at)}.`}</p>
      <p>
        {`Roles: ${ROLES.filter((r) => i.roles[r])
          .map((r) => `${r.replace("_", " ")} ${i.roles[r]}`)
          .join(", ")}.`}
      </p>
      {open ? (
        <p>
          {`Frozen: new releases and first exposures of every model but ${[...i.models, ...i.allowed].join(", ")}. The commander (${i.roles.commander}) may allow one: `}
          <code>{`baton incident allow ${i.id} --model <model> --reason "<why>"`}</code>
        </p>
      ) : (
        <p>{`Resolved ${time(i.resolved_at)}: ${i.resolution ?? ""}`}</p>
      )}
    </section>
  );
}

/** Every incident, open first then newest first. */
export function IncidentsPage(props: { incidents: Incident[]; role: Role }) {
  const sorted = [...props.incidents].sort(
    (a, b) => Number(a.resolved_at !== null) - Number(b.resolved_at !== null),
  );
  return (
    <Layout title="Incidents" role={props.role}>
      <h1>Incidents</h1>
      {sorted.length === 0 ? (
        <p class="muted">
          No incidents. Declare one with baton incident declare (docs/incidents.md).
        </p>
      ) : (
        sorted.map((i) => <IncidentSummary i={i} link={true} />)
      )}
    </Layout>
  );
}

/** One incident and its timeline, oldest first. */
export function IncidentPage(props: { incident: Incident; timeline: TimelineEntry[]; role: Role }) {
  return (
    <Layout title={props.incident.id} role={props.role}>
      <IncidentSummary i={props.incident} link={false} />
      <h2>Timeline</h2>
      <table>
        <thead>
          <tr>
            <th>When</th>
            <th>Where</th>
            <th>Who</th>
            <th>What</th>
          </tr>
        </thead>
        <tbody>
          {props.timeline.map((t) => (
            <tr>
              <td>{time(t.at)}</td>
              <td>
                {t.source === "incident" ? (
                  "incident"
                ) : (
                  <a href={`/releases/${t.source}`}>{t.source}</a>
                )}
              </td>
              <td>{t.actor ?? ""}</td>
              <td>{t.text}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Layout>
  );
}
