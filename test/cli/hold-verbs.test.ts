/**
 * `baton deploy`, `baton release` and `baton pause` (docs/lifecycle.md, docs/cli.md): the CLI
 * (`runCli`, in process) against a real engine on each store, served over HTTP on 127.0.0.1, its releases driven through the signed runner protocol by the service harness.
 * Checked on the environment too (the control plane's weights and the runner dispatches), and
 * with bad input: a missing `--reason`, an id that is not one, an unknown release, the wrong
 * state. Exit codes: 0 accepted, 1 refused by the engine, 2 usage; each error one line naming
 * the flag or the verb that applies, never a stack trace.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  drive,
  getRecord,
  OPERATOR,
  pumpOnce,
  recipe,
  runStep,
  STORE_KINDS,
  skipStore,
} from "../integration/service-harness.ts";
import { baton } from "./run-baton.ts";
import { type Served, served } from "./served-engine.ts";

const MODEL = "summarizer-v7";
const noStack = (s: string) => expect(s).not.toMatch(/\n\s+at .+:\d+:\d+/);

describe.each(STORE_KINDS)("baton deploy, release and pause on %s", (kind) => {
  const skip = skipStore(kind);
  let s: Served | null = null;
  afterEach(async () => {
    await s?.close();
    s = null;
  });
  const env = () => ({ BATON_ENGINE_URL: s?.url, BATON_TOKEN: OPERATOR });

  it.skipIf(skip)(
    "deploy holds the candidate at 0% until release; release is refused out of turn",
    async () => {
      s = await served(kind, "baton-cli-hold-");
      const { h } = s;
      const file = path.join(s.dir, "recipe.yaml");
      writeFileSync(file, stringify(recipe(2)));

      const missing = await baton(["deploy", path.join(s.dir, "nope.yaml")], env());
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain("cannot read recipe file");
      const bad = path.join(s.dir, "bad.yaml");
      writeFileSync(bad, stringify({ ...recipe(2), image: "registry/x:latest" }));
      const refusedRecipe = await baton(["deploy", bad], env());
      expect(refusedRecipe.code).toBe(1);
      expect(refusedRecipe.stderr).toMatch(/image/);
      noStack(refusedRecipe.stderr);

      const dep = await baton(["deploy", file], env());
      expect(dep.code, dep.stderr).toBe(0);
      const id = /^deployed (r\d+): 16 steps/m.exec(dep.stdout)?.[1] as string;
      expect(id, dep.stdout).toBeDefined();
      expect(dep.stdout).toContain(`expose it with: baton release ${id}`);
      await drive(h);
      expect((await getRecord(h, id)).state).toBe("paused");
      // The environment: lane-a redeployed, in service at weight 0.
      expect(h.cp.weights(MODEL)["lane-a"]).toBe(0);

      // Bad input: no such release, not an id; the wrong verb for a dark release.
      const unknown = await baton(["release", "r9999"], env());
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/r9999/);
      expect(unknown.stderr.trim().split("\n")).toHaveLength(1);
      const notId = await baton(["release", "latest"], env());
      expect(notId.code).toBe(2);
      expect(notId.stderr).toContain('"latest" is not a release id; ids look like r17');
      const pause = await baton(["pause", id, "--reason", "look first"], env());
      expect(pause.code).toBe(1);
      expect(pause.stderr).toMatch(/already paused.*waits for release \(baton release/);
      const resume = await baton(["resume", id], env());
      expect(resume.code).toBe(1);
      expect(resume.stderr).toMatch(/waits for release \(baton release/);
      noStack(unknown.stderr + pause.stderr + resume.stderr);

      const rel = await baton(
        ["release", id, "--reason", "smoke on lane-a is clean", "--actor", "carol"],
        env(),
      );
      expect(rel.code, rel.stderr).toBe(0);
      expect(rel.stdout).toContain(`release accepted: ${id} is now running`);
      await drive(h);
      expect((await getRecord(h, id)).state).toBe("succeeded");
      expect(h.cp.weights(MODEL)).toEqual({ "lane-a": 50, "lane-b": 50 });
      const again = await baton(["release", id, "--json"], env());
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/released already/);
      // The model's first release: nothing earlier to roll back to, so a new release is offered.
      expect(again.stderr).toMatch(
        /no earlier admitted manifest of model .* roll forward with a new recipe/,
      );
      noStack(again.stderr);
    },
  );

  it.skipIf(skip)(
    "pause needs --reason; paused, nothing new is dispatched and the weights stay; refused when not running",
    async () => {
      s = await served(kind, "baton-cli-hold-");
      const { h } = s;
      const file = path.join(s.dir, "recipe.yaml");
      writeFileSync(file, stringify(recipe(2)));
      const st = await baton(["start", file], env());
      expect(st.code, st.stderr).toBe(0);
      const id = /^started (r\d+)/m.exec(st.stdout)?.[1] as string;
      // Run until a runner dispatch is out and leave it unanswered (in flight).
      let inFlight: DispatchPayload | null = null;
      for (let i = 0; i < 100 && !inFlight; i++) {
        const { fresh } = await pumpOnce(h, () => "skip");
        inFlight = fresh[0] ?? null;
      }
      expect(inFlight).not.toBeNull();

      const noReason = await baton(["pause", id], env());
      expect(noReason.code).toBe(2);
      expect(noReason.stderr).toContain("--reason");
      expect(noReason.stderr.trim().split("\n")).toHaveLength(1);
      const blank = await baton(["pause", id, "--reason", " "], env());
      expect(blank.code).toBe(1);
      expect(blank.stderr).toMatch(/reason is required/);
      expect((await getRecord(h, id)).state).toBe("running");

      const ok = await baton(
        ["pause", id, "--reason", "error budget burn on lane-a", "--actor", "alice"],
        env(),
      );
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.stdout).toContain(`pause accepted: ${id} is now paused`);
      expect(ok.stdout).toContain(`nothing new starts until baton resume ${id}`);
      // The step run in flight settles; nothing new is dispatched, the weights stay.
      const weights = h.cp.weights(MODEL);
      const dispatched = h.dispatcher.accepted.length;
      await runStep(h, inFlight as DispatchPayload, "pass");
      for (let i = 0; i < 10; i++) await pumpOnce(h, () => "skip");
      expect((await getRecord(h, id)).state).toBe("paused");
      expect(h.dispatcher.accepted.length).toBe(dispatched);
      expect(h.cp.weights(MODEL)).toEqual(weights);

      const twice = await baton(["pause", id, "--reason", "again"], env());
      expect(twice.code).toBe(1);
      expect(twice.stderr).toMatch(/already paused.*resume \(baton resume/);
      const release = await baton(["release", id], env());
      expect(release.code).toBe(1);
      expect(release.stderr).toMatch(/not deployed dark.*baton deploy/);
      noStack(twice.stderr + release.stderr);

      const resumed = await baton(["resume", id], env());
      expect(resumed.code, resumed.stderr).toBe(0);
      await drive(h);
      expect((await getRecord(h, id)).state).toBe("succeeded");
      const late = await baton(["pause", id, "--reason", "late"], env());
      expect(late.code).toBe(1);
      expect(late.stderr).toMatch(
        /no earlier admitted manifest of model .* roll forward with a new recipe/,
      );
      const viewer = await baton(["pause", id, "--reason", "x"], {
        BATON_ENGINE_URL: s.url,
        BATON_TOKEN: undefined,
      });
      expect(viewer.code).not.toBe(0);
      noStack(late.stderr + viewer.stderr);
    },
  );
});
