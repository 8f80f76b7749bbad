/**
 * A queue per key: tasks queued under one key run one at a time, in the order queued; tasks
 * of different keys run at the same time. The release service keys it by release id, so the
 * events and acceptances of one release are decided one at a time in this process (another
 * engine's writes are caught by the store's conditional commit instead).
 *
 * A task that fails (rejects or throws) fails its own caller only; the next task of its key
 * still runs. A key whose tasks have all settled holds no entry, so memory is bounded by the
 * keys busy at once, not by every key ever seen.
 */
export class KeyedQueue {
  /** Per busy key, the promise that settles when its last queued task has settled. */
  private readonly tails = new Map<string, Promise<void>>();

  /**
   * Runs `task` once every task queued earlier under `key` has settled.
   * @returns what `task` returns; rejects with what it throws.
   */
  run<T>(key: string, task: () => T | Promise<T>): Promise<T> {
    let tail: Promise<void> | undefined;
    const run = (this.tails.get(key) ?? Promise.resolve()).then(task).finally(() => {
      // Still the last task of its key: nothing waits behind it, drop the entry. Done here,
      // before the caller sees the answer, so an idle key never holds one.
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    return run;
  }

  /** How many keys have a task queued or running. */
  get size(): number {
    return this.tails.size;
  }
}
