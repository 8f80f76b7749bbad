/** @jsxImportSource hono/jsx */
/**
 * The credentials page (docs/recovery-actions.md "Revoke a credential"): every credential
 * revocation, newest first: what (the reference, never a value), who, why, when, the tool and
 * its run, the result and the verdict (the tool's own check that the old credential is refused).
 * Revocations are asked for with the CLI or the API.
 */
import type { Revocation } from "../../domain/credential-revocation.ts";
import { time } from "../../views/format.ts";
import type { Role } from "./auth.ts";
import { Layout } from "./layout.tsx";

function verdict(r: Revocation): string {
  if (r.state === "done" || r.state === "dispatch_failed") return r.verification;
  return `${r.state}: no result from the runner yet`;
}

/** Every revocation, newest first. */
export function CredentialsPage(props: { revocations: Revocation[]; role: Role }) {
  return (
    <Layout title="Credentials" role={props.role}>
      <h1>Credential revocations</h1>
      {props.revocations.length === 0 ? (
        <p class="muted">
          No revocations. Revoke a credential a recipe lists with baton revoke-credential
          &lt;model&gt; &lt;ref&gt; --reason "&lt;why&gt;" (docs/recovery-actions.md).
        </p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Id</th>
              <th>When</th>
              <th>Credential</th>
              <th>Who</th>
              <th>Why</th>
              <th>Tool and run</th>
              <th>Verification</th>
            </tr>
          </thead>
          <tbody>
            {props.revocations.map((r) => (
              <tr class={r.state === "done" && r.verified ? "" : "notice"}>
                <td>{r.id}</td>
                <td>{time(r.at)}</td>
                <td>
                  {`${r.mode} ${r.ref} of ${r.model} (listed by `}
                  <a href={`/releases/${r.release}`}>{r.release}</a>
                  {")"}
                </td>
                <td>{r.actor}</td>
                <td>{r.reason}</td>
                <td>{`${r.tool}; dispatch ${r.dispatch}${r.run ? `; run ${r.run.run_id} attempt ${r.run.run_attempt}` : ""}${r.result ? `; ${r.result.status} (${r.result.overall})` : ""}`}</td>
                <td>
                  {verdict(r)}
                  {r.incidents.map((id) => (
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
      )}
    </Layout>
  );
}
