/** Small helpers of the chaos harness: a bounded-concurrency pool and the result table. */

/** One line of the table `npm run test:chaos` prints. */
export interface Row {
  scenario: string;
  /** Kill points or cases tried. */
  tried: number;
  releases: number;
  /** Effects applied (control-plane applications + deploy.sh phases). */
  effects: number;
  duplicates: number;
  wrong: number;
}

/** A random generator with a seed (xorshift32): values in [0, 1), so a run can be replayed. */
export function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4_294_967_296;
  };
}

/** `k` of `items` chosen by `random` (a seeded `rng`), in their original order. */
export function sample<T>(items: readonly T[], k: number, random: () => number): T[] {
  const idx = items.map((_, i) => i);
  // Fisher-Yates: the first k positions end up a uniform choice of k indices.
  for (let i = 0; i < Math.min(k, idx.length); i++) {
    const j = i + Math.floor(random() * (idx.length - i));
    [idx[i], idx[j]] = [idx[j] as number, idx[i] as number];
  }
  return idx
    .slice(0, k)
    .sort((a, b) => a - b)
    .map((i) => items[i] as T);
}

/** Runs `tasks` with at most `n` at once; resolves to their results in order. */
export async function pool<T>(n: number, tasks: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      out[i] = await tasks[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, tasks.length) }, worker));
  return out;
}

/** The table as text, one row per line, columns aligned. */
export function formatTable(rows: Row[]): string {
  const head = [
    "scenario",
    "kill points / cases",
    "releases",
    "effects applied",
    "duplicates",
    "wrong terminal",
  ];
  const cells = rows.map((r) => [
    r.scenario,
    String(r.tried),
    String(r.releases),
    String(r.effects),
    String(r.duplicates),
    String(r.wrong),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) =>
    c.map((x, i) => (i === 0 ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join("  ");
  return [line(head), widths.map((w) => "-".repeat(w)).join("  "), ...cells.map(line)].join("\n");
}
