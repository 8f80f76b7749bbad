/**
 * One engine-state document (a named JSON value in the store, e.g. the incident book) read and
 * changed with the store's compare-and-set (`swapState`), so engines sharing a database never
 * lose each other's writes: a change is recomputed from a fresh read whenever another engine
 * wrote first.
 */
import { BatonError } from "../domain/errors.ts";
import type { Json } from "../domain/types.ts";
import type { Clock } from "../ports/clock.ts";
import type { Store } from "../ports/store.ts";

/** Attempts of one change against concurrent writers before it gives up (503). */
export const MAX_SWAPS = 8;

/** A document of type `D` stored as engine state `name`. */
export class StateDocument<D> {
  /**
   * @param parse turns the stored value (absent: undefined) into the document.
   * @param what names the document in the 503 message, e.g. "incident book".
   */
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly name: string,
    private readonly parse: (value: unknown) => D,
    private readonly what: string,
  ) {}

  /** The document and the time it was last written (null: never). */
  async read(): Promise<{ doc: D; at: number | null }> {
    const s = await this.store.getState(this.name);
    return { doc: this.parse(s?.value), at: s ? s.at : null };
  }

  /**
   * Applies `change` (pure: the document and now → the next document and a result) with
   * compare-and-set, recomputed on a fresh read while other writers win. Returning the same
   * document object writes nothing.
   * @throws BatonError `unavailable` (503) after `MAX_SWAPS` lost races in a row.
   */
  async change<T>(change: (doc: D, now: number) => { doc: D; out: T }): Promise<T> {
    for (let i = 0; i < MAX_SWAPS; i++) {
      const { doc, at } = await this.read();
      const now = this.clock.now();
      const next = change(doc, now);
      if (next.doc === doc) return next.out;
      const wrote = await this.store.swapState({
        name: this.name,
        value: next.doc as unknown as Json,
        now,
        expect: at,
      });
      if (wrote !== null) return next.out;
    }
    throw new BatonError(
      "unavailable",
      `[engine] the ${this.what} changed under ${MAX_SWAPS} attempts in a row (other engines writing); try again`,
    );
  }
}
