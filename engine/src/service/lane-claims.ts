/**
 * Lane ownership check for `start` (one release at a time per lane). Two releases writing the
 * same lanes at once undo each other: one's compensation restores the old image while the
 * other reports success. A new release is refused (409 `conflict`) when one of its lane ids
 * belongs to a release not yet terminal, in any model: the control plane names lanes by id
 * alone, so one lane id in two models is one lane there. Several lanes may share a machine
 * (same SSH host:port); deploy.sh serialises work per lane on it.
 *
 * Scope: exact for one engine process (the service serialises `start`, so check-then-create
 * cannot interleave). Several engines on one database can still race: two starts at the same
 * instant on different engines both pass the check before either has written its row
 * (docs/engine.md "One release per lane"). Closing that needs a per-lane claim row written in
 * the store's createRelease transaction.
 */
import { BatonError } from "../domain/errors.ts";
import { RELEASE_STATES, TERMINAL_RELEASE_STATES } from "../domain/states.ts";
import type { Manifest, Release } from "../domain/types.ts";
import type { Store } from "../ports/store.ts";

/** Releases read per page, and the bound on pages per state (loops stay bounded). */
const PAGE = 500;
const MAX_PAGES = 20;

/** The release states that still own their lanes. */
export const LANE_OWNING_STATES = RELEASE_STATES.filter((s) => !TERMINAL_RELEASE_STATES.has(s));

/** Non-terminal releases, newest first (one `getRelease` each: they are few). */
async function releasesInFlight(store: Store): Promise<Release[]> {
  const seen = new Set<string>();
  const out: Release[] = [];
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
        const r = await store.getRelease(row.id);
        if (r && !TERMINAL_RELEASE_STATES.has(r.state)) out.push(r);
      }
      if (rows.length < PAGE) break;
      before = rows[rows.length - 1]?.created_at;
    }
  }
  return out;
}

/** Lane ids of `mine` that `other` also owns (whatever the model). */
export function overlappingLanes(mine: Manifest, other: Manifest): string[] {
  const ids = new Set(other.lanes.map((l) => l.id));
  return mine.lanes.filter((l) => ids.has(l.id)).map((l) => l.id);
}

/**
 * Throws when a non-terminal release owns a lane of `manifest`.
 * @throws BatonError `conflict` (409) naming the release in flight, its lanes and what to do.
 */
export async function assertLanesFree(store: Store, manifest: Manifest): Promise<void> {
  for (const other of await releasesInFlight(store)) {
    const shared = overlappingLanes(manifest, other.manifest);
    if (shared.length === 0) continue;
    throw new BatonError(
      "conflict",
      `[engine] release ${other.id} (model ${other.manifest.model}, state ${other.state}) still owns lanes ${shared.join(", ")}; wait for it to finish or abort it, then start again`,
    );
  }
}
