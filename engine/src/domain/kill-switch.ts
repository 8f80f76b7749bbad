/**
 * Kill switches (docs/recovery-actions.md): a recovery action that is not traffic. It withdraws
 * one capability from every lane of a model at the control plane, and restores it to the lanes
 * that had it. Each action is audited (who, why, when) and carries its evidence: the lanes'
 * capabilities read at the control plane before and after, every keyed write, and its own
 * recovery verification (the read after, judged against what the action asked for).
 *
 * Pure: the book is one engine-state document (`kill_switches`); the service reads the control
 * plane, writes, and stores the book with a compare-and-set (use-cases/kill-switch.ts).
 */
import * as z from "zod";
import type { LaneState } from "../protocol/control-plane.ts";
import { Capability } from "../protocol/fields.ts";
import { lazySchema } from "../protocol/lazy-schema.ts";
import { BatonError } from "./errors.ts";
import { ActorField, ReasonField } from "./verbs.ts";

/** One lane's capabilities as the control plane answered them. */
export interface LaneCapabilities {
  lane: string;
  /** Sorted, as the control plane keeps them. */
  capabilities: string[];
  advertised: boolean;
}

/** One keyed write of an action and how the control plane answered it. */
export interface KillSwitchWrite {
  lane: string;
  operation_key: string;
  /** The absolute capability list sent for the lane. */
  capabilities: string[];
  outcome: "ok" | "failed" | "unknown";
  message?: string;
}

/** One withdraw or restore, with its evidence. */
export interface KillSwitchAction {
  kind: "withdraw" | "restore";
  /** The generation its writes carried (1, 2, … over the switch's actions). */
  generation: number;
  /** Who, as history names actors (`operator:maria`). */
  actor: string;
  reason: string;
  /** Epoch ms: when it was asked for. */
  at: number;
  /** Epoch ms: when its read-back was judged; null while it runs (or if the engine stopped). */
  finished_at: number | null;
  /** The model's lanes read at the control plane before any write. */
  before: LaneCapabilities[];
  /** The model's lanes read back at the control plane after the writes; null if that read failed. */
  after: LaneCapabilities[] | null;
  writes: KillSwitchWrite[];
  /** True only when every write was accepted and the read-back shows what was asked. */
  verified: boolean;
  /** The verdict in words, naming any lane that differs. */
  verification: string;
  /** Open incidents of the model whose timelines got this action. */
  incidents: string[];
}

export interface KillSwitch {
  /** `ks1`, `ks2`, … in order. */
  id: string;
  /** Random; sent as the writes' release uid so another engine database cannot replay them. */
  uid: string;
  model: string;
  capability: string;
  /** `withdrawn` until a restore verifies; then `restored` (closed). */
  state: "withdrawn" | "restored";
  /** The lanes that advertised the capability when it was withdrawn: a restore gives it back to them. */
  lanes: string[];
  /** Every withdraw and restore, oldest first. */
  actions: KillSwitchAction[];
}

/** The stored document: every kill switch and the last number used. */
export interface KillSwitchBook {
  last: number;
  switches: KillSwitch[];
}

export const EMPTY_KILL_SWITCH_BOOK: KillSwitchBook = { last: 0, switches: [] };

/** Parses a stored book; an absent value is the empty book. */
export function killSwitchBookOf(value: unknown): KillSwitchBook {
  if (value === null || value === undefined) return EMPTY_KILL_SWITCH_BOOK;
  return value as KillSwitchBook;
}

const Reason = lazySchema(() =>
  ReasonField.pipe(
    z
      .string()
      .trim()
      .min(
        1,
        'must say why (kept in the record and the incident\'s timeline), e.g. "chat answers leak PII"',
      ),
  ),
);

/** The body of `POST /v1/models/:model/kill-switch` and `…/kill-switch/restore`. */
export const KillSwitchBody = lazySchema(() =>
  z
    .object({
      capability: z.string({ error: "must name the capability, e.g. chat" }).pipe(Capability),
      reason: z.string({ error: 'must say why, e.g. "chat answers leak PII"' }).pipe(Reason),
      actor: ActorField,
    })
    .strict(),
);
export type KillSwitchInput = z.infer<typeof KillSwitchBody>;

/** The lanes as the record keeps them (id order). */
export function capabilitiesOf(lanes: readonly LaneState[]): LaneCapabilities[] {
  return [...lanes]
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((l) => ({ lane: l.id, capabilities: [...l.capabilities], advertised: l.advertised }));
}

/** The capabilities of `model` withdrawn by kill switches in force, sorted. */
export function withdrawnCapabilities(
  book: Pick<KillSwitchBook, "switches">,
  model: string,
): string[] {
  const caps = book.switches
    .filter((s) => s.model === model && s.state === "withdrawn")
    .map((s) => s.capability);
  return [...new Set(caps)].sort();
}

/**
 * `capabilities` without those a kill switch withdrew (sorted, unique): what the engine writes
 * and expects for a lane of the model while the switches are in force. A release's capability
 * writes, the recovery verification after an undo and the fleet's desired state all go through
 * it, so neither a forward step nor an undo gives a withdrawn capability back.
 */
export function withoutWithdrawn(
  capabilities: readonly string[],
  withdrawn: readonly string[],
): string[] {
  return [...new Set(capabilities)].filter((c) => !withdrawn.includes(c)).sort();
}

/** The kill switch of `capability` on `model` still in force, if any. */
export function inForce(
  book: KillSwitchBook,
  model: string,
  capability: string,
): KillSwitch | undefined {
  return book.switches.find(
    (s) => s.model === model && s.capability === capability && s.state === "withdrawn",
  );
}

const last = (s: KillSwitch) => s.actions[s.actions.length - 1];

/**
 * Refusals before any write, on what the control plane showed (`lanes`, the model's lanes):
 * a model no lane serves, a capability no lane of it advertises (unless a switch of it is in
 * force), a capability already withdrawn and verified.
 * @throws BatonError 404 / 409 naming the field and the fix.
 */
export function checkWithdraw(
  book: KillSwitchBook,
  model: string,
  capability: string,
  lanes: readonly LaneCapabilities[],
): void {
  if (lanes.length === 0)
    throw new BatonError(
      "not_found",
      `[engine] model ${model} has no lane at the control plane; check the model name (the dashboard's Fleet page, /fleet, lists the models and their lanes)`,
      [{ path: "model", message: `no lane serves ${model}`, fix: "name a model that has lanes" }],
    );
  const open = inForce(book, model, capability);
  const advertising = lanes.filter((l) => l.capabilities.includes(capability));
  if (open && last(open)?.verified && advertising.length === 0)
    throw new BatonError(
      "conflict",
      `[engine] capability ${capability} of ${model} is already withdrawn by kill switch ${open.id} (${last(open)?.actor}) and no lane of ${model} advertises it at the control plane; restore it with: baton kill-switch ${model} ${capability} --restore --reason "<why>"`,
    );
  if (!open && !lanes.some((l) => l.capabilities.includes(capability))) {
    const known = [...new Set(lanes.flatMap((l) => l.capabilities))].sort();
    throw new BatonError(
      "not_found",
      `[engine] no lane of ${model} advertises capability ${capability} at the control plane; ${known.length ? `its lanes advertise ${known.join(", ")}` : "its lanes advertise none"}`,
      [
        {
          path: "capability",
          message: `${capability} is not advertised by any lane of ${model}`,
          fix: known.length ? `name one of ${known.join(", ")}` : "there is nothing to withdraw",
        },
      ],
    );
  }
}

/** @throws BatonError 409 when no kill switch of `capability` on `model` is in force. */
export function switchToRestore(
  book: KillSwitchBook,
  model: string,
  capability: string,
): KillSwitch {
  const open = inForce(book, model, capability);
  if (!open) {
    const any = book.switches.filter((s) => s.model === model && s.state === "withdrawn");
    throw new BatonError(
      "conflict",
      `[engine] no kill switch of capability ${capability} on ${model} is in force, so there is nothing to restore; ${any.length ? `in force on ${model}: ${any.map((s) => `${s.capability} (${s.id})`).join(", ")}` : `no capability of ${model} is withdrawn`}`,
      [
        {
          path: "capability",
          message: `${capability} is not withdrawn on ${model}`,
          fix: any.length
            ? `name one of ${any.map((s) => s.capability).join(", ")}`
            : "nothing to restore",
        },
      ],
    );
  }
  return open;
}

/**
 * The absolute capability list each lane gets: for a withdraw, every lane of the model that
 * advertises the capability, without it; for a restore, every lane the switch took it from that
 * still serves the model and lacks it, with it. Lanes already as wanted get no write.
 */
export function plannedWrites(
  ks: Pick<KillSwitch, "capability" | "lanes">,
  kind: KillSwitchAction["kind"],
  lanes: readonly LaneCapabilities[],
): { lane: string; capabilities: string[]; advertised: boolean }[] {
  const cap = ks.capability;
  if (kind === "withdraw")
    return lanes
      .filter((l) => l.capabilities.includes(cap))
      .map((l) => ({
        lane: l.lane,
        capabilities: l.capabilities.filter((c) => c !== cap),
        advertised: l.advertised,
      }));
  return lanes
    .filter((l) => ks.lanes.includes(l.lane) && !l.capabilities.includes(cap))
    .map((l) => ({
      lane: l.lane,
      capabilities: [...l.capabilities, cap].sort(),
      advertised: l.advertised,
    }));
}

/**
 * Recovery verification of an action from the read-back (`after`, null when it failed): a
 * withdraw passes when no lane of the model advertises the capability; a restore when every
 * lane the switch took it from advertises it again (a lane that no longer serves the model is
 * named and not counted). Any write not accepted fails it.
 */
export function verify(
  ks: Pick<KillSwitch, "model" | "capability" | "lanes">,
  kind: KillSwitchAction["kind"],
  writes: readonly KillSwitchWrite[],
  after: readonly LaneCapabilities[] | null,
): { verified: boolean; verification: string } {
  const cap = ks.capability;
  const bad = writes.filter((w) => w.outcome !== "ok");
  const notes = bad.map((w) => `the write to ${w.lane} was ${w.outcome}: ${w.message ?? ""}`);
  if (after === null)
    return {
      verified: false,
      verification: `not verified: the read-back of ${ks.model}'s lanes at the control plane failed${notes.length ? `; ${notes.join("; ")}` : ""}`,
    };
  if (kind === "withdraw") {
    const still = after.filter((l) => l.capabilities.includes(cap)).map((l) => l.lane);
    if (still.length || bad.length)
      return {
        verified: false,
        verification: `not verified: ${still.length ? `${still.join(", ")} still advertise ${cap} at the control plane` : ""}${still.length && notes.length ? "; " : ""}${notes.join("; ")}`,
      };
    return {
      verified: true,
      verification: `verified: no lane of ${ks.model} (${after.map((l) => l.lane).join(", ")}) advertises ${cap} at the control plane`,
    };
  }
  const seen = new Set(after.map((l) => l.lane));
  const gone = ks.lanes.filter((l) => !seen.has(l));
  const missing = after
    .filter((l) => ks.lanes.includes(l.lane) && !l.capabilities.includes(cap))
    .map((l) => l.lane);
  const aside = gone.length ? ` (${gone.join(", ")} no longer serve ${ks.model}: not counted)` : "";
  if (missing.length || bad.length)
    return {
      verified: false,
      verification: `not verified: ${missing.length ? `${missing.join(", ")} do not advertise ${cap} at the control plane` : ""}${missing.length && notes.length ? "; " : ""}${notes.join("; ")}${aside}`,
    };
  return {
    verified: true,
    verification: `verified: ${ks.lanes.filter((l) => seen.has(l)).join(", ") || "no lane"} advertise ${cap} again at the control plane${aside}`,
  };
}

/** The operation key of one write: `ks3:withdraw:g1:lane-a`, unique per switch, generation and lane. */
export function killSwitchKey(
  ks: Pick<KillSwitch, "id">,
  kind: KillSwitchAction["kind"],
  generation: number,
  lane: string,
): string {
  return `${ks.id}:${kind}:g${generation}:${lane}`;
}

/** One line for timelines and the CLI: what the action did and its verdict. */
export function actionLine(ks: KillSwitch, a: KillSwitchAction): string {
  const lanes = a.writes.map((w) => w.lane).join(", ") || "no lane";
  const verb = a.kind === "withdraw" ? "withdrew" : "restored";
  return `kill switch ${ks.id}: ${verb} capability ${ks.capability} of ${ks.model} on ${lanes} (${a.verified ? "verified at the control plane" : "NOT verified"}): ${a.reason}`;
}
