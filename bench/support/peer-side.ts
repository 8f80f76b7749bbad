/**
 * One side of `bench:peer` in a process of its own (Baton's engine: peer-baton.ts; DBOS
 * Transact: peer-dbos.ts), so that each side's Node CPU time is its own and neither side's
 * timers, caches or garbage run during the other's turn. Started by `fork` with an IPC channel:
 *
 *   environment   PEER_DATABASE_URL (a fresh database of its own), PEER_RELEASES (timed
 *                 releases), PEER_WARMUP (releases driven first, untimed), PEER_TIMEOUT_MS
 *   → parent      `{ ready: true }` once warmed up (the parent then takes its snapshots),
 *                 `{ done: SideFigures }` after the timed releases all succeeded, or
 *                 `{ error: message }` (then the process exits 1)
 *   ← parent      `"go"`: start the timed releases; `"close"`: shut down and exit 0
 */
import type { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import { benchRecipe, type InProcessApp, OPERATOR, playRunners } from "./release-world.ts";

/** What a side reports for its timed releases. */
export interface SideFigures {
  releases: number;
  /** Steps run forward (releases × steps of the manifest). */
  steps: number;
  /** From the first start request to the last release succeeded (ms). */
  wall_ms: number;
  /** User + system CPU of this process over the same span (ms), `process.cpuUsage`. */
  node_cpu_ms: number;
}

/** What a side gives the harness. */
export interface Side {
  /** Steps of one release (the compiled manifest's length). */
  steps: number;
  /** The app that answers the start request and the runners' preflights and callbacks. */
  app: InProcessApp;
  /** The dispatcher the side dispatches runner steps through (the runners listen on it). */
  dispatcher: MemoryDispatcher;
  close(): Promise<void>;
}

/** Callbacks a side calls when one of its releases ended. */
export interface Outcomes {
  succeeded(id: string): void;
  failed(err: Error): void;
}

const send = (m: unknown) => process.send?.(m);

/**
 * Runs one side: builds it with `make`, drives PEER_WARMUP releases, reports ready, and on
 * "go" drives PEER_RELEASES releases at once, timed. Every release is started as a user
 * would: `POST /v1/releases` with the benchmark recipe and the operator token.
 */
export async function serveSide(make: (o: Outcomes) => Promise<Side>): Promise<void> {
  const releases = Number(process.env.PEER_RELEASES ?? 100);
  const warmup = Number(process.env.PEER_WARMUP ?? 5);
  const timeoutMs = Number(process.env.PEER_TIMEOUT_MS ?? 300_000);
  let finished = 0;
  let waiter: { want: number; resolve: () => void; reject: (e: Error) => void } | null = null;
  let failure: Error | null = null;
  const outcomes: Outcomes = {
    succeeded() {
      finished++;
      if (waiter && finished >= waiter.want) waiter.resolve();
    },
    failed(err) {
      failure ??= err;
      waiter?.reject(err);
    },
  };
  const die = (err: unknown) => {
    send({ error: (err as Error)?.message ?? String(err) });
    setTimeout(() => process.exit(1), 50);
  };
  try {
    const side = await make(outcomes);
    playRunners(side.dispatcher, side.app, outcomes.failed);
    const body = JSON.stringify(benchRecipe());
    const start = async () => {
      const res = await side.app.request("/v1/releases", {
        method: "POST",
        headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/json" },
        body,
      });
      const text = await res.text();
      if (res.status !== 201) throw new Error(`[bench] start answered ${res.status}: ${text}`);
    };
    const drive = async (n: number) => {
      const want = finished + n;
      const done = new Promise<void>((resolve, reject) => {
        if (failure) reject(failure);
        waiter = { want, resolve, reject };
      });
      const timer = setTimeout(
        () =>
          waiter?.reject(
            new Error(
              `[bench] ${want - finished} of ${n} releases not succeeded in ${timeoutMs} ms`,
            ),
          ),
        timeoutMs,
      );
      await Promise.all(Array.from({ length: n }, start));
      await done;
      clearTimeout(timer);
      waiter = null;
    };
    await drive(warmup);
    send({ ready: true });
    await new Promise<void>((resolve) => process.once("message", () => resolve()));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await drive(releases);
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const figures: SideFigures = {
      releases,
      steps: releases * side.steps,
      wall_ms: wall,
      node_cpu_ms: (cpu.user + cpu.system) / 1000,
    };
    send({ done: figures });
    await new Promise<void>((resolve) => process.once("message", () => resolve()));
    await side.close();
    process.exit(0);
  } catch (err) {
    die(err);
  }
}
