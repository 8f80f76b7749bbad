/**
 * The mutable dependencies' drift banner of a release page (docs/drift.md "Mutable
 * dependencies"): shown while the release's history holds a current dependency drift, one row
 * per dependency with what the recipe declares, what its probe observed, the contract and how
 * to requalify.
 */
import type { ModelDependencyDrift } from "../../domain/dependency-drift.ts";
import { time } from "../../views/format.ts";

export function DependencyDriftBanner(props: { drift: ModelDependencyDrift | null }) {
  const d = props.drift;
  if (!d) return null;
  return (
    <section
      class="panel bad"
      id="dependency-drift"
      role="alert"
      aria-labelledby="dependency-drift-h"
    >
      <h2 id="dependency-drift-h">
        {`Drift: model ${d.model}'s mutable dependencies need requalification (since ${time(d.observed_at)})`}
      </h2>
      <div class="scroll">
        <table class="compact">
          <thead>
            <tr>
              <th scope="col">Dependency</th>
              <th scope="col">Owner</th>
              <th scope="col">Declared</th>
              <th scope="col">Observed</th>
              <th scope="col">Contract</th>
              <th scope="col">Requalify with</th>
              <th scope="col">Fallback</th>
            </tr>
          </thead>
          <tbody>
            {d.dependencies.map((x) => (
              <tr>
                <th scope="row">{`${x.name} (${x.kind})`}</th>
                <td>{x.owner}</td>
                <td class="mono wrap">{x.declared}</td>
                <td class="mono wrap">{x.observed ?? "unchanged"}</td>
                <td>
                  {x.expired
                    ? `expired (held through ${x.contract_expires})`
                    : `through ${x.contract_expires}`}
                </td>
                <td class="mono wrap">{x.checks.join(", ")}</td>
                <td class="wrap">{x.fallback}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p>
        A start of this model is refused until its recipe declares the observed revision and a
        contract in force; that release must pass the checks named here before it widens.
      </p>
    </section>
  );
}
