/**
 * Reads what the fleet page needs: the newest releases (at most `FLEET_PER_MODEL` records per
 * model out of the newest `FLEET_RELEASES`) and the control plane's lanes, and a cheap mark
 * (sha256 of the release list's ids, states and versions plus the lanes read) that changes
 * whenever the page would.
 */

import { type FleetModel, fleetFacts } from "../domain/fleet.ts";
import { withdrawnCapabilities } from "../domain/kill-switch.ts";
import type { ControlPlane, LanesRead } from "../ports/control-plane.ts";
import { sha256Hex } from "../protocol/sha256.ts";
import type { ReleaseApi } from "./api.ts";

/** Releases listed per read (newest first). */
export const FLEET_RELEASES = 100;
/** Release records loaded per model (the newest decide each lane's desired state). */
export const FLEET_PER_MODEL = 5;

/**
 * The fleet of one model (or every model when `model` is null). With `markOnly` no release
 * record is loaded and `models` is empty. Throws what the store throws; a control plane that
 * cannot be read is reported per model, not thrown.
 */
export async function loadFleet(
  api: ReleaseApi,
  cp: Pick<ControlPlane, "lanes"> | undefined,
  model: string | null,
  o: { markOnly?: boolean } = {},
): Promise<{ models: FleetModel[]; mark: string }> {
  const rows = (await api.list({ limit: FLEET_RELEASES })).filter(
    (r) => model === null || r.model === model,
  );
  let read: LanesRead | null = null;
  if (cp?.lanes) {
    try {
      read = await cp.lanes(model ?? undefined);
    } catch (err) {
      read = { ok: false, message: `[dashboard] ${(err as Error)?.message ?? String(err)}` };
    }
  }
  const mark = sha256Hex(
    JSON.stringify([rows.map((r) => [r.id, r.state, r.updated_at]), read]),
  ).slice(0, 32);
  if (o.markOnly) return { models: [], mark };
  const count = new Map<string, number>();
  const picked = rows.filter((r) => {
    const n = (count.get(r.model) ?? 0) + 1;
    count.set(r.model, n);
    return n <= FLEET_PER_MODEL;
  });
  const records = await Promise.all(picked.map((r) => api.get(r.id)));
  const names = new Set<string>(model === null ? picked.map((r) => r.model) : [model]);
  if (model === null && read?.ok) for (const l of read.lanes) if (l.model) names.add(l.model);
  const reads = new Map<string, LanesRead>();
  if (read) for (const m of names) reads.set(m, read);
  const book = { switches: await api.killSwitches.list() };
  const withdrawn = new Map([...names].map((m) => [m, withdrawnCapabilities(book, m)]));
  return { models: fleetFacts(records, reads, withdrawn), mark };
}
