/**
 * One release per lane (docs/guarantees.md G9). Two releases writing the same lanes at once undo
 * each other: one's compensation restores the old image while the other reports success. A new
 * release is refused (409 `conflict`) when one of its lane ids belongs to a release not yet
 * terminal, in any model: the control plane names lanes by id alone, so one lane id in two
 * models is one lane there. Several lanes may share a machine (same SSH host:port); deploy.sh
 * serialises work per lane on it.
 *
 * Two layers: `assertLanesFree` reads the releases in flight before anything is reserved (the
 * common case, with a message naming the owner's model and state), and the store's lane claims
 * (`CreateExtras.claimLanes`), written in the transaction that creates the release under a
 * unique key per lane id, which make it exact across engines sharing one database: of two
 * starts at the same instant on different engines, one commits and the other writes nothing
 * and is answered by `lanesClaimedError`.
 */
import { BatonError } from "../domain/errors.ts";
import { RELEASE_STATES, TERMINAL_RELEASE_STATES } from "../domain/states.ts";
import { availableActions } from "../domain/transition/exits.ts";
import type { Manifest, Release } from "../domain/types.ts";
import type { LanesClaimed, Store } from "../ports/store.ts";

/** Releases read per page, and the bound on pages per state (loops stay bounded). */
const PAGE = 500;
const MAX_PAGES = 20;

/** The release states that still own their lanes. */
export const LANE_OWNING_STATES = RELEASE_STATES.filter((s) => !TERMINAL_RELEASE_STATES.has(s));

/**
 * Lane ids per release, by store: a release's manifest never changes, so each release in
 * flight is read once per process, not once per start (a burst of N starts would otherwise
 * read N² releases). Pruned to the releases in flight at each look.
 */
const laneIdsByStore = new WeakMap<Store, Map<string, readonly string[]>>();

/** Ids of the non-terminal releases, newest first, with their lane ids. */
async function lanesInFlight(store: Store): Promise<{ id: string; lanes: readonly string[] }[]> {
  let known = laneIdsByStore.get(store);
  if (!known) {
    known = new Map();
    laneIdsByStore.set(store, known);
  }
  const seen = new Set<string>();
  const out: { id: string; lanes: readonly string[] }[] = [];
  for (const state of LANE_OWNING_STATES) {
    let before: number | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const rows = await store.listReleases({
        state,
        limit: PAGE,
        ...(before === undefined ? {} : { before }),
      });
      for (const row of rows) {
        if (seen.has(row.id)) continue;
        seen.add(row.id);
        let lanes = known.get(row.id);
        if (!lanes) {
          const r = await store.getRelease(row.id);
          if (!r || TERMINAL_RELEASE_STATES.has(r.state)) continue;
          lanes = r.manifest.lanes.map((l) => l.id);
          known.set(row.id, lanes);
        }
        out.push({ id: row.id, lanes });
      }
      if (rows.length < PAGE) break;
      before = rows[rows.length - 1]?.created_at;
    }
  }
  for (const id of known.keys()) if (!seen.has(id)) known.delete(id);
  return out;
}

/** Lane ids of `mine` that `other` also owns (whatever the model). */
export function overlappingLanes(mine: Manifest, other: Manifest): string[] {
  const ids = new Set(other.lanes.map((l) => l.id));
  return mine.lanes.filter((l) => ids.has(l.id)).map((l) => l.id);
}

/**
 * What the owner of lanes can do about a release in flight, from the actions the engine
 * accepts in its state (`availableActions`), e.g. "abort it" for a running release and
 * "resolve or abandon it" for one that needs an operator.
 */
export function howToFree(r: Release | null): string {
  const verbs = r ? new Set(availableActions(r).map((a) => a.action)) : new Set(["abort"]);
  if (verbs.has("abort")) return "wait for it to finish or abort it, then start again";
  const acts = ["resolve", "abandon"].filter((v) => verbs.has(v as "resolve" | "abandon"));
  if (r && acts.length > 0) {
    return `it waits for an operator: ${acts.join(" or ")} it (\`baton status ${r.id}\` says how), then start again`;
  }
  return "wait for it to finish, then start again";
}

/**
 * Throws when a non-terminal release owns a lane of `manifest`.
 * @throws BatonError `conflict` (409) naming the release in flight, its lanes and what to do.
 */
export async function assertLanesFree(store: Store, manifest: Manifest): Promise<void> {
  const mine = new Set(manifest.lanes.map((l) => l.id));
  for (const { id, lanes } of await lanesInFlight(store)) {
    if (!lanes.some((l) => mine.has(l))) continue;
    // Read in full only when it shares a lane: its state and manifest name it in the answer.
    const other = await store.getRelease(id);
    if (!other || TERMINAL_RELEASE_STATES.has(other.state)) continue;
    const shared = overlappingLanes(manifest, other.manifest);
    if (shared.length === 0) continue;
    throw new BatonError(
      "conflict",
      `[engine] release ${other.id} (model ${other.manifest.model}, state ${other.state}) still owns lanes ${shared.join(", ")}; ${howToFree(other)}`,
    );
  }
}

/**
 * The 409 for a start the store refused because other releases claim some of its lanes: names
 * each owning release (model and state when it can be read), its lanes and what to do.
 */
export async function lanesClaimedError(store: Store, err: LanesClaimed): Promise<BatonError> {
  const byOwner = new Map<string, string[]>();
  for (const c of err.owners)
    byOwner.set(c.release_id, [...(byOwner.get(c.release_id) ?? []), c.lane_id]);
  const parts: string[] = [];
  for (const [owner, lanes] of byOwner) {
    const r = await store.getRelease(owner).catch(() => null);
    const about = r ? ` (model ${r.manifest.model}, state ${r.state})` : "";
    parts.push(
      `release ${owner}${about} still owns lanes ${lanes.join(", ")}; ${howToFree(r ?? null)}`,
    );
  }
  const who =
    parts.length > 0
      ? parts.join("; ")
      : `another release in flight claims its lanes; ${howToFree(null)}`;
  return new BatonError("conflict", `[engine] ${who}`);
}
