/**
 * Dependency probe port: asks a mutable dependency's provider which revision it serves now
 * (docs/drift.md "Mutable dependencies"). The engine compares the answer with the revision the
 * recipe was qualified against; the answer must come from the provider, never from Baton's own
 * records. The HTTP adapter GETs the recipe's probe URL.
 */
import type { DependencyProbeSpec } from "../domain/mutable-dependencies.ts";

/** A probe's outcome: the provider's revision, or why there is none. Never an exception. */
export type ProbeAnswer = { ok: true; revision: string } | { ok: false; message: string };

export interface DependencyProbe {
  /**
   * The revision `spec` reports now. Never throws: a provider that cannot be reached, answers
   * non-2xx, too slowly (`signal` aborted) or without a revision is `ok: false` with the reason.
   */
  revision(spec: DependencyProbeSpec, signal?: AbortSignal): Promise<ProbeAnswer>;
}
