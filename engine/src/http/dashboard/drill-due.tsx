/**
 * The drill-due banner of a release page (docs/recovery-actions.md "The drill schedule"): shown
 * while the release's history holds a current `drill_due` entry: the model, its last passed
 * drill (or that it has none), the recipe's interval, and how to record a drill.
 */
import type { DrillDue } from "../../domain/drills.ts";
import { time } from "../../views/format.ts";

export function DrillDueBanner(props: { due: DrillDue | null }) {
  const d = props.due;
  if (!d) return null;
  return (
    <section class="panel bad" id="drill-due" role="status" aria-labelledby="drill-due-h">
      <h2 id="drill-due-h">
        {`Drill due: model ${d.model}'s recovery was last rehearsed ${d.last ? `by drill ${d.last.drill} on ${time(d.last.at)}` : "never"}`}
      </h2>
      <p>
        {`Its recipe's policy.drill_every_days is ${d.every_days}${d.due_since !== null ? `: a drill is due since ${time(d.due_since)}` : ""}. Rehearse its recovery and record the drill (baton drill ${d.model} --rehearse --reason "<why>" on its drill lanes; npm run drill on the demo; baton drill ${d.model} --record FILE); this banner ends at the schedule's next look after a passed drill is recorded.`}
      </p>
    </section>
  );
}
