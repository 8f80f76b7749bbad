/**
 * Every `baton` command against a running engine (real HTTP on 127.0.0.1, real releases made
 * through the signed runner protocol), including bad inputs: exit codes 0 ok, 1 failed or
 * refused, 2 usage; errors as one line without a stack trace. Commands run in process
 * (`runCli`); `serve`, `demo` and one smoke test of `bin/baton.mjs` run as processes.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { createRelease, drive, recipe } from "../integration/service-harness.ts";
import {
  compensatedRelease,
  type LiveEngine,
  OPERATOR,
  pausedRelease,
  startLiveEngine,
  VIEWER,
} from "./live-engine.ts";
import { baton, batonBin, ROOT, serveBin } from "./run-baton.ts";

// These tests stack releases of one recipe on one lane set; the one-release-per-lane rule
// is tested in test/integration/lane-claims.test.ts.
process.env.BATON_EXCLUSIVE_LANES = "off";

let live: LiveEngine;
let dir: string;
let good: string;
let bad: string;
const env = (token: string | undefined = OPERATOR) => ({
  BATON_ENGINE_URL: live.url,
  BATON_TOKEN: token,
});
const noStack = (s: string) => expect(s).not.toMatch(/\n\s+at .+:\d+:\d+/);

beforeAll(async () => {
  live = await startLiveEngine();
  dir = mkdtempSync(path.join(tmpdir(), "baton-cli-"));
  good = path.join(dir, "good.yaml");
  bad = path.join(dir, "bad.yaml");
  writeFileSync(good, stringify(recipe(2)));
  writeFileSync(bad, stringify({ ...recipe(2), image: "registry/x:latest" }));
});
afterAll(async () => {
  await live?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("usage", () => {
  it("prints help (0), and refuses no command, unknown commands and missing arguments (2)", async () => {
    const help = await baton(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("watch [options] <id>");
    expect((await baton([])).code).toBe(2);
    const unknown = await baton(["rollout"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim().split("\n")).toHaveLength(1);
    expect(unknown.stderr).toMatch(/^\[cli\] unknown command 'rollout'.* \(see baton --help\)$/m);
    const missing = await baton(["watch"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("missing required argument 'id'");
  });

  it("bin/baton.mjs runs from any working directory (tsconfig found next to the bin)", async () => {
    // The one run of the real bin/ as a user runs it (every other process test runs the CLI's
    // bundle, test/support/bundles.ts).
    const r = await batonBin(
      ["check", path.join(ROOT, "recipes/example.yaml")],
      {},
      { cwd: dir, real: true },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^ok {4}.*example\.yaml: \d+ steps in \d+ waves, manifest [0-9a-f]{64}$/m,
    );
  });

  it("refuses a bad engine URL (2) and reports an unreachable engine in one line (1)", async () => {
    const badUrl = await baton(["status", "--engine", "ftp://x"]);
    expect(badUrl.code).toBe(2);
    expect(badUrl.stderr).toContain("--engine must be an http(s) URL");
    const down = await baton(["status"], { BATON_ENGINE_URL: "http://127.0.0.1:9" });
    expect(down.code).toBe(1);
    expect(down.stderr.trim().split("\n")).toHaveLength(1);
    expect(down.stderr).toContain("[cli] cannot reach the engine at http://127.0.0.1:9");
  });
});

describe("check", () => {
  it("notes a parallel wave the failure-domain rule holds below max_unavailable (still ok)", async () => {
    // 5 lanes: wave 1 = lane 0, wave 2 = lanes 1-4 with max_unavailable 4; lanes 1 and 2 are
    // the whole of rack-x, so at most 3 leave together and the wave takes 2 rounds.
    const base = recipe(5);
    const lanes = (base.lanes ?? []).map((l, i) => ({
      ...l,
      ...(i === 1 || i === 2 ? { failure_domain: "rack-x" } : {}),
    }));
    const file = path.join(dir, "held.yaml");
    writeFileSync(
      file,
      stringify({
        ...base,
        lanes,
        rollout: {
          waves: [
            { lanes: [lanes[0]?.id], traffic: 10 },
            { lanes: lanes.slice(1).map((l) => l.id), traffic: 100, max_unavailable: 4 },
          ],
        },
      }),
    );
    const text = await baton(["check", file, good]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(
      "note: rollout.waves.1.max_unavailable: wave 2 can have at most 3 of its 4 lanes out of service at once, not 4: failure domain rack-x has every lane in this wave",
    );
    expect(text.stdout).toContain(
      "at least 2 rounds; to let its lanes go together, keep one lane of rack-x out of this wave",
    );
    // The serial recipe has nothing to note.
    expect(text.stdout.split("\n").filter((l) => l.includes("note:"))).toHaveLength(1);
    const json = JSON.parse((await baton(["check", file, "--json"])).stdout) as {
      recipes: { ok: boolean; notes: { path: string }[]; parallel_waves: unknown[] }[];
    };
    expect(json.recipes[0]?.ok).toBe(true);
    expect(json.recipes[0]?.notes.map((n) => n.path)).toEqual(["rollout.waves.1.max_unavailable"]);
    expect(json.recipes[0]?.parallel_waves).toEqual([
      {
        wave: 2,
        lanes: 4,
        max_unavailable: 4,
        at_once: 3,
        held_domains: ["rack-x"],
        min_rounds: 2,
      },
    ]);
  });

  it("refuses an analysis of guardrails alone, naming the field and the fix", async () => {
    const file = path.join(dir, "guardrails-only.yaml");
    writeFileSync(
      file,
      stringify({
        ...recipe(3),
        analysis: {
          metrics: [
            {
              name: "error-rate",
              kind: "ratio",
              better: "lower",
              margin: { absolute: 0.02 },
              required: false,
            },
          ],
        },
      }),
    );
    const r = await baton(["check", file]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /- analysis\.metrics: the analysis has no required metric: every metric is a guardrail \(required: false\) or a dry run[\s\S]*?fix: Mark at least one metric `required: true`/,
    );
    noStack(r.stdout + r.stderr);
  });

  it("passes a good recipe and fails a bad one with the field and the fix", async () => {
    const ok = await baton(["check", good, path.join(ROOT, "recipes/example.yaml")]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^ok {4}.*good\.yaml: 16 steps in 2 waves, manifest [0-9a-f]{64}$/m);
    // One wave is "1 wave".
    const one = await baton(["check", path.join(ROOT, "recipes/blue-green.yaml")]);
    expect(one.stdout).toMatch(/^ok {4}.*blue-green\.yaml: \d+ steps in 1 wave, manifest /m);
    const fail = await baton(["check", good, bad]);
    expect(fail.code).toBe(1);
    expect(fail.stdout).toContain("FAIL  ");
    expect(fail.stdout).toMatch(/- image: .*fix: /);
    noStack(fail.stdout + fail.stderr);
    const json = await baton(["check", bad, "--json"]);
    const parsed = JSON.parse(json.stdout) as {
      recipes: { ok: boolean; problems: { path: string }[] }[];
    };
    expect(parsed.recipes[0]?.ok).toBe(false);
    expect(parsed.recipes[0]?.problems[0]?.path).toBe("image");
  });

  it("baton demo --recipe keeps file:line:col and the fix of a recipe error, and names a look-alike in a lane id", async () => {
    const broken = path.join(dir, "broken.yaml");
    writeFileSync(broken, "name: x\nmodel: m\nimage: [unclosed\n");
    const syntax = await batonBin(["demo", "--recipe", broken]);
    expect(syntax.code).toBe(2);
    expect(syntax.stderr).toMatch(
      new RegExp(`^\\[recipe\\] ${broken.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:4:1: `, "m"),
    );
    expect(syntax.stderr).toMatch(/^ {2}fix: Fix the YAML syntax there/m);
    expect(syntax.stdout).not.toContain("starting the control plane");
    const text = readFileSync(path.join(ROOT, "recipes/example.yaml"), "utf8").replaceAll(
      "lane-a",
      "l\u0430ne-a",
    );
    const lookAlike = path.join(dir, "look-alike.yaml");
    writeFileSync(lookAlike, text);
    const line = text.split("\n").findIndex((l) => l.includes("id: l\u0430ne-a")) + 1;
    for (const args of [
      ["demo", "--recipe", lookAlike],
      ["check", lookAlike],
    ]) {
      const r = args[0] === "demo" ? await batonBin(args) : await baton(args);
      const out = r.stdout + r.stderr;
      expect(r.code, out).toBe(args[0] === "demo" ? 2 : 1);
      expect(out).toContain(`${lookAlike}:${line}:`);
      expect(out).toContain(
        'lane id "l\u0430ne-a" has U+0430 CYRILLIC SMALL LETTER A, not an ASCII character, at position 2; lane ids must be ASCII',
      );
      noStack(out);
    }
  });

  it("refuses a FIFO as not a regular file (2), without waiting for a writer", async () => {
    const fifo = path.join(dir, "recipe.fifo");
    execFileSync("mkfifo", [fifo]);
    // A process, killed if it blocks: a blocked open would stall this test worker.
    const r = await batonBin(["check", fifo], {}, { timeoutMs: 30_000 });
    expect(r.stdout).toContain(`${fifo} (a FIFO, not a regular file)`);
    expect(r.code).toBe(2);
  });

  it("refuses a missing file as usage (2)", async () => {
    const r = await baton(["check", path.join(dir, "nope.yaml")]);
    expect(r.code).toBe(2);
    expect(r.stdout).toContain(`FAIL  ${path.join(dir, "nope.yaml")}`);
    expect(r.stdout).toContain("cannot read recipe file");
    expect(r.stdout).toContain("ENOENT");
  });

  it("an unreadable file among others: lists it as FAIL naming it, checks the rest, exit 2", async () => {
    const missing = path.join(dir, "missing.yaml");
    const r = await baton(["check", missing, good, path.join(ROOT, "recipes/example.yaml")]);
    expect(r.stdout).toContain(`FAIL  ${missing}`);
    expect(r.stdout).toContain(`cannot read recipe file ${missing} (ENOENT)`);
    expect(r.stdout).toContain(`ok    ${good}:`);
    expect(r.stdout).toContain(`ok    ${path.join(ROOT, "recipes/example.yaml")}:`);
    expect(r.code).toBe(2);
    const json = JSON.parse((await baton(["check", good, missing, "--json"])).stdout) as {
      recipes: { file: string; ok: boolean; unreadable?: boolean }[];
    };
    expect(json.recipes.map((x) => [x.file, x.ok, x.unreadable ?? false])).toEqual([
      [good, true, false],
      [missing, false, true],
    ]);
  });
});

describe("start, status, record", () => {
  it("starts a release and shows it", async () => {
    const r = await baton(["start", good], env());
    expect(r.code).toBe(0);
    const id = /^started (r\d+): 16 steps/.exec(r.stdout)?.[1];
    expect(id).toBeDefined();
    const list = await baton(["status"], env(VIEWER));
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+running\\s+svc-test`, "m"));
    const held = await baton(["start", good, "--hold", "--json"], env());
    const heldId = JSON.parse(held.stdout).id as string;
    expect(JSON.parse(held.stdout)).toMatchObject({ state: "pending", step_count: 16 });
    // status --json carries the ways out the text lists (the API's available_actions).
    const heldJson = JSON.parse((await baton(["status", heldId, "--json"], env(VIEWER))).stdout);
    expect(heldJson.available_actions.map((a: { action: string }) => a.action).sort()).toEqual([
      "abort",
      "resume",
    ]);
    expect(heldJson.lifecycle_actions).toEqual([]);
  });

  it("refuses a bad recipe with the engine's problems, and a missing or read-only token", async () => {
    const badRes = await baton(["start", bad], env());
    expect(badRes.code).toBe(1);
    expect(badRes.stderr).toContain("image");
    noStack(badRes.stderr);
    const none = await baton(["start", good], env(""));
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("pass --token <token> or set BATON_TOKEN");
    const viewer = await baton(["start", good], env(VIEWER));
    expect(viewer.code).toBe(1);
    expect(viewer.stderr).toContain("the viewer token only reads");
  });

  it("lists by state, shows one release with its refused events, and as JSON", async () => {
    const rb = await baton(["status", "--state", "rolled_back", "--json"], env(VIEWER));
    const ids = (JSON.parse(rb.stdout) as { releases: { id: string }[] }).releases.map((r) => r.id);
    expect(ids).toContain(live.ids.compensated);
    expect(ids).toContain(live.ids.late);
    expect(ids).not.toContain(live.ids.paused);
    const one = await baton(["status", live.ids.late], env(VIEWER));
    expect(one.code).toBe(0);
    expect(one.stdout).toContain(`${live.ids.late}  rolled_back`);
    expect(one.stdout).toContain("high-water mark: step 3 (steps 1 to 3 may have taken effect)");
    expect(one.stdout).toMatch(/← undo step 3 \(wave 1\) restore queue lane · lane-a: succeeded/);
    // No internal numbers: no negative cursor, no "cursor"; an ended release accepts only
    // verify (it reads the lanes and records what it found; the state stays).
    expect(one.stdout).not.toMatch(/step -1|cursor/);
    // This release paused on an unknown step and was then aborted: an operator abort, not a failure.
    expect(one.stdout).toContain("Rolled back after an operator abort by operator");
    const offered = one.stdout.split("what you can do:\n")[1]?.split(/\n(?! {2})/)[0];
    expect(offered).toBe(
      `  baton verify ${live.ids.late}  # reads every lane against its observed baseline and records it; the state stays`,
    );
    // A later release of the model (the paused one) is in flight on its lanes: no lifecycle
    // verb starts from this one (docs/lifecycle.md); the roll-forward offer: the next test.
    expect(one.stdout).not.toContain("baton roll-forward");
    // The late callback the engine refused for itself reads as housekeeping, in plain words,
    // not as an operator's refused action.
    expect(one.stdout).toMatch(/engine housekeeping: \d+ messages? refused or ignored/);
    expect(one.stdout).toMatch(
      /late callback from attempt \d+ for sr_\d+_\d+_f refused; it changed nothing/,
    );
    expect(one.stdout).not.toMatch(/refused events:|refused operator actions:/);
    // Why no lifecycle verb is offered, in the engine's words (lifecycle_note).
    expect(one.stdout).toMatch(
      /not offered: r\d+ \(\w+\) of model \S+ came after it and now defines the lanes/,
    );
    const js = JSON.parse((await baton(["status", live.ids.late, "--json"], env(VIEWER))).stdout);
    expect(js).toMatchObject({ id: live.ids.late, state: "rolled_back", high_water_mark: 2 });
    expect(js.refused_events).toBeGreaterThan(0);
  });

  it("refuses promote and accept of a release not ready for them, listing what it accepts", async () => {
    const held = JSON.parse((await baton(["start", good, "--hold", "--json"], env())).stdout) as {
      id: string;
    };
    const promote = await baton(["promote", held.id, "--reason", "ok"], env());
    expect(promote.code).toBe(1);
    expect(promote.stderr).toMatch(/promote is accepted only by .*It accepts: .*resume/);
    expect(promote.stderr).toMatch(/It accepts: .*abort/);
    const accept = await baton(["accept", held.id, "--by", "alice"], env());
    expect(accept.code).toBe(1);
    expect(accept.stderr).toMatch(
      /only a closed release .* can be accepted\. It accepts: .*resume/,
    );
    noStack(promote.stderr + accept.stderr);
  });

  it("names the flag, not the engine's body field, in a refusal of a bad flag value", async () => {
    const r = await baton(
      ["accept", live.ids.compensated, "--by", "alice", "--digest", "nothex", "--expires", "soon"],
      env(),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^ {2}- --digest: must be the record's sha256/m);
    expect(r.stderr).toMatch(/^ {2}- --expires: must be a date and a time of day with its offset/m);
    expect(r.stderr).not.toContain("body.");
    noStack(r.stderr);
  });

  it("takes --digest as the CLI prints it (sha256:<hex>): a changed record is refused as changed, not as bad input", async () => {
    const r = await baton(
      ["accept", live.ids.compensated, "--by", "alice", "--digest", `sha256:${"0".repeat(64)}`],
      env(),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(/bad accept body/);
    expect(r.stderr).toMatch(
      /^\[engine\] release r\d+'s record digest is [a-f0-9]{64}, not 0{64};/m,
    );
    noStack(r.stderr);
  });

  it("refuses an acceptance whose --expires is in the past, naming --expires and a future time", async () => {
    const r = await baton(
      ["accept", live.ids.compensated, "--by", "alice", "--expires", "2001-01-01T00:00:00Z"],
      env(),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^\[engine\] --expires 2001-01-01T00:00:00\.000Z is in the past/m);
    expect(r.stderr).toMatch(
      /^ {2}- --expires: .*; fix: give a time after now, e\.g\. \d{4}-\d\d-\d\dT[\d:]+Z \(30 days on\), or leave --expires out/m,
    );
    expect(r.stderr).not.toContain("body.");
    noStack(r.stderr);
  });

  it("names file:line:column of an alias bomb and says not to use aliases", async () => {
    const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let i = 0; i < 6; i++) {
      const [prev, cur] = [String.fromCharCode(97 + i), String.fromCharCode(98 + i)];
      lines.push(`${cur}: &${cur} [${Array(10).fill(`*${prev}`).join(", ")}]`);
    }
    const bomb = path.join(dir, "bomb.yaml");
    writeFileSync(bomb, `${lines.join("\n")}\n`);
    const r = await baton(["check", bomb]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`${bomb}:3:`);
    expect(r.stdout).toMatch(/the alias \*b expands into too much/);
    expect(r.stdout).toMatch(/fix: Do not use anchors and aliases/);
    noStack(r.stdout + r.stderr);
  });

  it("refuses bad status arguments (2) and unknown releases (1)", async () => {
    expect((await baton(["status", "--state", "exploded"], env())).code).toBe(2);
    expect((await baton(["status", "--limit", "0"], env())).code).toBe(2);
    expect((await baton(["status", "release-1"], env())).code).toBe(2);
    // List filters with one release's id are refused, not ignored.
    const filtered = await baton(["status", "r1", "--limit", "abc"], env());
    expect(filtered.code).toBe(2);
    expect(filtered.stderr).toMatch(
      /--limit filter the list of releases; baton status r1 shows one release/,
    );
    expect((await baton(["status", "r1", "--state", "bogus"], env())).code).toBe(2);
    const missing = await baton(["status", "r999"], env());
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("r999");
    noStack(missing.stderr);
  });

  it("prints the full record as JSON, including the refused late callback", async () => {
    const r = await baton(["record", "--raw", live.ids.late], env(VIEWER));
    expect(r.code).toBe(0);
    const rec = JSON.parse(r.stdout) as {
      id: string;
      history: { kind: string; outcome: string; message: string }[];
      attempt_results: unknown[];
    };
    expect(rec.id).toBe(live.ids.late);
    expect(
      rec.history.some(
        (h) => h.kind === "callback" && h.outcome === "refused" && h.message.includes("late"),
      ),
    ).toBe(true);
    expect(Array.isArray(rec.attempt_results)).toBe(true);
    expect((await baton(["record", "x"], env())).code).toBe(2);
  });

  it("refuses --out in a folder that does not exist, naming --out and the fix (exit 2), no ENOENT", async () => {
    const out = path.join(dir, "no-such-folder", "x.json");
    const r = await baton(["record", live.ids.compensated, "--out", out], env());
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `[cli] --out ${out}: the folder ${path.dirname(out)} does not exist; create it (mkdir -p ${path.dirname(out)}) or choose another path\n`,
    );
    noStack(r.stderr);
    // A folder given as --out is named as such.
    const d = await baton(["record", live.ids.compensated, "--out", dir], env());
    expect(d.code).toBe(2);
    expect(d.stderr).toMatch(/^\[cli\] --out .*: is a folder; name a file in it/);
  });
});

describe("watch", () => {
  it("follows a release step by step until it succeeds (0)", async () => {
    const id = await createRelease(live.h, recipe(2));
    let seen: () => void = () => {};
    const first = new Promise<void>((r) => {
      seen = r;
    });
    const watching = baton(["watch", id, "--interval", "200", "--timeout", "60"], env(VIEWER), {
      onStdout: (all) => {
        if (all.includes(`release ${id} running`)) seen();
      },
    });
    await Promise.race([first, watching]);
    await drive(live.h);
    const r = await watching;
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`release ${id} running`);
    expect(r.stdout).toContain(`release ${id} succeeded`);
    expect(r.stdout).toMatch(/→ step 2 \(wave 1\) exclude lane · lane-a: succeeded/);
    expect(r.stdout).toMatch(/→ step 16 \(wave 2\) assert traffic observed \d+% \(.*\): succeeded/);
    expect(r.stdout).toMatch(
      /→ step \d+ \(wave \d\) set traffic \d+% \(lane-a \d+%, lane-b \d+%\)/,
    );
    expect(r.stdout.indexOf("→ step 2 ")).toBeLessThan(r.stdout.indexOf("→ step 16 "));
    // The final line comes after the last step run's line: the last line printed is the
    // release's end, and the step line just before it is the release's last step.
    expect(r.stdout.indexOf("→ step 16 ")).toBeLessThan(
      r.stdout.indexOf(`release ${id} succeeded`),
    );
    const lines = r.stdout.trim().split("\n");
    expect(lines.at(-1)).toContain(`release ${id} succeeded`);
    const stepLines = lines.filter((l) => l.includes("→ step "));
    const numbers = stepLines.map((l) => Number(/→ step (\d+) /.exec(l)?.[1]));
    const rec = (await (
      await fetch(`${live.url}/v1/releases/${id}`, {
        headers: { authorization: `Bearer ${VIEWER}` },
      })
    ).json()) as { manifest: { steps: unknown[] } };
    expect(Math.max(...numbers)).toBe(rec.manifest.steps.length);
    expect(numbers.at(-1)).toBe(rec.manifest.steps.length);
    expect(lines.at(-2)).toMatch(new RegExp(`→ step ${rec.manifest.steps.length} .*: succeeded`));
  });

  it("ends with 1 for a rolled-back release and prints NDJSON with --json", async () => {
    const r = await baton(["watch", live.ids.compensated, "--json"], env(VIEWER));
    expect(r.code).toBe(1);
    const events = r.stdout
      .trim()
      .split("\n")
      .map(
        (l) => JSON.parse(l) as { type: string; state?: string; direction?: string; at?: number },
      );
    const stamped = events.flatMap((e) => (typeof e.at === "number" ? [e.at] : []));
    expect(stamped).toEqual([...stamped].sort((a, b) => a - b));
    // The final release line, then only what the engine stamped later (deadlines it ignored
    // once the release had ended: housekeeping), in time order.
    const last = events.findLastIndex((e) => e.type === "release");
    expect(events[last]).toMatchObject({ type: "release", state: "rolled_back" });
    for (const e of events.slice(last + 1))
      expect(e).toMatchObject({ type: "refused", housekeeping: true });
    expect(events.some((e) => e.type === "step_run" && e.direction === "bwd")).toBe(true);
  });

  it("ends with 1 when the release waits for an operator or was aborted, and refuses bad options (2)", async () => {
    const id = await pausedRelease(live.h);
    const paused = await baton(["watch", id, "--timeout", "30"], env(VIEWER));
    expect(paused.code).toBe(1);
    expect(paused.stdout).toContain(`release ${id} is paused and waits for an operator`);
    // Only what the engine accepts: retry of the waiting step run, resume, abort.
    expect(paused.stdout).toMatch(/baton retry sr_\d+_\d+_f {2}# sends sr_/);
    expect(paused.stdout).toContain(`baton abort ${id}`);
    expect(paused.stdout).not.toContain("<step-run>");
    const held = JSON.parse((await baton(["start", good, "--hold", "--json"], env())).stdout) as {
      id: string;
    };
    expect((await baton(["abort", held.id, "--reason", "not needed"], env())).code).toBe(0);
    const aborted = await baton(["watch", held.id, "--timeout", "30"], env(VIEWER));
    expect(aborted.code).toBe(1);
    expect(aborted.stdout).toContain(`release ${held.id} aborted`);
    expect((await baton(["watch", id, "--interval", "5"], env())).code).toBe(2);
    expect((await baton(["watch", id, "--timeout", "-1"], env())).code).toBe(2);
  });
});

describe("operator actions", () => {
  it("aborts a held release, then refuses a second abort (1)", async () => {
    const held = JSON.parse((await baton(["start", good, "--hold", "--json"], env())).stdout) as {
      id: string;
    };
    // The reason is required: a usage error naming it, nothing sent.
    const bare = await baton(["abort", held.id], env());
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain("--reason");
    noStack(bare.stderr);
    const a = await baton(["abort", held.id, "--reason", "wrong image", "--actor", "alice"], env());
    expect(a.code).toBe(0);
    expect(a.stdout).toContain(`abort accepted: ${held.id} is now aborted`);
    const again = await baton(["abort", held.id, "--reason", "again"], env());
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^\[engine\] .*aborted/);
    const viewer = await baton(["abort", live.ids.paused, "--reason", "x"], env(VIEWER));
    expect(viewer.code).toBe(1);
    expect(viewer.stderr).toMatch(
      /^\[engine\] the viewer token only reads; abort needs the operator token \(BATON_OPERATOR_TOKEN\)/,
    );
    noStack(viewer.stderr);
  });

  it("resumes a held release and refuses to resume a finished one", async () => {
    const held = JSON.parse((await baton(["start", good, "--hold", "--json"], env())).stdout) as {
      id: string;
    };
    const r = await baton(["resume", held.id, "--json"], env());
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id: held.id, state: "running" });
    const done = await baton(["resume", live.ids.compensated], env());
    expect(done.code).toBe(1);
    expect((await baton(["resume", "17"], env())).code).toBe(2);
  });

  it("rolls forward from a rolled-back release, and refuses a rollback of it naming what it accepts", async () => {
    // A model of its own: the engine's other releases (one in flight) replace live.ids.compensated.
    const model = "cli-roll-forward";
    const own = (extra: Partial<RecipeInput> = {}): RecipeInput => {
      const r = recipe(2, extra);
      const id = (x: string) => `rf-${x}`;
      return {
        ...r,
        model,
        lanes: (r.lanes ?? []).map((l) => ({ ...l, id: id(String(l.id)) })),
        rollout: {
          ...r.rollout,
          waves: (r.rollout?.waves ?? []).map((w) => ({ ...w, lanes: w.lanes.map(id) })),
        },
      };
    };
    live.h.cp.seed([
      { id: "rf-lane-a", model, weight: 50 },
      { id: "rf-lane-b", model, weight: 50 },
    ]);
    const compensated = await compensatedRelease(live.h, own());
    const status = await baton(["status", compensated], env(VIEWER));
    expect(status.stdout).toContain(
      `after the end (a new release, docs/lifecycle.md):\n  baton roll-forward ${compensated} `,
    );
    const rb = await baton(["rollback", compensated, "--reason", "slow"], env());
    expect(rb.code).toBe(1);
    expect(rb.stderr).toMatch(
      /^\[engine\] rollback takes a succeeded release.*It accepts: roll-forward/,
    );
    noStack(rb.stderr);
    const sameFile = path.join(dir, "same.yaml");
    writeFileSync(sameFile, stringify(own()));
    const same = await baton(["roll-forward", compensated, sameFile], env());
    expect(same.code).toBe(1);
    expect(same.stderr).toMatch(
      /the recipe names the same image as r\d+ \(.*\), the image that release did not finish rolling out; a roll forward needs a fixed image/,
    );
    const fixed = path.join(dir, "fixed.yaml");
    const image = `ghcr.io/acme/summarizer@sha256:${"f0".repeat(32)}`;
    writeFileSync(fixed, stringify(own({ image })));
    const rf = await baton(["roll-forward", compensated, fixed], env());
    expect(rf.code, rf.stderr).toBe(0);
    expect(rf.stdout).toMatch(new RegExp(`^roll forward accepted: r\\d+ replaces ${compensated}`));
    expect((await baton(["roll-forward", compensated], env())).code).toBe(2);
  });

  it("retries the step run a paused release waits on, and refuses what does not wait", async () => {
    const rec = JSON.parse((await baton(["record", "--raw", live.ids.paused], env())).stdout) as {
      step_runs: { id: string; state: string }[];
    };
    const waiting = rec.step_runs.find((s) => s.state === "unknown");
    expect(waiting).toBeDefined();
    const r = await baton(["retry", waiting!.id], env());
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`retry accepted: ${live.ids.paused} is now running`);
    const again = await baton(["retry", waiting!.id], env());
    expect(again.code).toBe(1);
    noStack(again.stderr);
    expect((await baton(["retry", "sr_bad"], env())).code).toBe(2);
  });
});

/**
 * Runs `f` with the port of a server this test holds listening, for a `serve` that must fail
 * before it binds: no other process can take the port meanwhile, and a serve that did get as
 * far as binding would say the address is in use.
 */
async function withHeldPort<T>(f: (port: number) => Promise<T>): Promise<T> {
  const held = createServer();
  await new Promise<void>((r) => held.listen(0, "127.0.0.1", () => r()));
  try {
    return await f((held.address() as { port: number }).port);
  } finally {
    held.close();
  }
}

describe("serve and demo", () => {
  it("serves the API and the dashboard, and stops on SIGTERM", async () => {
    const data = mkdtempSync(path.join(tmpdir(), "baton-serve-"));
    const served = await serveBin(
      {
        BATON_DATA_DIR: data,
        BATON_CALLBACK_SECRETS: "serve-test-secret-0123456789",
        BATON_OPERATOR_TOKEN: "serve-operator-token-0123",
        BATON_ADMISSION: "off",
        BATON_DISPATCHER: "github",
        GITHUB_REPOSITORY: "acme/models",
        GITHUB_TOKEN: "not-used-in-this-test",
      },
      { cwd: dir, timeoutMs: 30_000 },
    ).catch((e) => {
      rmSync(data, { recursive: true, force: true });
      throw e;
    });
    const { child, url } = served;
    try {
      const listenedAt = Date.now();
      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(200);
      const page = await fetch(`${url}/releases`, { redirect: "manual" });
      expect(page.status).toBe(303);
      const status = await baton(["status", "--json"], {
        BATON_ENGINE_URL: url,
        BATON_TOKEN: "serve-operator-token-0123",
      });
      expect(JSON.parse(status.stdout)).toEqual({ releases: [] });
      // Still serving well after the CLI's 5 s bound on a finished command's open handles
      // (engine/src/cli/main.ts): serve's work is to keep serving until a signal.
      await new Promise((r) => setTimeout(r, Math.max(0, listenedAt + 7_000 - Date.now())));
      expect(child.exitCode, served.output()).toBeNull();
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      child.kill("SIGTERM");
      expect(await served.exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
      rmSync(data, { recursive: true, force: true });
    }
  });

  const serveEnv = (extra: Record<string, string>) => ({
    BATON_CALLBACK_SECRETS: "serve-test-secret-0123456789",
    BATON_OPERATOR_TOKEN: "serve-operator-token-0123",
    BATON_ADMISSION: "off",
    ...extra,
  });

  it("on a busy port: says which address and what to do, and exits non-zero (no hang)", async () => {
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, "127.0.0.1", () => r()));
    const port = (holder.address() as { port: number }).port;
    const data = mkdtempSync(path.join(tmpdir(), "baton-busy-"));
    try {
      const r = await batonBin(
        ["serve", "--port", String(port), "--host", "127.0.0.1"],
        serveEnv({ BATON_DATA_DIR: data }),
        { timeoutMs: 60_000 },
      );
      // Killed by the 60 s guard (a hang) would be code null.
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(
        `[engine] cannot listen on 127.0.0.1:${port}: the address is already in use`,
      );
      expect(r.stderr).not.toContain("[cli] [engine]");
      expect(r.stderr).toContain("set PORT to a free port");
      expect(r.stdout).not.toContain("listening");
      noStack(r.stderr);
    } finally {
      holder.close();
      rmSync(data, { recursive: true, force: true });
    }
  });

  it("with Postgres unreachable at start: says so and exits non-zero (no hang)", async () => {
    // The discard port: nothing listens there.
    const pgPort = 9;
    // The engine opens its store before it listens: it never gets to bind the port given.
    const r = await withHeldPort((port) =>
      batonBin(
        ["serve", "--port", String(port), "--host", "127.0.0.1"],
        serveEnv({ DATABASE_URL: `postgres://baton@127.0.0.1:${pgPort}/baton` }),
        { timeoutMs: 60_000 },
      ),
    );
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/ECONNREFUSED 127\.0\.0\.1/);
    // Names where it looked and the variable to fix, not a migration that never ran.
    expect(r.stderr).toContain(
      `[store] cannot open Postgres at 127.0.0.1:${pgPort}/baton (DATABASE_URL)`,
    );
    expect(r.stderr).not.toContain("migration");
    expect(r.stdout).not.toContain("listening");
    noStack(r.stderr);
  });

  it("a data directory that cannot hold files: names BATON_DATA_DIR and exits 2 (no spin)", async () => {
    // /proc refuses new files; Node's recursive mkdir under it loops for ever.
    const r = await withHeldPort((port) =>
      batonBin(
        ["serve", "--port", String(port), "--host", "127.0.0.1"],
        serveEnv({ BATON_DATA_DIR: "/proc/baton-data" }),
        { timeoutMs: 60_000 },
      ),
    );
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain("BATON_DATA_DIR /proc/baton-data cannot hold the engine's files");
    expect(r.stderr).toContain("fix: set BATON_DATA_DIR to a directory this user can write");
    expect(r.stdout).not.toContain("listening");
    noStack(r.stderr);
  });

  it("refuses a bad configuration with the variable and the fix (2)", async () => {
    const r = await batonBin(["serve"], { BATON_OPERATOR_TOKEN: "short" });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("BATON_CALLBACK_SECRETS");
    expect(r.stderr).toContain("BATON_OPERATOR_TOKEN must be at least 16 characters");
    noStack(r.stderr);
    expect((await batonBin(["serve", "--port", "99999"])).code).toBe(2);
  });

  it("delegates demo to engine/src/demo/main.ts, or says clearly that it is missing", async () => {
    const { existsSync } = await import("node:fs");
    if (!existsSync(path.join(ROOT, "engine/src/demo/main.ts"))) {
      const r = await batonBin(["demo"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("[cli] the demo is not part of this build");
      return;
    }
    // Arguments and --help reach the demo; a bad --fail-at is refused before anything starts.
    const help = await batonBin(["demo", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--fail-at <step>");
    const bad = await batonBin(["demo", "--fail-at", "999"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("[demo] --fail-at 999");
  });
});
