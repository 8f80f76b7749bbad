// Tools from other repositories, end to end with local git repositories (no network): a bare
// "acme/fleet-tools" repository on disk, checked out into the workspace the way the release-step
// workflow's actions/checkout step does (fetch the pinned commit, detached checkout), and the
// bundled action run as a runner runs it. The action runs the tool only when the checkout is at
// the allowlist's pinned commit and the commit holds the file unchanged.
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callbacksOf, type Fixture, startFixture } from "../support/action-fixture.ts";
import { sharedTempDir } from "../support/sshd.ts";

let f: Fixture;
let root: string;
let bare: string;
let first: string;
let second: string;
const workspaces: string[] = [];
beforeAll(async () => {
  f = await startFixture();
  root = sharedTempDir("baton-tool-repos-");
  bare = join(root, "fleet-tools.git");
  const work = join(root, "author");
  git(root, "init", "-q", "--bare", bare);
  git(root, "init", "-q", work);
  mkdirSync(join(work, "bin"));
  // The tool writes a marker into the workspace, then passes with one check naming its version.
  const tool = (version: string) =>
    [
      "#!/bin/sh",
      'while [ $# -gt 0 ]; do case "$1" in --result-dir) d="$2";; esac; shift 2; done',
      'echo ran > "$GITHUB_WORKSPACE/tool-ran"',
      `echo '[{"name":"external-${version}","status":"ok","exit_code":0,"duration_ms":1}]' > "$d/checks.json"`,
      'echo succeeded > "$d/status"; echo pass > "$d/overall"',
      "",
    ].join("\n");
  writeFileSync(join(work, "bin/attach"), tool("v1"));
  chmodSync(join(work, "bin/attach"), 0o755);
  git(work, "add", "bin/attach");
  git(work, "commit", "-q", "-m", "v1");
  first = git(work, "rev-parse", "HEAD");
  writeFileSync(join(work, "bin/attach"), tool("v2"));
  git(work, "commit", "-q", "-am", "v2");
  second = git(work, "rev-parse", "HEAD");
  git(work, "push", "-q", bare, "HEAD:refs/heads/main");
}, 120_000);
afterAll(async () => {
  await f?.close();
  if (root) rmSync(root, { recursive: true, force: true });
  for (const ws of workspaces) rmSync(ws, { recursive: true, force: true });
});

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@example.org",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@example.org",
      GIT_CONFIG_NOSYSTEM: "1",
      HOME: root,
    },
  }).trim();
}

/**
 * A workspace whose allowlist maps attach-queue-lane to acme/fleet-tools at `pin`; the tools
 * repository checked out at `checkoutAt` into .baton-tools/acme/fleet-tools as actions/checkout
 * does it (init, fetch of one commit at depth 1, detached checkout), or not at all (null).
 */
function workspace(pin: string, checkoutAt: string | null, path = "bin/attach"): string {
  const ws = sharedTempDir("baton-ws-");
  workspaces.push(ws);
  writeFileSync(
    join(ws, "allowlist.json"),
    JSON.stringify({
      "attach-queue-lane": { repository: "acme/fleet-tools", ref: pin, path },
    }),
  );
  if (checkoutAt !== null) {
    const dir = join(ws, ".baton-tools/acme/fleet-tools");
    mkdirSync(dir, { recursive: true });
    git(dir, "init", "-q");
    git(dir, "fetch", "-q", "--depth=1", `file://${bare}`, checkoutAt);
    git(dir, "checkout", "-q", "--force", checkoutAt);
  }
  return ws;
}

async function run(ws: string) {
  const { payload } = await f.stepRun();
  const r = await f.run(payload, {
    workspace: ws,
    inputs: {
      "engine-url": f.engine.url,
      "callback-secret": f.engine.secret,
      "ssh-key": f.sshd.clientKey,
      allowlist: "allowlist.json",
    },
  });
  const cbs = callbacksOf(f.engine, payload.step_run_id);
  const ran = existsSync(join(ws, "tool-ran"));
  return { r, cbs, ran };
}

const TIMEOUT = 120_000;

describe("tools from other repositories (bundled action, local git repositories)", () => {
  it(
    "runs the tool of the checkout at the pinned commit",
    async () => {
      const { r, cbs, ran } = await run(workspace(first, first));
      expect(r.main.code, r.main.stdout).toBe(0);
      expect(r.main.stdout).toContain(`(acme/fleet-tools at ${first})`);
      expect(cbs).toHaveLength(1);
      expect(cbs[0]?.body).toMatchObject({ status: "succeeded", overall: "pass" });
      expect(cbs[0]?.body.checks).toEqual([expect.objectContaining({ name: "external-v1" })]);
      expect(ran).toBe(true);
    },
    TIMEOUT,
  );

  it.each([
    [
      "the checkout is at another commit",
      () => workspace(first, second),
      /is at [0-9a-f]{40}; check out the pinned commit/,
    ],
    [
      "the tools repository was not checked out",
      () => workspace(first, null),
      /does not exist; check the repository out before this step \(actions\/checkout with repository: acme\/fleet-tools, ref: [0-9a-f]{40}, path: \.baton-tools\/acme\/fleet-tools, persist-credentials: false\)/,
    ],
    [
      "the file is not in the pinned commit",
      () => {
        const ws = workspace(first, first, "bin/other");
        // Present in the work tree, but not in the commit: not the reviewed tool.
        writeFileSync(join(ws, ".baton-tools/acme/fleet-tools/bin/other"), "#!/bin/sh\nexit 0\n", {
          mode: 0o755,
        });
        return ws;
      },
      /bin\/other is not in acme\/fleet-tools at [0-9a-f]{40}/,
    ],
    [
      "the file was changed after the checkout",
      () => {
        const ws = workspace(first, first);
        writeFileSync(join(ws, ".baton-tools/acme/fleet-tools/bin/attach"), "#!/bin/sh\nexit 0\n", {
          mode: 0o755,
        });
        return ws;
      },
      /differs from acme\/fleet-tools at [0-9a-f]{40} \(changed after the checkout\)/,
    ],
  ])(
    "refuses when %s: failed, class tool_not_found, the tool never ran",
    async (_name, make, reason) => {
      const { r, cbs, ran } = await run(make());
      expect(r.main.code).toBe(1);
      expect(r.main.stdout).toMatch(reason);
      expect(cbs).toHaveLength(1);
      expect(cbs[0]?.body).toMatchObject({ status: "failed", overall: "fail" });
      expect(((cbs[0]?.body.checks ?? []) as { class?: string }[]).at(-1)).toMatchObject({
        class: "tool_not_found",
      });
      expect(String(cbs[0]?.body.log)).toMatch(reason);
      expect(ran).toBe(false);
    },
    TIMEOUT,
  );

  it.each([["main"], ["v1"], ["short sha"]])(
    "refuses an allowlist whose ref is %s (unpinned): invalid, the problem names the field and the fix",
    async (kind) => {
      const ref = kind === "short sha" ? first.slice(0, 12) : kind;
      const ws = workspace(ref, first);
      const { r, cbs, ran } = await run(ws);
      expect(r.main.code).toBe(1);
      expect(r.outputs.status).toBe("invalid");
      expect(r.main.stdout).toMatch(/fails its check/);
      expect(r.main.stdout).toMatch(
        /attach-queue-lane\.ref: ref `[^`]+` of `attach-queue-lane` is .*must be pinned to one commit.*Fix: Set `ref` to the full 40-character commit sha/,
      );
      expect(r.summary).toMatch(/attach-queue-lane\.ref/);
      // Refused before the preflight: nothing reached the engine, nothing ran.
      expect(cbs).toHaveLength(0);
      expect(ran).toBe(false);
      expect(readFileSync(join(ws, "allowlist.json"), "utf8")).toContain(ref);
    },
    TIMEOUT,
  );
});
