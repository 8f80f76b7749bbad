/**
 * What a commit writes, made storable (domain/storable-text.ts: NUL and lone surrogates become
 * U+FFFD on every store) without walking what cannot have changed: the manifest (~20 KB), the
 * observed baseline, the admission report and the lineage were made storable when the release
 * was created (`createRelease` cleans the whole release) and no transition writes them.
 */
import { storableValue } from "../../domain/storable-text.ts";
import type { CommitInput } from "../../ports/store.ts";

/** Parts of a release fixed at creation (cleaned then, never written by a transition). */
const FIXED: ReadonlySet<string> = new Set(["manifest", "baseline", "admission", "lineage"]);

/** `input` with every string outside the fixed parts storable; `input` itself when clean. */
export function storableCommit(input: CommitInput): CommitInput {
  const r = input.release as unknown as Record<string, unknown>;
  let release: Record<string, unknown> | null = null;
  for (const k of Object.keys(r)) {
    if (FIXED.has(k)) continue;
    const v = r[k];
    const clean = storableValue(v);
    if (clean !== v) {
      release ??= { ...r };
      release[k] = clean;
    }
  }
  const history = storableValue(input.history);
  const effects = storableValue(input.effects);
  const attempts = storableValue(input.attempt_results);
  if (
    release === null &&
    history === input.history &&
    effects === input.effects &&
    attempts === input.attempt_results
  ) {
    return input;
  }
  return {
    ...input,
    release: (release ?? r) as unknown as CommitInput["release"],
    history,
    effects,
    ...(attempts === undefined ? {} : { attempt_results: attempts }),
  };
}
