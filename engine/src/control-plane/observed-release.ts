/**
 * The release that last wrote a model's traffic or one of its lanes, read from the control
 * plane's change history: the label the reference router and the traffic generator put on every
 * request they forward (docs/control-plane.md).
 */
import type { ChangeRecord, LaneState } from "./model.ts";

/**
 * The release a model's traffic is under, read from the control plane's history: the release of
 * the latest applied change to the model's traffic or to one of its lanes. Reads only entries it
 * has not seen (`after`), so a request costs no more than the changes since the last one.
 */
export class ObservedRelease {
  private after = 0;
  /** `m:<model>` or `l:<lane>` -> the latest change to it (history id) and its release. */
  private readonly latest = new Map<string, { id: number; release: string }>();
  constructor(
    private readonly history: (q: { after: number }) => ChangeRecord[],
    private readonly lanes: (model: string) => LaneState[],
  ) {}

  /** The release of the latest change to `model` or its lanes; null when none wrote them. */
  of(model: string): string | null {
    for (const c of this.history({ after: this.after })) {
      this.after = Math.max(this.after, c.id);
      const seen = { id: c.id, release: c.release_id };
      if (c.model !== null) this.latest.set(`m:${c.model}`, seen);
      if (c.lane !== null) this.latest.set(`l:${c.lane}`, seen);
    }
    const keys = [`m:${model}`, ...this.lanes(model).map((l) => `l:${l.id}`)];
    let best: { id: number; release: string } | undefined;
    for (const k of keys) {
      const v = this.latest.get(k);
      if (v && (!best || v.id > best.id)) best = v;
    }
    return best?.release ?? null;
  }
}
