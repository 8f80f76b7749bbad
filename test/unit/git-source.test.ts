// What `baton start-pending --commit` asks git (engine/src/cli/git-source.ts), on a throwaway
// repository: the commit and its committer time, its ancestry against another commit (one git
// does not have is unrelated), and whether a recipe file is as the commit has it.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gitSource } from "../../engine/src/cli/git-source.ts";

let dir: string;
let repo: string;
const BASE = 1_800_000_000;

function git(at: number, ...args: string[]): string {
  const date = `@${at} +0000`;
  return execFileSync("git", ["-C", repo, ...args], {
    encoding: "utf8",
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@example.com",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@example.com",
      GIT_AUTHOR_DATE: date,
      GIT_COMMITTER_DATE: date,
    },
  }).trim();
}

function commit(at: number, text: string): string {
  writeFileSync(join(repo, "recipes", "svc.yaml"), text);
  git(at, "add", ".");
  git(at, "commit", "-q", "-m", text);
  return git(at, "rev-parse", "HEAD");
}

let c1: string;
let c2: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "baton-git-source-"));
  repo = join(dir, "repo");
  mkdirSync(join(repo, "recipes"), { recursive: true });
  git(BASE, "init", "-q", "-b", "main");
  c1 = commit(BASE + 60, "one\n");
  c2 = commit(BASE + 120, "two\n");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("gitSource", () => {
  it("resolves the commit and its committer time, asked where the recipes are", () => {
    const g = gitSource("HEAD", join(repo, "recipes"));
    expect(g.position).toEqual({ commit: c2, committed_at: (BASE + 120) * 1000 });
    expect(gitSource(c1.slice(0, 10), repo).position.commit).toBe(c1);
  });

  it("relates the commit to another by ancestry; one git does not have is unrelated", () => {
    const at2 = gitSource(c2, repo);
    expect(at2.ancestry(c2)).toBe("same");
    expect(at2.ancestry(c1)).toBe("descends");
    expect(gitSource(c1, repo).ancestry(c2)).toBe("precedes");
    expect(at2.ancestry("9".repeat(40))).toBe("unrelated");
  });

  it("a file must be as the commit has it", () => {
    const file = join(repo, "recipes", "svc.yaml");
    expect(gitSource("HEAD", repo).fileProblem(file)).toBeNull();
    // The checkout at c1 holds c2's file: not as c1 has it.
    expect(gitSource(c1, repo).fileProblem(file)).toMatch(
      /svc\.yaml is not as commit [0-9a-f]{7} has it \(changed or not committed\); commit it, or give --commit/,
    );
    writeFileSync(join(repo, "recipes", "new.yaml"), "new\n");
    expect(gitSource("HEAD", repo).fileProblem(join(repo, "recipes", "new.yaml"))).toMatch(
      /not as commit/,
    );
    const outside = join(dir, "outside.yaml");
    writeFileSync(outside, "x\n");
    expect(gitSource("HEAD", repo).fileProblem(outside)).toMatch(/is outside the checkout/);
  });

  it("refuses a folder that is not in a checkout, or a name that is not a commit (usage, exit 2)", () => {
    expect(() => gitSource("HEAD", dir)).toThrow(/names no commit of a git checkout/);
    expect(() => gitSource("no-such-branch", repo)).toThrow(
      /--commit "no-such-branch" names no commit/,
    );
    try {
      gitSource("--output=/tmp/x", repo);
      expect.unreachable();
    } catch (e) {
      expect((e as { exitCode: number }).exitCode).toBe(2);
    }
  });
});
