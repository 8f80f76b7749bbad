/**
 * The rules of the reference control plane, over any `CpStore` (SQLite for the server, Maps for
 * the test double): keyed absolute writes with a ledger, stale-generation refusal, history of
 * every applied change, reads and the deterministic router. docs/state-machine.md rules 4, 5, 7.
 *
 * Order of checks for a write, inside one transaction:
 * 1. the operation key is in the ledger: written by another release uid (both known) -> 422
 *    (two engine databases share this control plane and number releases alike); same request
 *    -> replay the stored answer (nothing applied again), other request -> 422. A write without
 *    a uid (old client), or a ledger row without one, is matched on the request alone. A replay is answered even for an older generation:
 *    it applies nothing, and refusing it would tell an engine that re-sends an applied-but-unknown
 *    write that it failed when it took effect (rule 5).
 * 2. generation < highest applied for the release id -> 409 (stale writer, rule 7).
 * 3. the write names a lane never declared (`PUT /v1/lanes/:lane`) or seeded -> 404
 *    `unknown_lane`: a write never creates a lane.
 * 4. apply, append history, record the ledger row and the generation.
 */
import type { Json } from "../domain/types.ts";
import { canonicalJson } from "../protocol/canonical-json.ts";
import { sha256Hex } from "../protocol/sha256.ts";
import { CpError } from "./errors.ts";
import type {
  ChangeRecord,
  CpAction,
  LaneState,
  LedgerEntry,
  RouteResult,
  WriteIdentity,
  WriteResult,
} from "./model.ts";
import { route } from "./router.ts";
import {
  Capabilities,
  Identity,
  imageRef,
  LaneId,
  ModelName,
  parseOrThrow,
  Weight,
  Weights,
} from "./schemas.ts";
import type { CpStore, HistoryFilter } from "./store.ts";

/** Default model name when a client names none (from the wire contract). */
export { DEFAULT_MODEL } from "../protocol/control-plane.ts";

/** Sorted, de-duplicated capabilities; keys of weights sorted (via canonical JSON). */
export function canonicalAction(action: CpAction): CpAction {
  if (action.kind === "set_capabilities") {
    return { ...action, capabilities: [...new Set(action.capabilities)].sort() };
  }
  return action;
}

function validateAction(action: CpAction): void {
  switch (action.kind) {
    case "set_traffic":
      parseOrThrow(ModelName, action.model, "model");
      parseOrThrow(Weights, action.weights, "weights");
      return;
    case "set_weight":
      parseOrThrow(LaneId, action.lane, "lane");
      parseOrThrow(Weight, action.weight, "weight");
      return;
    case "set_marker":
      parseOrThrow(LaneId, action.lane, "lane");
      if (action.marker !== "excluded" || typeof action.present !== "boolean") {
        throw new CpError(
          "bad_request",
          "[control-plane] bad marker write: marker must be `excluded` and present a boolean",
        );
      }
      return;
    case "set_capabilities":
      parseOrThrow(LaneId, action.lane, "lane");
      parseOrThrow(Capabilities, action.capabilities, "capabilities");
      if (typeof action.advertised !== "boolean") {
        throw new CpError(
          "bad_request",
          "[control-plane] bad capabilities write: advertised must be a boolean",
        );
      }
      return;
    case "declare_lane":
      parseOrThrow(LaneId, action.lane, "lane");
      parseOrThrow(ModelName, action.model, "model");
      if (action.image !== undefined) parseOrThrow(imageRef("image"), action.image, "image");
      return;
  }
}

function newLane(id: string, now: number): LaneState {
  return {
    id,
    model: null,
    weight: 0,
    excluded: false,
    capabilities: [],
    advertised: false,
    updated_at: now,
  };
}

const laneJson = (lane: LaneState | undefined): Json =>
  lane ? ({ ...lane } as unknown as Json) : null;

/** The control plane's behaviour over a store. Methods are synchronous and throw `CpError`. */
export class ControlPlaneCore {
  constructor(
    readonly store: CpStore,
    private readonly now: () => number = Date.now,
  ) {}

  /** Applies one keyed absolute write, or replays it. Throws `CpError` 400/409/422. */
  write(identity: WriteIdentity, input: CpAction): WriteResult {
    parseOrThrow(Identity, { ...identity, generation: String(identity.generation) }, "");
    validateAction(input);
    const action = canonicalAction(input);
    // Same bytes as before for any validated action (sorted keys, no whitespace).
    const hash = sha256Hex(canonicalJson({ release_id: identity.release_id, action }));
    return this.store.transaction(() => {
      const prior = this.store.getLedger(identity.operation_key);
      if (prior) return this.replay(prior, hash, identity);

      const mark = this.store.getGeneration(identity.release_id);
      if (mark !== undefined && identity.generation < mark) {
        throw new CpError(
          "stale_generation",
          `[control-plane] stale writer: release ${identity.release_id} generation ${identity.generation} < ${mark} already applied; re-read the release and write with its current generation`,
        );
      }
      const at = this.now();
      const change = this.applyAction(action, at);
      const record = this.store.appendHistory({
        at,
        operation_key: identity.operation_key,
        release_id: identity.release_id,
        generation: identity.generation,
        kind: action.kind,
        ...change,
      });
      this.store.setGeneration(identity.release_id, Math.max(mark ?? 0, identity.generation));
      const response: Record<string, Json> = {
        applied: true,
        replayed: false,
        operation_key: identity.operation_key,
        release_id: identity.release_id,
        generation: identity.generation,
        kind: action.kind,
        history_id: record.id,
        applied_at: at,
        state: change.after,
      };
      this.store.putLedger({
        operation_key: identity.operation_key,
        request_hash: hash,
        release_id: identity.release_id,
        release_uid: identity.release_uid ?? null,
        generation: identity.generation,
        action,
        response,
        at,
      });
      return { replayed: false, response };
    });
  }

  private replay(prior: LedgerEntry, hash: string, identity: WriteIdentity): WriteResult {
    if (prior.release_uid && identity.release_uid && prior.release_uid !== identity.release_uid) {
      throw new CpError(
        "operation_key_reused",
        `[control-plane] operation key ${identity.operation_key} was already used by another release ${prior.release_id} (uid ${prior.release_uid}); this write comes from release ${identity.release_id} (uid ${identity.release_uid}): two engine databases are writing to one control plane — give each engine its own control plane or share one database`,
      );
    }
    if (prior.request_hash !== hash) {
      throw new CpError(
        "operation_key_reused",
        `[control-plane] operation key ${identity.operation_key} was already used by release ${prior.release_id} for another request (${prior.action.kind}); a different effect never reuses a key: build a new operation key`,
      );
    }
    return { replayed: true, response: { ...prior.response, replayed: true } };
  }

  private applyAction(
    action: CpAction,
    at: number,
  ): { lane: string | null; model: string | null; before: Json; after: Json } {
    const s = this.store;
    switch (action.kind) {
      case "set_traffic": {
        const current = s.listLanes(action.model);
        for (const id of Object.keys(action.weights)) {
          const lane = s.getLane(id);
          if (!lane) throw unknownLane(id, action.model);
          if (lane?.model && lane.model !== action.model) {
            throw new CpError(
              "lane_model_conflict",
              `[control-plane] lane ${id} serves model ${lane.model}, not ${action.model}; declare it for ${action.model} first (PUT /v1/lanes/${id})`,
              [
                {
                  path: `weights.${id}`,
                  message: `lane serves model ${lane.model}`,
                  fix: "name only lanes of this model",
                },
              ],
            );
          }
        }
        const before = weightsOf(current);
        for (const lane of current) {
          if (!Object.hasOwn(action.weights, lane.id))
            s.putLane({ ...lane, weight: 0, updated_at: at });
        }
        for (const [id, weight] of Object.entries(action.weights)) {
          const lane = s.getLane(id) ?? newLane(id, at); // checked above: declared
          s.putLane({ ...lane, model: action.model, weight, updated_at: at });
        }
        return {
          lane: null,
          model: action.model,
          before,
          after: weightsOf(s.listLanes(action.model)),
        };
      }
      case "set_weight":
        this.declared(action.lane);
        return this.updateLane(action.lane, at, (l) => ({ ...l, weight: action.weight }));
      case "set_marker":
        this.declared(action.lane);
        return this.updateLane(action.lane, at, (l) => ({ ...l, excluded: action.present }));
      case "set_capabilities":
        this.declared(action.lane);
        return this.updateLane(action.lane, at, (l) => ({
          ...l,
          capabilities: action.capabilities,
          advertised: action.advertised,
        }));
      case "declare_lane": {
        const r = this.updateLane(action.lane, at, (l) => {
          const declared = l.model === action.model ? l : { ...l, model: action.model, weight: 0 };
          return action.image === undefined ? declared : { ...declared, image: action.image };
        });
        return { ...r, model: action.model };
      }
    }
  }

  /** Throws `unknown_lane` (404) when no lane `id` was ever declared or seeded. */
  private declared(id: string): void {
    if (!this.store.getLane(id)) throw unknownLane(id, null);
  }

  private updateLane(id: string, at: number, change: (l: LaneState) => LaneState) {
    const before = this.store.getLane(id);
    const after = { ...change(before ?? newLane(id, at)), updated_at: at };
    this.store.putLane(after);
    return { lane: id, model: null, before: laneJson(before), after: laneJson(after) };
  }

  /**
   * Records the image lane `id` reports it runs now (`LaneState.image`, `name@sha256:…`): the
   * lane's own report after a deploy or a restore, not a Baton write (no operation key, no
   * ledger row, no history entry; weights, marker and capabilities untouched).
   * @throws CpError `not_found` (404) for a lane never declared, `bad_request` (400) for an
   *   image not pinned by digest.
   */
  reportImage(id: string, image: string): LaneState {
    parseOrThrow(imageRef("image"), image, "image");
    return this.store.transaction(() => {
      const lane = this.lane(id);
      const after = { ...lane, image, updated_at: this.now() };
      this.store.putLane(after);
      return after;
    });
  }

  /** One lane; throws 404 naming the lane when unknown. */
  lane(id: string): LaneState {
    const lane = this.store.getLane(id);
    if (!lane) {
      throw new CpError(
        "not_found",
        `[control-plane] lane ${id} is unknown; declare it with PUT /v1/lanes/${id} (a write never creates a lane)`,
      );
    }
    return lane;
  }

  /** Lanes ordered by id, optionally of one model. */
  lanes(model?: string): LaneState[] {
    return this.store.listLanes(model);
  }

  /** Weights of a model's lanes; throws 404 when no lane serves the model. */
  traffic(model: string): { model: string; weights: Record<string, number>; lanes: LaneState[] } {
    const lanes = this.store.listLanes(model);
    if (lanes.length === 0) {
      throw new CpError(
        "not_found",
        `[control-plane] no lane serves model ${model}; set its traffic first (PUT /v1/models/${model}/traffic)`,
      );
    }
    return { model, weights: weightsOf(lanes), lanes };
  }

  /** Splits `requests` over the model's lanes (see `router.ts`). Throws 404 for an unknown model. */
  route(model: string, requests: number): RouteResult {
    return route(model, this.traffic(model).lanes, requests);
  }

  history(q: HistoryFilter = {}): ChangeRecord[] {
    return this.store.listHistory(q);
  }

  ledger(q: { release_id?: string; limit?: number } = {}): LedgerEntry[] {
    return this.store.listLedger(q);
  }

  /** Applications (history entries) per operation key; replays are not applications. */
  applicationCounts(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const h of this.store.listHistory({})) {
      counts[h.operation_key] = (counts[h.operation_key] ?? 0) + 1;
    }
    return counts;
  }

  /**
   * Test arrangement: puts lanes as given, with no ledger row and no history entry (the state
   * a fleet was in before any release). Missing fields take the defaults of a new lane.
   */
  seed(lanes: (Partial<LaneState> & { id: string })[]): void {
    this.store.transaction(() => {
      for (const l of lanes) this.store.putLane({ ...newLane(l.id, this.now()), ...l });
    });
  }
}

function unknownLane(id: string, model: string | null): CpError {
  return new CpError(
    "unknown_lane",
    `[control-plane] lane ${id} is unknown; a write never creates a lane: declare it first (PUT /v1/lanes/${id} {"model":"${model ?? "<model>"}"})`,
    [
      {
        path: model ? `weights.${id}` : "path.lane",
        message: `lane ${id} is unknown`,
        fix: `declare the lane first (PUT /v1/lanes/${id})`,
      },
    ],
  );
}

/** lane id -> weight, keys in id order. */
export function weightsOf(lanes: LaneState[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const lane of [...lanes].sort((a, b) => (a.id < b.id ? -1 : 1))) out[lane.id] = lane.weight;
  return out;
}
