/**
 * The verb table (engine/src/domain/verbs.ts): each verb's suggested command carries every
 * required flag with marked placeholders; run through the real CLI (in process, fetch stubbed)
 * it is accepted by the command's parser and sends a body the verb's route accepts, to the
 * verb's route; and every route the table declares exists with the operator role.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { runCli } from "../../engine/src/cli/program.ts";
import { suggestedCommand, VERB_NAMES, VERBS, verbRoute } from "../../engine/src/domain/verbs.ts";
import { apiRoutes } from "../../engine/src/http/api-routes.ts";
import { createApp } from "../../engine/src/http/app.ts";
import type { ReleaseApi } from "../../engine/src/service/api.ts";

const dir = mkdtempSync(join(tmpdir(), "baton-verbs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.unstubAllGlobals());

const recipe = join(dir, "fixed.yaml");
writeFileSync(recipe, "name: fixed\n");
const bundle = join(dir, "bundle.json");
writeFileSync(bundle, '{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}');

/** Splits a suggested command line as a shell would (double quotes only). */
function argv(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

/** What a person types for each placeholder. */
function fill(word: string): string {
  if (word === "<fixed-recipe.yaml>") return recipe;
  if (word === "<bundle.json>") return bundle;
  if (word.endsWith("=<image|none>")) return word.replace("<image|none>", "none");
  return word.replace(/<[^>]+>/g, "filled in");
}

describe("suggestedCommand", () => {
  it("carries every required flag, with marked placeholders", () => {
    expect(suggestedCommand("abort", { target: "r2" })).toBe('baton abort r2 --reason "<why>"');
    expect(suggestedCommand("resume", { target: "r2" })).toBe("baton resume r2");
    expect(suggestedCommand("retry", { target: "sr_2_3_f" })).toBe("baton retry sr_2_3_f");
    expect(suggestedCommand("abandon", { target: "r2", lanes: ["lane-a", "lane-b"] })).toBe(
      'baton abandon r2 --reason "<why>" --lane lane-a=<image|none> --lane lane-b=<image|none>',
    );
    expect(suggestedCommand("roll_forward", { target: "r1" })).toBe(
      "baton roll-forward r1 <fixed-recipe.yaml> --bundle <bundle.json>",
    );
    expect(suggestedCommand("accept", { target: "r1" })).toBe('baton accept r1 --by "<owner>"');
    expect(suggestedCommand("verify", { target: "r1" })).toBe("baton verify r1");
    expect(
      suggestedCommand("promote", {
        target: "r1",
        flags: { "--reason": '"<why the wave is good>"' },
      }),
    ).toBe('baton promote r1 --reason "<why the wave is good>"');
    for (const name of VERB_NAMES) {
      const line = suggestedCommand(name, { target: "r1", lanes: ["lane-a"] });
      for (const f of VERBS[name].flags.filter((x) => x.required)) expect(line).toContain(f.flag);
    }
  });

  it.each(VERB_NAMES)(
    "%s: the suggestion, filled in, runs through the CLI to the verb's route with a body it accepts",
    async (name) => {
      const v = VERBS[name];
      const target = v.on === "step_run" ? "sr_2_3_b" : "r2";
      const words = argv(suggestedCommand(name, { target, lanes: ["lane-a", "lane-b"] })).map(fill);
      expect(words[0]).toBe("baton");
      const sent: { url: string; method: string; body: string | undefined }[] = [];
      vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
        sent.push({ url, method: init.method ?? "GET", body: init.body as string | undefined });
        // verify waits for its verdict: this one is judged already, so it asks nothing more.
        return new Response(
          JSON.stringify({
            id: "r3",
            state: "running",
            release_state: "running",
            verification: { seq: 1, state: "passed", trigger: "operator", lanes: [], gaps: [] },
          }),
          {
            status: v.status,
            headers: { "content-type": "application/json" },
          },
        );
      });
      let out = "";
      const io = {
        out: { write: (s: string) => (out += s) },
        err: { write: (s: string) => (out += s) },
      };
      const code = await runCli(["--engine", "http://engine.test", ...words.slice(1)], io);
      expect(out).not.toContain("[cli] error");
      expect(code).toBe(0);
      expect(sent).toHaveLength(1);
      const route = verbRoute(name).replace(":id", target);
      expect(`${sent[0]!.method} ${new URL(sent[0]!.url).pathname}`).toBe(route);
      if (v.body === "none") expect(sent[0]!.body).toBeUndefined();
      else if (v.body === "recipe") expect(JSON.parse(sent[0]!.body!).recipe).toBe("name: fixed\n");
      else {
        const parsed = v.body.safeParse(JSON.parse(sent[0]!.body!));
        expect(parsed.success).toBe(true);
        for (const f of v.flags) {
          if (!f.required || f.body === null) continue;
          expect(JSON.stringify((parsed.data as Record<string, unknown>)[f.body])).not.toMatch(
            /^(""|\{\}|undefined)$/,
          );
        }
      }
    },
  );
});

describe("the routes built from the table", () => {
  const app = createApp({
    api: {} as ReleaseApi,
    tick: async () => ({ performed: 0, failed: 0 }),
    clock: { now: () => 0 } as never,
    callbackSecrets: ["0123456789abcdef0123456789abcdef"],
    operatorToken: "operator-token-0123456789",
    viewerToken: "viewer-token-0123456789",
    routes: apiRoutes,
  });

  it.each(VERB_NAMES)("%s: its route needs the operator token", async (name) => {
    const v = VERBS[name];
    const path = verbRoute(name)
      .slice("POST ".length)
      .replace(":id", v.on === "step_run" ? "sr_2_3_b" : "r2");
    const none = await app.request(path, { method: "POST" });
    expect(none.status).toBe(401);
    const viewer = await app.request(path, {
      method: "POST",
      headers: { authorization: "Bearer viewer-token-0123456789" },
    });
    expect(viewer.status).toBe(403);
    expect(await viewer.text()).toContain("operator");
  });
});
