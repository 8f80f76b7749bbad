/** Pending injected hangs, released early when the server closes so nothing outlives it. */
export class Hangs {
  private readonly pending = new Set<() => void>();

  /** Resolves after `ms` or on `releaseAll`, whichever comes first. */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.pending.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.pending.add(done);
    });
  }

  releaseAll(): void {
    for (const done of [...this.pending]) done();
  }
}
