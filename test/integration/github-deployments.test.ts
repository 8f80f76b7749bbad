/**
 * GitHub Deployments end to end (docs/engine.md "GitHub Deployments"): a real engine on each
 * store posts, through the GitHub adapter, to the GitHub stand-in, which checks every request
 * and answer against GitHub's OpenAPI description. What is asserted is what the repository's
 * Deployments page would show (the stand-in's deployments and statuses), never only Baton's
 * tables: one deployment per release, in_progress then success / failure then inactive, the
 * release page as the log URL, the previous success superseded, and GitHub being down or
 * refusing never holding a release up.
 */
import { generateKeyPairSync } from "node:crypto";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../engine/src/config.ts";
import { BatonError } from "../../engine/src/domain/errors.ts";
import { gitHubOpenApiVersion, warmUpGitHubOpenApi } from "../support/github-openapi.ts";
import { type GitHubStandin, startGitHubStandin } from "../support/github-standin.ts";
import {
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  recipe,
  SHA,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const TOKEN = "ghp_deployments_test_token_0123456789";
const noWindow = { policy: { rerun_window_minutes: 0 } };

// Compile the description's checks once, before the clocks of the tests start.
beforeAll(() => {
  expect(gitHubOpenApiVersion()).toMatch(/^3\./);
  const deployments = "/repos/{owner}/{repo}/deployments";
  const statuses = "/repos/{owner}/{repo}/deployments/{deployment_id}/statuses";
  warmUpGitHubOpenApi([
    ["POST", deployments],
    ["GET", deployments],
    ["POST", statuses],
    ["GET", statuses],
  ]);
}, 120_000);

describe.each(STORE_KINDS)("GitHub deployments on %s", { timeout: 60_000 }, (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  let gh: GitHubStandin | null = null;
  afterEach(async () => {
    await h?.close();
    await gh?.close();
    h = null;
    gh = null;
  });

  async function setUp(o: { ref?: string; retryMs?: number; maxTries?: number } = {}) {
    gh = await startGitHubStandin({ tokens: [TOKEN], refs: ["main"] });
    h = await makeHarness({
      kind,
      config: {
        githubRepository: "acme/models",
        githubToken: TOKEN,
        githubApiUrl: gh.baseUrl,
        githubTimeoutMs: 30_000,
        githubDeployments: { environment: "production", ref: o.ref ?? "main" },
        notify: {
          webhook: null,
          slack: null,
          github: false,
          events: [],
          retryBaseMs: o.retryMs ?? 1_000,
          maxTries: o.maxTries ?? 4,
        },
      },
    });
    return { h, gh };
  }

  const states = (g: GitHubStandin, i: number) => g.deployments[i]?.statuses.map((s) => s.state);

  it.skipIf(skip)(
    "as a GitHub App installation: the statuses go out with an installation token the App's JWT bought",
    async () => {
      const keys = generateKeyPairSync("rsa", {
        modulusLength: 2048,
        publicKeyEncoding: { type: "spki", format: "pem" },
        privateKeyEncoding: { type: "pkcs1", format: "pem" },
      });
      gh = await startGitHubStandin({
        refs: ["main"],
        app: { appId: "4242", publicKeyPem: keys.publicKey, installationId: "99" },
      });
      h = await makeHarness({
        kind,
        config: {
          githubRepository: "acme/models",
          githubToken: null,
          githubApp: { appId: "4242", privateKey: keys.privateKey, installationId: "99" },
          githubApiUrl: gh.baseUrl,
          githubTimeoutMs: 30_000,
          githubDeployments: { environment: "production", ref: "main" },
        },
      });
      const r = recipe(2);
      delete r.tool_revision;
      const id = await createRelease(h, r);
      await drive(h);
      expect((await getRecord(h, id)).state).toBe("succeeded");
      expect(gh.openapiProblems).toEqual([]);
      expect(states(gh, 0)).toEqual(["in_progress", "success"]);
      // Every deployments request carried a token GitHub issued to the installation.
      const used = gh.seen.filter((x) => x.path.includes("/deployments"));
      expect(used.length).toBeGreaterThanOrEqual(3);
      expect(gh.issuedTokens.length).toBeGreaterThanOrEqual(1);
      for (const x of used) {
        expect(gh.issuedTokens.map((t) => `token ${t}`)).toContain(x.authorization);
      }
    },
  );

  it.skipIf(skip)(
    "a succeeded release: one deployment, in_progress then success, linked to the release page; the next success supersedes it",
    async () => {
      const { h, gh } = await setUp();
      const r = recipe(2);
      delete r.tool_revision;
      const id = await createRelease(h, r);
      await drive(h);
      expect((await getRecord(h, id)).state).toBe("succeeded");
      expect(gh.openapiProblems).toEqual([]);
      expect(gh.deployments).toHaveLength(1);
      const d = gh.deployments[0]!;
      expect(d).toMatchObject({
        environment: "production",
        ref: "main",
        task: `deploy:baton-${id}`,
        production_environment: true,
      });
      expect((d.payload as { baton: { release_id: string } }).baton.release_id).toBe(id);
      expect(states(gh, 0)).toEqual(["in_progress", "success"]);
      for (const s of d.statuses) {
        expect(s.log_url).toBe(`http://127.0.0.1:8787/releases/${id}`);
        expect(s.description.length).toBeLessThanOrEqual(140);
      }
      // Baton's history says the same, one line per status.
      const lines = (await getRecord(h, id)).history.filter((x) => x.kind === "deployment");
      expect(lines.map((x) => x.outcome)).toEqual(["accepted", "accepted"]);

      // A second release of the same environment: its success makes the first inactive.
      const id2 = await createRelease(h, r);
      await drive(h);
      expect((await getRecord(h, id2)).state).toBe("succeeded");
      expect(gh.deployments).toHaveLength(2);
      expect(states(gh, 0)).toEqual(["in_progress", "success", "inactive"]);
      expect(gh.deployments[0]!.statuses[2]!.description).toBe(`superseded by ${id2}`);
      expect(states(gh, 1)).toEqual(["in_progress", "success"]);
      expect(gh.openapiProblems).toEqual([]);
    },
  );

  it.skipIf(skip)(
    "a failed release: failure, then inactive once rolled back; the recipe's environment and pinned revision",
    async () => {
      const { h, gh } = await setUp();
      const id = await createRelease(h, recipe(2, { ...noWindow, environment: "staging-eu" }));
      const rec = await getRecord(h, id);
      const bad = rec.manifest.steps.find((s) => s.kind === "runner")!.index;
      await drive(h, (p) => (p.step_run_id.endsWith(`_${bad}_f`) ? "fail" : "pass"));
      expect((await getRecord(h, id)).state).toBe("rolled_back");
      expect(gh.openapiProblems).toEqual([]);
      expect(gh.deployments).toHaveLength(1);
      const d = gh.deployments[0]!;
      expect(d.environment).toBe("staging-eu");
      expect(d.production_environment).toBe(false);
      expect(d.ref).toBe(SHA);
      expect(states(gh, 0)).toEqual(["in_progress", "failure", "inactive"]);
      expect(d.statuses[1]!.description).toContain(`step ${bad + 1}`);
      expect(d.statuses[2]!.description).toContain("rolled back");
    },
  );

  it.skipIf(skip)(
    "GitHub down: the release runs on to succeeded; once GitHub answers the page shows success, never an older status after it",
    async () => {
      const { h, gh } = await setUp({ retryMs: 1_000, maxTries: 6 });
      gh.failDeployments(502, 3);
      const id = await createRelease(h, recipe(2));
      await drive(h);
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("succeeded");
      expect(gh.deployments).toHaveLength(1);
      // The in_progress that waited out GitHub's 502s came after the success: it is skipped.
      expect(states(gh, 0)?.at(-1)).toBe("success");
      expect(states(gh, 0)?.filter((s) => s === "success")).toHaveLength(1);
      const lines = rec.history.filter((x) => x.kind === "deployment");
      expect(lines).toHaveLength(2);
      expect(lines.every((x) => x.outcome === "accepted")).toBe(true);
      expect(lines.some((x) => /on try [2-9]/.test(x.message))).toBe(true);
      expect(gh.openapiProblems).toEqual([]);
    },
  );

  it.skipIf(skip)(
    "a ref GitHub does not have: given up once with the fix named; the release is not held",
    async () => {
      const { h, gh } = await setUp({ ref: "no-such-branch" });
      const r = recipe(2);
      delete r.tool_revision;
      const id = await createRelease(h, r);
      await drive(h);
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("succeeded");
      expect(gh.deployments).toHaveLength(0);
      const refused = rec.history.filter((x) => x.kind === "deployment" && x.outcome === "refused");
      expect(refused.length).toBeGreaterThan(0);
      expect(refused[0]!.message).toContain("No ref found for: no-such-branch");
      expect(refused[0]!.message).toContain("BATON_GITHUB_DEPLOYMENT_REF");
      expect(gh.openapiProblems).toEqual([]);
    },
  );

  it.skipIf(skip)("a recipe environment GitHub cannot name is refused with 422", async () => {
    const { h, gh } = await setUp();
    const res = await op(h, "POST", "/v1/releases", recipe(2, { environment: "prod/eu" }));
    expect(res.status).toBe(422);
    const body = JSON.stringify(await res.json());
    expect(body).toContain("environment");
    expect(gh.deployments).toHaveLength(0);
  });
});

describe("GitHub deployments configuration", () => {
  const base = {
    BATON_CALLBACK_SECRETS: "s".repeat(32),
    BATON_OPERATOR_TOKEN: "o".repeat(32),
    BATON_ADMISSION: "off",
  };
  it("needs a repository and a credential, and names the fix", () => {
    let err: unknown;
    try {
      loadConfig({ ...base, BATON_GITHUB_DEPLOYMENTS: "production" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BatonError);
    expect((err as BatonError).message).toContain(
      "BATON_GITHUB_DEPLOYMENTS needs GITHUB_REPOSITORY",
    );
  });
  it("refuses an environment name GitHub would not take", () => {
    expect(() =>
      loadConfig({
        ...base,
        GITHUB_REPOSITORY: "acme/models",
        GITHUB_TOKEN: TOKEN,
        BATON_GITHUB_DEPLOYMENTS: "prod/eu",
      }),
    ).toThrow(/BATON_GITHUB_DEPLOYMENTS must be a GitHub environment name/);
  });
  it("is off unless set; the ref defaults to main", () => {
    expect(loadConfig(base).githubDeployments).toBeNull();
    expect(
      loadConfig({
        ...base,
        GITHUB_REPOSITORY: "acme/models",
        GITHUB_TOKEN: TOKEN,
        BATON_GITHUB_DEPLOYMENTS: "production",
      }).githubDeployments,
    ).toEqual({ environment: "production", ref: "main" });
  });
});

describe("the GitHub stand-in checks deployments against GitHub's OpenAPI", () => {
  let gh: GitHubStandin | null = null;
  afterEach(async () => {
    await gh?.close();
    gh = null;
  });
  const post = (g: GitHubStandin, path: string, body: unknown) =>
    fetch(`${g.baseUrl}${path}`, {
      method: "POST",
      headers: { authorization: `token ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  it("refuses what GitHub would refuse: a bad state, a missing ref, an undocumented field, a long description", async () => {
    gh = await startGitHubStandin({ tokens: [TOKEN] });
    expect((await post(gh, "/repos/acme/models/deployments", { task: "deploy" })).status).toBe(422);
    expect(
      (await post(gh, "/repos/acme/models/deployments", { ref: "main", enviroment: "prod" }))
        .status,
    ).toBe(422);
    const created = await post(gh, "/repos/acme/models/deployments", {
      ref: "main",
      required_contexts: [],
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: number };
    const statuses = `/repos/acme/models/deployments/${id}/statuses`;
    expect((await post(gh, statuses, { state: "done" })).status).toBe(422);
    const long = await post(gh, statuses, { state: "success", description: "x".repeat(141) });
    expect(long.status).toBe(422);
    expect(JSON.stringify(await long.json())).toContain("maximum is 140 characters");
    const ok = {
      state: "success",
      description: "ok",
      log_url: "https://baton.example/releases/r1",
    };
    expect((await post(gh, statuses, ok)).status).toBe(201);
    expect(gh.openapiProblems.join("\n")).toMatch(/ref/);
    expect(gh.openapiProblems.join("\n")).toMatch(/enviroment is not a documented field/);
    expect(gh.openapiProblems.join("\n")).toMatch(/state/);
    expect(gh.deployments[0]!.statuses.map((s) => s.state)).toEqual(["success"]);
  });
});
