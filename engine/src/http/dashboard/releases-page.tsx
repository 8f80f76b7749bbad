/** @jsxImportSource hono/jsx */
/** Releases list: newest first, filter by state, paginated by a `before` cursor. */
import { RELEASE_STATES, type ReleaseState, TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
import type { Release } from "../../domain/types.ts";
import type { ReleaseSummary } from "../../ports/store.ts";
import { duration, time } from "../../views/format.ts";
import { whereInList } from "../../views/list-row.ts";
import type { Role } from "./auth.ts";
import { Layout, State } from "./layout.tsx";

/** Rows per page of the list. */
export const PAGE_SIZE = 25;

/**
 * The list. `rows` may hold one more than `PAGE_SIZE`: that extra row only says a next
 * page exists. `now` is epoch ms, used for the duration of releases still going.
 */
export function ReleasesPage(props: {
  rows: ReleaseSummary[];
  /** The releases of live rows, read to say what holds them (absent: step progress only). */
  releases?: ReadonlyMap<string, Release>;
  state: ReleaseState | undefined;
  before: number | undefined;
  role: Role;
  /** The signed-in person (their own token), named in the header. */
  person?: string | null;
  now: number;
}) {
  const rows = props.rows.slice(0, PAGE_SIZE);
  const more = props.rows.length > PAGE_SIZE;
  const last = rows.at(-1);
  const q = (extra: Record<string, string>) => {
    const p = new URLSearchParams();
    if (props.state) p.set("state", props.state);
    for (const [k, v] of Object.entries(extra)) p.set(k, v);
    const s = p.toString();
    return s ? `/releases?${s}` : "/releases";
  };
  return (
    <Layout title="Releases" role={props.role} person={props.person ?? null}>
      <h1>Releases</h1>
      <form method="get" action="/releases" class="bar">
        <label for="state">Filter by state</label>
        <select id="state" name="state">
          <option value="" selected={!props.state}>
            all states
          </option>
          {RELEASE_STATES.map((s) => (
            <option value={s} selected={props.state === s}>
              {s.replaceAll("_", " ")}
            </option>
          ))}
        </select>
        <button type="submit">Filter</button>
        {props.state ? <a href="/releases">Clear filter</a> : null}
      </form>
      <div class="scroll">
        <table>
          <caption>
            {props.state
              ? `Releases in state ${props.state}, newest first`
              : "All releases, newest first"}
          </caption>
          <thead>
            <tr>
              <th scope="col">Release</th>
              <th scope="col">Recipe / model</th>
              <th scope="col">State</th>
              <th scope="col">Where</th>
              <th scope="col" class="wide">
                Started
              </th>
              <th scope="col" class="wide">
                Duration
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.length === 0 ? (
              <tr>
                <td colspan={6} class="muted">
                  No releases{props.state ? ` in state ${props.state}` : ""} yet. Start one with{" "}
                  <code>baton start recipes/&lt;name&gt;.yaml</code>.
                </td>
              </tr>
            ) : (
              rows.map((r) => (
                <tr>
                  <td>
                    <a href={`/releases/${r.id}`}>{r.id}</a>
                  </td>
                  <td>
                    {r.recipe_name} <span class="muted">/ {r.model}</span>
                  </td>
                  <td>
                    <State state={r.state} />
                  </td>
                  <td class="wrap">{whereInList(r, props.releases?.get(r.id) ?? null)}</td>
                  <td class="mono wide">{time(r.created_at)}</td>
                  <td class="wide">
                    {duration(
                      (TERMINAL_RELEASE_STATES.has(r.state) ? r.updated_at : props.now) -
                        r.created_at,
                    )}
                  </td>
                </tr>
              ))
            )}
          </tbody>
        </table>
      </div>
      <nav class="pages" aria-label="Pages">
        {props.before !== undefined ? <a href={q({})}>Newest</a> : null}
        {more && last ? (
          <a href={q({ before: String(last.created_at) })}>Older releases →</a>
        ) : null}
      </nav>
    </Layout>
  );
}
