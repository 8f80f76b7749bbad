/**
 * What `baton start-pending --commit` asks git in the checkout (docs/lifecycle.md "Merge order
 * is release order"): the commit and its committer time, how it relates to a model's source
 * mark, and whether each recipe file is as that commit has it. The engine cannot see git; it
 * trusts these facts from the operator token and checks what it can (its own mark, time).
 */
import { execFileSync } from "node:child_process";
import { realpathSync } from "node:fs";
import { relative, resolve, sep } from "node:path";
import { type Ancestry, type SourcePosition, shortCommit } from "../domain/source-order.ts";
import { usage } from "./errors.ts";

/** The checkout's facts about one commit. */
export interface GitSource {
  /** The resolved commit and its committer time. */
  position: SourcePosition;
  /** How `position.commit` relates to `other` (`unrelated` when git does not have `other`). */
  ancestry(other: string): Ancestry;
  /** Null when `file` holds what the commit has at that path; otherwise why not, with the fix. */
  fileProblem(file: string): string | null;
}

/** Runs git in `cwd`: its trimmed stdout, or null when it exits non-zero. */
function git(cwd: string, args: string[]): string | null {
  try {
    return execFileSync("git", args, {
      cwd,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }).trim();
  } catch {
    return null;
  }
}

/**
 * The commit `rev` (e.g. `HEAD`, `$GITHUB_SHA`) of the git checkout that holds `dir` (the
 * recipes' folder; git looks upward for the checkout).
 * @throws CliError (usage) when `dir` is not in a git checkout or `rev` names no commit there.
 */
export function gitSource(rev: string, dir: string): GitSource {
  const top = git(dir, ["rev-parse", "--show-toplevel"]);
  const commit =
    top && git(top, ["rev-parse", "--verify", "--quiet", "--end-of-options", `${rev}^{commit}`]);
  if (!top || !commit) {
    throw usage(
      `[cli] --commit ${JSON.stringify(rev)} names no commit of a git checkout holding ${dir}; run start-pending on recipes in the checkout they come from (the recipe workflow checks out with fetch-depth: 0) and give a commit it has, e.g. --commit HEAD`,
    );
  }
  const seconds = Number(git(top, ["show", "-s", "--format=%ct", commit]));
  if (!Number.isInteger(seconds)) {
    throw usage(`[cli] git could not tell the committer time of ${commit}`);
  }
  const isAncestor = (a: string, b: string) =>
    git(top, ["merge-base", "--is-ancestor", a, b]) !== null;
  return {
    position: { commit, committed_at: seconds * 1000 },
    ancestry(other) {
      if (other === commit) return "same";
      if (git(top, ["cat-file", "-e", `${other}^{commit}`]) === null) return "unrelated";
      if (isAncestor(other, commit)) return "descends";
      if (isAncestor(commit, other)) return "precedes";
      return "unrelated";
    },
    fileProblem(file) {
      const path = realpathOr(resolve(file));
      const rel = relative(realpathOr(top), path).split(sep).join("/");
      const fix = "commit it, or give --commit the commit it comes from";
      if (rel.startsWith("../") || rel === "..") {
        return `${file} is outside the checkout at ${top}; ${fix}`;
      }
      const inCommit = git(top, ["rev-parse", "--verify", "--quiet", `${commit}:${rel}`]);
      const onDisk = git(top, ["hash-object", "--", rel]);
      if (inCommit === null || inCommit !== onDisk) {
        return `${file} is not as commit ${shortCommit(commit)} has it (changed or not committed); ${fix}`;
      }
      return null;
    },
  };
}

/** `path` with symbolic links resolved, or as given when it does not exist. */
function realpathOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
