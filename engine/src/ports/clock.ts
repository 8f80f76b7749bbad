/** Time source, injected so tests and deadlines are deterministic. Epoch milliseconds. */
export interface Clock {
  now(): number;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() };
