/**
 * Replayable fast-check runs for the property tests whose seed is random on each run: a failure
 * says, before fast-check's own report, the seed and path it failed at and the command that
 * replays that case. `BATON_PROPERTY_SEED` sets the seed (else fast-check picks one per run);
 * with it, `BATON_PROPERTY_PATH` (the path a failure printed) runs only the failing case.
 */
import fc from "fast-check";

/** The seed and path the environment asks for (both absent: a fresh random seed). */
export function replayParams(): { seed?: number; path?: string } {
  const seed = process.env.BATON_PROPERTY_SEED;
  const path = process.env.BATON_PROPERTY_PATH;
  if (seed === undefined || seed === "") return {};
  const n = Number(seed);
  if (!Number.isInteger(n))
    throw new Error(`BATON_PROPERTY_SEED=${seed}: give the integer seed a failure printed`);
  return path ? { seed: n, path } : { seed: n };
}

/**
 * Index (0-based) of the first generated case a run with `params` reaches: 0, or with a
 * replayed path the case the path names first (so per-case choices made by counting cases
 * are the same as in the run that failed).
 */
export function firstCaseIndex(params: { path?: string }): number {
  return params.path ? Number(params.path.split(":")[0]) || 0 : 0;
}

/** The shell command that replays a failure at `seed` and `path` of test `name` in `file`. */
export function replayCommand(file: string, name: string, seed: number, path: string): string {
  return `BATON_PROPERTY_SEED=${seed} BATON_PROPERTY_PATH=${path} npx vitest run ${file} -t '${name.replaceAll("'", "'\\''")}'`;
}

/**
 * `fc.assert` for an async property whose failure is replayable: runs it with `params` plus the
 * environment's seed and path, and on failure throws an error whose message starts with the seed,
 * the path and the replay command (`replayCommand`), then fast-check's report (the
 * counterexample) and the error the property raised.
 */
export async function assertReplayable<Ts>(
  property: fc.IAsyncProperty<Ts>,
  params: fc.Parameters<Ts>,
  where: { file: string; name: string },
): Promise<void> {
  const details = await fc.check(property, { ...params, ...replayParams() });
  if (!details.failed) return;
  const path = details.counterexamplePath ?? "";
  const command = replayCommand(where.file, where.name, details.seed, path);
  const head =
    `Property failed with seed ${details.seed}, path "${path}". Replay this case with:\n` +
    `  ${command}\n` +
    "(or BATON_PROPERTY_SEED alone to run the same cases up to it)";
  const cause = details.errorInstance;
  const why = cause instanceof Error ? cause.message : String(cause);
  throw new Error(
    `${head}\n\n${fc.defaultReportMessage(details) ?? ""}\n\nIt failed with: ${why}`,
    {
      cause,
    },
  );
}
