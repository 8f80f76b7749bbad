/**
 * Merge order is release order (docs/lifecycle.md "Merge order is release order"): which commit
 * of the recipe repository may start a release of a model, and when a recipe the recipe
 * workflow sees is a true repeat of what stands. Pure: git is asked by the CLI, the store by
 * the engine; both bring the facts here.
 */
import { type ReleaseState, TERMINAL_RELEASE_STATES } from "./states.ts";

/** A commit of the repository the recipes come from. */
export interface SourcePosition {
  /** Full commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits. */
  commit: string;
  /** The commit's committer time, epoch ms (git keeps whole seconds). */
  committed_at: number;
}

/** What a start (or an acknowledgement) from the recipe workflow says about its commit. */
export interface SourceClaim extends SourcePosition {
  /**
   * The commit of the model's source mark that the caller checked, with git, to be an ancestor
   * of `commit` (or `commit` itself); null when the caller saw no mark. The engine cannot see
   * git: it checks only that this is still its mark (and that time does not go backwards).
   */
  after: string | null;
}

/**
 * Per model: the newest commit the recipe workflow acted on (started a release from, or found
 * a true repeat at) and the release that stands for it. Raised only by a claim that passed
 * `sourceRefusal`, in one write with the release it starts.
 */
export interface SourceMark extends SourcePosition {
  model: string;
  release_id: string;
  /** When the engine raised the mark, epoch ms. */
  at: number;
}

/** A full commit id (SHA-1 or SHA-256 repositories). */
export const COMMIT_PATTERN = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * Why the engine refuses `claim` for a model whose mark is `mark`, or null when it may proceed:
 * `older` when its commit time is before the mark's (a different commit), `moved` when the
 * caller checked its ancestry against another commit than the mark (another run moved it
 * since, or the caller never looked). A claim from the mark's own commit always proceeds (a
 * second recipe of the model in the same commit, a re-run).
 */
export function sourceRefusal(
  mark: SourceMark | null,
  claim: SourceClaim,
): "older" | "moved" | null {
  if (mark === null || claim.commit === mark.commit) return null;
  if (claim.committed_at < mark.committed_at) return "older";
  if (claim.after !== mark.commit) return "moved";
  return null;
}

/** The release a source refusal names: the one standing for the mark. */
export interface MarkRelease {
  id: string;
  state: ReleaseState;
  image: string;
}

/** `abcdef0` of a commit id. */
export function shortCommit(commit: string): string {
  return commit.slice(0, 7);
}

function when(ms: number): string {
  return new Date(ms).toISOString().replace(".000Z", "Z");
}

/**
 * The refusal text of `sourceRefusal` (the engine's 409 `superseded`, and the CLI's own
 * `superseded` outcome), naming the release that stands for the newer commit: id, commit,
 * image. `release` is null when the mark's release cannot be read.
 */
export function sourceRefusalWords(
  why: "older" | "moved",
  claim: SourceClaim,
  mark: SourcePosition & { model: string; release_id: string },
  release: MarkRelease | null,
  component: "engine" | "cli" = "engine",
): string {
  const stands = release
    ? `release ${release.id} (${release.state}, image ${release.image})`
    : `release ${mark.release_id}`;
  const newer = `commit ${shortCommit(mark.commit)} (committed ${when(mark.committed_at)}), from which ${stands} stands for model ${mark.model}`;
  if (why === "older") {
    return `[${component}] commit ${shortCommit(claim.commit)} (committed ${when(claim.committed_at)}) is older than ${newer}; nothing was started. The newer commit's recipe stands; to run this content again, commit it anew (a revert) so that it is the newest`;
  }
  return `[${component}] commit ${shortCommit(claim.commit)} was checked against ${claim.after === null ? "no earlier commit" : `commit ${shortCommit(claim.after)}`}, but the newest is ${newer}; nothing was started. Run the recipe workflow again: it checks against the newest commit`;
}

/**
 * How the caller's commit relates to the mark's, as git says: `same` commit, it `descends`
 * from the mark's, it `precedes` it (the mark's descends from it), or `unrelated` (neither, or
 * git does not have the mark's commit: a force-push rewrote the history).
 */
export type Ancestry = "same" | "descends" | "precedes" | "unrelated";

/**
 * The caller's commit against the mark's: by ancestry where git knows it; by committer time
 * when the histories are unrelated (a rewritten history is newer when its commit is).
 */
export function sourceOrder(
  ancestry: Ancestry,
  ours: SourcePosition,
  mark: SourcePosition,
): "same" | "newer" | "older" {
  if (ancestry === "same") return "same";
  if (ancestry === "descends") return "newer";
  if (ancestry === "precedes") return "older";
  // Not before the mark's time is not older: the engine's own check (`sourceRefusal`) agrees.
  return ours.committed_at >= mark.committed_at ? "newer" : "older";
}

/** A release the recipe workflow compares a recipe with: its id, state and digests. */
export interface ComparedRelease {
  id: string;
  state: ReleaseState;
  /** Its manifest digest and, when compiled against an observed baseline, its recipe's. */
  digests: readonly string[];
}

/**
 * What the recipe workflow does with one recipe (`baton start-pending`):
 * - `repeat` of the mark's release (`head`) when that has the recipe's digest, whatever its
 *   state: the newest content merged was started already and its outcome stands (a re-run, a
 *   merge that changed another recipe);
 * - `superseded` by the mark's release when the commit is older than the mark's;
 * - `repeat` of the `standing` release when the fleet runs the recipe's digest already (that
 *   release succeeded, or is still in flight);
 * - otherwise `start` (a revert to earlier content while the fleet runs something else starts
 *   a new release of it).
 * `order` is `none` without a mark or without a commit.
 */
export function pendingDecision(i: {
  digest: string;
  order: "none" | "same" | "newer" | "older";
  head: ComparedRelease | null;
  standing: ComparedRelease | null;
}):
  | { kind: "repeat"; release: string; of: "head" | "standing" }
  | { kind: "superseded"; release: string }
  | { kind: "start" } {
  if (i.head?.digests.includes(i.digest)) return { kind: "repeat", release: i.head.id, of: "head" };
  if (i.order === "older" && i.head) return { kind: "superseded", release: i.head.id };
  const s = i.standing;
  if (
    s?.digests.includes(i.digest) &&
    (s.state === "succeeded" || !TERMINAL_RELEASE_STATES.has(s.state))
  ) {
    return { kind: "repeat", release: s.id, of: "standing" };
  }
  return { kind: "start" };
}

/**
 * Whether a release defines its model's lanes now: in flight, succeeded, abandoned (an
 * operator confirmed what the lanes run), or aborted with effects left in place (a
 * roll_forward_only release closed past its unsafe point). A release that rolled back, or was
 * aborted before anything took effect, put the lanes back.
 */
export function definesLanes(r: { state: ReleaseState; high_water_mark: number }): boolean {
  return (
    !TERMINAL_RELEASE_STATES.has(r.state) ||
    r.state === "succeeded" ||
    r.state === "abandoned" ||
    (r.state === "aborted" && r.high_water_mark >= 0)
  );
}

/**
 * The release that stands for a model: the newest of `releases` (any order, any models) of
 * `model` that defines its lanes (`definesLanes`), or null.
 */
export function standingRelease<
  T extends {
    id: string;
    model: string;
    state: ReleaseState;
    high_water_mark: number;
    created_at: number;
  },
>(releases: readonly T[], model: string): T | null {
  // Newest by creation time, then by release number (`r12` after `r9`) within one millisecond.
  const newer = (a: T, b: T) =>
    a.created_at !== b.created_at
      ? a.created_at > b.created_at
      : Number(a.id.slice(1)) > Number(b.id.slice(1));
  let best: T | null = null;
  for (const r of releases) {
    if (r.model !== model || !definesLanes(r)) continue;
    if (!best || newer(r, best)) best = r;
  }
  return best;
}
