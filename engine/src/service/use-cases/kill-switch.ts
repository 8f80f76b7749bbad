/**
 * Kill switches (docs/recovery-actions.md): withdraw one capability from every lane of a model
 * at the control plane, and restore it. Each action reads the model's lanes at the control plane
 * before, sends one keyed absolute capability write per lane that changes, reads the lanes back
 * and judges that read (its recovery verification: what the control plane holds, not what the
 * engine sent). The book is one engine-state document (`kill_switches`) changed with the
 * store's compare-and-set, like the incident book. Every action goes into the timeline of each
 * open incident that names the model.
 */
import { BatonError } from "../../domain/errors.ts";
import {
  actionLine,
  capabilitiesOf,
  checkWithdraw,
  type KillSwitch,
  type KillSwitchAction,
  type KillSwitchBook,
  type KillSwitchWrite,
  killSwitchBookOf,
  killSwitchKey,
  type LaneCapabilities,
  plannedWrites,
  switchToRestore,
  verify,
  withdrawnCapabilities,
} from "../../domain/kill-switch.ts";
import type { Clock } from "../../ports/clock.ts";
import type { ControlPlane } from "../../ports/control-plane.ts";
import type { Store } from "../../ports/store.ts";
import { randomHex } from "../../protocol/ids.ts";
import { StateDocument } from "../state-document.ts";
import type { Incidents } from "./incidents.ts";

const STATE = "kill_switches";

/**
 * The capabilities of `model` withdrawn by kill switches in force, sorted (one read of the
 * book): what a release's capability writes, its recovery verification and the fleet's desired
 * state leave out (domain/kill-switch.ts `withoutWithdrawn`).
 */
export async function withdrawnOf(
  store: Pick<Store, "getState">,
  model: string,
): Promise<string[]> {
  const s = await store.getState(STATE);
  return withdrawnCapabilities(killSwitchBookOf(s?.value), model);
}

function uid(): string {
  return randomHex(8);
}

export class KillSwitches {
  constructor(
    store: Store,
    private readonly clock: Clock,
    private readonly controlPlane: ControlPlane | null,
    private readonly incidents: Incidents,
  ) {
    this.doc = new StateDocument(store, clock, STATE, killSwitchBookOf, "kill-switch book");
  }

  private readonly doc: StateDocument<KillSwitchBook>;

  /** Every kill switch, newest first; of one model when `model` is given. */
  async list(model?: string): Promise<KillSwitch[]> {
    const all = [...(await this.doc.read()).doc.switches].reverse();
    return model === undefined ? all : all.filter((s) => s.model === model);
  }

  /** The model's lanes at the control plane now. @throws BatonError 503 when it cannot be read. */
  private async lanesOf(model: string): Promise<LaneCapabilities[]> {
    const cp = this.controlPlane;
    if (!cp?.lanes)
      throw new BatonError(
        "unavailable",
        "[engine] no control plane that lists lanes is configured (BATON_CONTROL_PLANE_URL); a kill switch reads and writes the lanes there",
      );
    const r = await cp.lanes(model);
    if (!r.ok)
      throw new BatonError(
        "unavailable",
        `[engine] the control plane did not answer the read of ${model}'s lanes (${r.message}); nothing was written: try again when it answers`,
      );
    return capabilitiesOf(r.lanes.filter((l) => l.model === model));
  }

  /** The read-back after the writes; null when it failed (the action is then not verified). */
  private async readBack(model: string): Promise<LaneCapabilities[] | null> {
    try {
      return await this.lanesOf(model);
    } catch {
      return null;
    }
  }

  /**
   * Withdraws `capability` from every lane of `model`. A switch of it in force whose last
   * withdraw was not verified is withdrawn again (a new generation); one that was verified is
   * refused (409). The answer holds the switch with this action's evidence.
   * @throws BatonError 404 (no lane of the model, capability advertised by none), 409, 503.
   */
  withdraw(model: string, capability: string, reason: string, actor: string): Promise<KillSwitch> {
    return this.act("withdraw", model, capability, reason, actor);
  }

  /**
   * Gives `capability` back to the lanes the switch in force took it from.
   * @throws BatonError 409 when none is in force, 503.
   */
  restore(model: string, capability: string, reason: string, actor: string): Promise<KillSwitch> {
    return this.act("restore", model, capability, reason, actor);
  }

  private async act(
    kind: KillSwitchAction["kind"],
    model: string,
    capability: string,
    reason: string,
    actor: string,
  ): Promise<KillSwitch> {
    const before = await this.lanesOf(model);
    // Reserve the action (and, for a new switch, its id) before any write.
    const started = await this.doc.change((book, now) => {
      let ks: KillSwitch;
      let next: KillSwitchBook;
      if (kind === "withdraw") {
        checkWithdraw(book, model, capability, before);
        const open = book.switches.find(
          (s) => s.model === model && s.capability === capability && s.state === "withdrawn",
        );
        const had = before.filter((l) => l.capabilities.includes(capability)).map((l) => l.lane);
        ks = open
          ? { ...open, lanes: [...new Set([...open.lanes, ...had])].sort() }
          : {
              id: `ks${book.last + 1}`,
              uid: uid(),
              model,
              capability,
              state: "withdrawn",
              lanes: had,
              actions: [],
            };
        next = open ? book : { ...book, last: book.last + 1 };
      } else {
        ks = switchToRestore(book, model, capability);
        next = book;
      }
      const action: KillSwitchAction = {
        kind,
        generation: ks.actions.length + 1,
        actor,
        reason,
        at: now,
        finished_at: null,
        before,
        after: null,
        writes: [],
        verified: false,
        verification: "not verified: the action has not finished",
        incidents: [],
      };
      const out: KillSwitch = { ...ks, actions: [...ks.actions, action] };
      const has = next.switches.some((s) => s.id === out.id);
      return {
        doc: {
          ...next,
          switches: has
            ? next.switches.map((s) => (s.id === out.id ? out : s))
            : [...next.switches, out],
        },
        out,
      };
    });
    const action = started.actions[started.actions.length - 1] as KillSwitchAction;

    const writes: KillSwitchWrite[] = [];
    for (const w of plannedWrites(started, kind, before)) {
      const key = killSwitchKey(started, kind, action.generation, w.lane);
      const r = await (this.controlPlane as ControlPlane).apply(
        {
          op: "set_capabilities",
          lane: w.lane,
          capabilities: w.capabilities,
          advertised: w.advertised,
        },
        {
          operation_key: key,
          release_id: started.id,
          generation: action.generation,
          model,
          release_uid: started.uid,
        },
      );
      writes.push({
        lane: w.lane,
        operation_key: key,
        capabilities: w.capabilities,
        outcome: r.outcome,
        ...(r.outcome === "ok" ? {} : { message: r.message }),
      });
    }
    const after = await this.readBack(model);
    const verdict = verify(started, kind, writes, after);
    const done: KillSwitchAction = {
      ...action,
      after,
      writes,
      ...verdict,
      finished_at: this.clock.now(),
    };
    const ks0: KillSwitch = {
      ...started,
      state: kind === "restore" && verdict.verified ? "restored" : "withdrawn",
    };
    done.incidents = await this.incidents.recordRecovery(model, actionLine(ks0, done), actor);
    return this.doc.change((book) => {
      const cur = book.switches.find((s) => s.id === started.id);
      if (!cur)
        return { doc: book, out: { ...ks0, actions: [...started.actions.slice(0, -1), done] } };
      const actions = cur.actions.map((a) => (a.generation === done.generation ? done : a));
      const out: KillSwitch = { ...cur, state: ks0.state, actions };
      return {
        doc: { ...book, switches: book.switches.map((s) => (s.id === out.id ? out : s)) },
        out,
      };
    });
  }
}
