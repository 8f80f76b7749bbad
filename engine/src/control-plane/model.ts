/**
 * Shapes of the reference control plane (docs/control-plane.md): lanes, keyed writes,
 * the ledger and the history of applied changes. Pure data. Times are epoch ms; weights are
 * integer percents 0–100.
 */
import type { Json } from "../domain/types.ts";

import type { CpAction, LaneState } from "../protocol/control-plane.ts";

/** Wire shapes live in protocol/control-plane.ts; re-exported for the server's modules. */
export type { CpAction, LaneState };

/** Identity of a write (port `WriteContext`): carried as headers over HTTP. */
export interface WriteIdentity {
  operation_key: string;
  release_id: string;
  generation: number;
  /** Random identity of the release (header `Baton-Release-Uid`); optional for old clients. */
  release_uid?: string;
}

/** One applied change, as `GET /v1/history` lists it. Replays add no entry. */
export interface ChangeRecord {
  /** 1-based, increasing in application order. */
  id: number;
  at: number;
  operation_key: string;
  release_id: string;
  generation: number;
  kind: CpAction["kind"];
  /** Lane the write concerns; null for `set_traffic`. */
  lane: string | null;
  /** Model concerned (traffic writes, declarations); null otherwise. */
  model: string | null;
  /** State before and after: a `LaneState` (or null if absent) or a weights map. */
  before: Json;
  after: Json;
}

/** One ledger row: the first application of an operation key and the answer given. */
export interface LedgerEntry {
  operation_key: string;
  /** sha256 (hex) of the canonical JSON of the action. */
  request_hash: string;
  release_id: string;
  /** Uid of the release that first used the key; null when that write carried none. */
  release_uid: string | null;
  generation: number;
  action: CpAction;
  /** The answer of the first application; replays return it with `replayed: true`. */
  response: Record<string, Json>;
  at: number;
}

/** Outcome of a write accepted by the core (refusals are thrown as `CpError`). */
export interface WriteResult {
  replayed: boolean;
  response: Record<string, Json>;
}

/** Router answer: exact integer counts per lane that sum to `requests` (unless no lane can take any). */
export interface RouteResult {
  model: string;
  requests: number;
  counts: Record<string, number>;
  /** Requests no lane could take (every lane excluded or at weight 0). */
  unrouted: number;
}
