/**
 * "Effects are due": the one signal from the commit side (ReleaseService) to the performing side
 * (Reconciler). Built first by the core, handed to the service (which only `notify`s) and
 * connected to the reconciler's `kick` (which only listens), so neither knows the other.
 */
export class EffectsDue {
  private readonly listeners: (() => void)[] = [];

  /** Called by the service after a commit that wrote effects. Never throws. */
  notify(): void {
    for (const l of this.listeners) {
      try {
        l();
      } catch {
        // A listener's failure is its own (the reconciler logs its errors).
      }
    }
  }

  /** Adds a listener (the core: the reconciler's `kick`). */
  listen(listener: () => void): void {
    this.listeners.push(listener);
  }
}
