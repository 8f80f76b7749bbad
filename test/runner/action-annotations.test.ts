// GitHub's annotation limits, as a runner reads the bundled action's output: a step shows at most
// 10 annotations of each kind. A tool that prints workflow commands (40 `::error::` lines, legacy
// `##[error]` lines, warnings, notices, on stdout and stderr, its last line without a newline)
// annotates nothing: its lines stay in the log as text, and the action's own verdict, which
// carries the engine's re-run advice, is among the first 10 errors.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Fixture, startFixture } from "../support/action-fixture.ts";
import { annotationsOf, SHOWN_PER_KIND, shownAnnotations } from "../support/runner-commands.ts";

let f: Fixture;
beforeAll(async () => {
  f = await startFixture();
});
afterAll(async () => {
  await f?.close();
});

/** A tool (sh) whose 40 checks fail, each printed as a workflow command; it reports its own failure. */
const NOISY_TOOL = `#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in --result-dir) d="$2" ;; esac; shift 2; done
checks=""
i=1
while [ "$i" -le 40 ]; do
  echo "::error title=check $i::check-$i failed: health answered 503"
  checks="$checks{\\"name\\":\\"check-$i\\",\\"status\\":\\"failed\\",\\"message\\":\\"503\\"},"
  i=$((i + 1))
done
i=1
while [ "$i" -le 12 ]; do
  echo "  ##[error]legacy error $i"
  echo "::warning::tool warning $i"
  echo "::notice::tool notice $i" >&2
  echo "::ERROR::stderr error $i" >&2
  i=$((i + 1))
done
printf '[%s]' "\${checks%,}" > "$d/checks.json"
echo failed > "$d/status"
echo fail > "$d/overall"
printf '::error::a last line without a newline'
exit 1
`;

describe("annotations within GitHub's limits", () => {
  it("a tool printing 40 ::error:: lines gives at most 10 error annotations, the re-run advice among them", async () => {
    const ws = f.workspaceWithTool(NOISY_TOOL);
    const { payload } = await f.stepRun();
    const advice = `re-run this job before 15:32 UTC, or release ${payload.release.id} compensates`;
    f.engine.setAdvice(payload.step_run_id, advice);
    const r = await f.run(payload, {
      workspace: ws,
      inputs: {
        "engine-url": f.engine.url,
        "callback-secret": f.engine.secret,
        "ssh-key": f.sshd.clientKey,
        allowlist: "allowlist.json",
      },
    });
    expect(r.main.code, r.main.stdout + r.main.stderr).toBe(1);
    expect(r.outputs.status).toBe("failed");
    // The tool's lines are in the log, as text.
    expect(r.main.stdout).toContain("::error title=check 40::check-40 failed: health answered 503");
    expect(r.main.stdout).toContain("::ERROR::stderr error 12");

    const all = annotationsOf(r.main.stdout);
    const errors = all.filter((a) => a.kind === "error");
    expect(errors.length, JSON.stringify(errors)).toBeLessThanOrEqual(SHOWN_PER_KIND);
    for (const kind of ["warning", "notice"] as const)
      expect(all.filter((a) => a.kind === kind).length).toBeLessThanOrEqual(SHOWN_PER_KIND);
    const verdict = `[action] step run ${payload.step_run_id} failed (overall fail); ${advice}`;
    expect(shownAnnotations(all)).toContainEqual({ kind: "error", message: verdict });
    // None of the tool's commands became an annotation.
    expect(
      all.filter((a) => /check-\d+ failed|tool (warning|notice)|legacy|stderr/.test(a.message)),
    ).toEqual([]);

    // The job as a whole (main and post) stays far below GitHub's 50 per job.
    expect(all.length + annotationsOf(r.post?.stdout ?? "").length).toBeLessThanOrEqual(50);
  });
});
