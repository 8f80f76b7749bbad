/**
 * KeyedQueue (engine/src/service/keyed-queue.ts): tasks of one key run one at a time in
 * order, different keys run at once, a failed task does not stop the ones after it, and a key
 * with nothing queued holds no entry.
 */
import { describe, expect, it } from "vitest";
import { KeyedQueue } from "../../engine/src/service/keyed-queue.ts";

/** A promise settled from outside. */
function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every already-settled promise callback run. */
const flush = () => new Promise<void>((r) => setImmediate(r));

describe("KeyedQueue", () => {
  it("runs the tasks of one key one at a time, in the order queued", async () => {
    const q = new KeyedQueue();
    const seen: string[] = [];
    const gates = [deferred(), deferred(), deferred()];
    const runs = gates.map((g, i) =>
      q.run("r1", async () => {
        seen.push(`start ${i}`);
        await g.promise;
        seen.push(`end ${i}`);
        return i;
      }),
    );
    await flush();
    expect(seen).toEqual(["start 0"]);
    // Finishing them out of order changes nothing: each starts only after the one before.
    gates[2]?.resolve();
    gates[1]?.resolve();
    await flush();
    expect(seen).toEqual(["start 0"]);
    gates[0]?.resolve();
    expect(await Promise.all(runs)).toEqual([0, 1, 2]);
    expect(seen).toEqual(["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]);
  });

  it("runs tasks of different keys at the same time", async () => {
    const q = new KeyedQueue();
    const held = deferred();
    const slow = q.run("r1", () => held.promise.then(() => "r1"));
    // r2 finishes while r1 is still held.
    expect(await q.run("r2", async () => "r2")).toBe("r2");
    expect(q.size).toBe(1);
    held.resolve();
    expect(await slow).toBe("r1");
  });

  it("a failing task rejects its own caller only; the next task of the key still runs", async () => {
    const q = new KeyedQueue();
    const first = q.run("r1", async () => {
      throw new Error("boom");
    });
    const thrown = q.run("r1", () => {
      throw new Error("thrown before any await");
    });
    const third = q.run("r1", async () => "ran");
    await expect(first).rejects.toThrow("boom");
    await expect(thrown).rejects.toThrow("thrown before any await");
    expect(await third).toBe("ran");
  });

  it("holds no entry for a key once its tasks settled (memory stays bounded)", async () => {
    const q = new KeyedQueue();
    expect(q.size).toBe(0);
    await Promise.allSettled(
      Array.from({ length: 1000 }, (_, i) =>
        q.run(`r${i}`, async () => {
          if (i % 3 === 0) throw new Error("failed");
          return i;
        }),
      ),
    );
    expect(q.size).toBe(0);
    // Right when the caller sees its answer the entry is gone (no extra tick needed).
    await q.run("r1", async () => 1);
    expect(q.size).toBe(0);
    // A key still busy keeps its one entry however many tasks wait on it.
    const held = deferred();
    const waiting = [q.run("r1", () => held.promise), q.run("r1", async () => undefined)];
    expect(q.size).toBe(1);
    held.resolve();
    await Promise.all(waiting);
    expect(q.size).toBe(0);
  });
});
