// Keyless signing in the recipe workflow (docs/trust.md "Signing from the recipe workflow"),
// offline and end to end: the start job's `run:` script of recipe.yml, executed as GitHub does
// (bash -e -o pipefail) with BATON_KEYLESS=true and the two variables a job with
// `id-token: write` gets (ACTIONS_ID_TOKEN_REQUEST_URL/TOKEN) pointing at a local stand-in of
// the Actions OIDC token endpoint. The real CLI signs each manifest through sigstore-js: the
// token goes to a local Fulcio (@sigstore/mock, a CA and CT log made here), the time to a
// local TSA; a real engine on each store verifies the bundle under a trust policy naming the
// workflow identity (repository + workflow + ref) and that trust root.
// Refusals, each a 422 naming its check: another repository, another ref, a replayed
// (older) manifest, an expired one, a forged payload, a certificate from a CA not trusted.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { compress } from "snappyjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { loadTrustPolicy } from "../../engine/src/admission/policy.ts";
import { signKeyless as signStatement } from "../../engine/src/admission/sign.ts";
import {
  GITHUB_HOSTED_BUILDER,
  provenanceStatement,
} from "../../engine/src/admission/statement.ts";
import { baton } from "../cli/run-baton.ts";
import {
  FakeClock,
  type Harness,
  makeHarness,
  OPERATOR,
  recipe,
  STORE_KINDS,
  skipStore,
} from "../integration/service-harness.ts";
import { responseProblems } from "../support/github-openapi.ts";
import { runWorkflowStep } from "../support/recipe-workflow.ts";
import { type MockSigstore, startMockSigstore } from "../support/sigstore-mock.ts";
import { REPO } from "../support/standin-target.ts";

type Step = { name?: string; run?: string };
const workflow = parse(readFileSync(join(REPO, ".github/workflows/recipe.yml"), "utf8")) as {
  jobs: { start: { permissions?: Record<string, string>; steps: Step[] } };
};

const GH_REPO = "acme/models";
const GH_WORKFLOW = ".github/workflows/recipe.yml";
const GH_REF = "refs/heads/main";
const SAN = `https://github.com/${GH_REPO}/${GH_WORKFLOW}@${GH_REF}`;
const REQUEST_TOKEN = "actions-request-token-1";

let dir: string;
let sigstore: MockSigstore;
/** A second Sigstore whose CA the policy does not trust (forged certificates). */
let rogue: MockSigstore;

/** The Actions OIDC token endpoint stand-in: who it issues tokens for, and what it was asked. */
const oidc = {
  url: "",
  server: null as Server | null,
  identity: { repository: GH_REPO, workflow: GH_WORKFLOW, ref: GH_REF },
  issuer: null as MockSigstore | null,
  asked: [] as { audience: string | null; auth: string | undefined }[],
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "baton-recipe-keyless-"));
  sigstore = await startMockSigstore();
  rogue = await startMockSigstore();
  oidc.server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    oidc.asked.push({ audience: u.searchParams.get("audience"), auth: req.headers.authorization });
    if (req.headers.authorization !== `Bearer ${REQUEST_TOKEN}`) {
      res.writeHead(401, { "content-type": "application/json" }).end('{"message":"bad token"}');
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ value: (oidc.issuer ?? sigstore).githubToken(oidc.identity) }));
  });
  await new Promise<void>((ok) => oidc.server?.listen(0, "127.0.0.1", ok));
  oidc.url = `http://127.0.0.1:${(oidc.server.address() as AddressInfo).port}/token?api-version=2.0`;
}, 60_000);

afterAll(async () => {
  await new Promise<void>((ok) => (oidc.server ? oidc.server.close(() => ok()) : ok()));
  await sigstore?.close();
  await rogue?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The environment of the start step on a runner with `id-token: write` and BATON_KEYLESS. */
function runnerEnv(url: string, via: MockSigstore = sigstore): Record<string, string> {
  return {
    BATON_ENGINE_URL: url,
    BATON_TOKEN: OPERATOR,
    BATON_KEYLESS: "true",
    BATON_FULCIO_URL: via.url,
    BATON_TSA_URL: via.url,
    ACTIONS_ID_TOKEN_REQUEST_URL: oidc.url,
    ACTIONS_ID_TOKEN_REQUEST_TOKEN: REQUEST_TOKEN,
  };
}

/** A checkout with recipe `n` of model-1 (see recipeText). */
function checkout(name: string, n = 1): string {
  const c = join(dir, `checkout-${name}`);
  mkdirSync(join(c, "recipes"), { recursive: true });
  writeFileSync(join(c, "recipes", "svc-1.yaml"), recipeText(n));
  return c;
}

/** Recipe `n` of model-1: its own image digest and lane (lane-n), so each is a new manifest. */
function recipeText(n: number): string {
  const image = `ghcr.io/acme/summarizer@sha256:${n.toString(16).padStart(64, "0")}`;
  const r = recipe(1, { name: "svc-1", model: "model-1", image });
  const l = { ...(r.lanes?.[0] as object), id: `lane-${n}`, port: 2200 + n };
  return stringify({
    ...r,
    lanes: [l],
    rollout: { waves: [{ lanes: [`lane-${n}`], traffic: 100 }] },
  });
}

const runStart = (cwd: string, env: Record<string, string>) =>
  runWorkflowStep(cwd, env, { timeoutMs: 120_000 });

/**
 * `baton sign --keyless` with a runner's environment, in process (`runCli`): these bundles feed
 * the refusal cases; the start step's own `baton` processes are what `runStart` runs. The
 * Sigstore client reads the OIDC request variables from `process.env`, so they are set for the
 * call and restored after it (the tests of a file run one at a time). Returns the bundle.
 */
async function signKeyless(cwd: string, env: Record<string, string>, extra: string[] = []) {
  const out = join(cwd, `bundle-${Math.random().toString(36).slice(2)}.json`);
  const oidcVars = ["ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"] as const;
  const saved = oidcVars.map((k) => [k, process.env[k]] as const);
  for (const k of oidcVars) process.env[k] = env[k];
  let r: Awaited<ReturnType<typeof baton>>;
  try {
    r = await baton(
      [
        "sign",
        join(cwd, "recipes/svc-1.yaml"),
        "--keyless",
        "--fulcio-url",
        env.BATON_FULCIO_URL as string,
        "--tsa-url",
        env.BATON_TSA_URL as string,
        "--out",
        out,
        ...extra,
      ],
      env,
      { timeoutMs: 120_000 },
    );
  } finally {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  expect(r.code, r.stdout + r.stderr).toBe(0);
  return JSON.parse(readFileSync(out, "utf8")) as {
    dsseEnvelope: { payload: string; signatures: unknown[] };
  };
}

describe.each(STORE_KINDS)("recipe.yml start job, keyless, on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  let server: ReturnType<typeof serve> | null = null;
  let url = "";
  const clock = new FakeClock(Date.now());

  beforeAll(async () => {
    if (skip) return;
    const pdir = join(dir, `policy-${kind}`);
    mkdirSync(pdir);
    writeFileSync(join(pdir, "trusted_root.json"), JSON.stringify(sigstore.trustedRoot));
    writeFileSync(
      join(pdir, "trust-policy.json"),
      JSON.stringify({
        version: 1,
        trusted_root: "trusted_root.json",
        manifest: {
          signers: { identities: [{ repository: GH_REPO, workflow: GH_WORKFLOW, ref: GH_REF }] },
        },
        images: { provenance: "off" },
      }),
    );
    const policy = loadTrustPolicy(join(pdir, "trust-policy.json"));
    // The CLI signs at the wall clock's time, so the engine's clock starts there.
    clock.t = Date.now();
    h = await makeHarness({ kind, admission: { mode: "enforce", policy }, clock });
    serveOn(1);
    server = serve({ fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise<void>((ok) => server?.once("listening", () => ok()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }, 60_000);

  afterAll(async () => {
    if (server) await new Promise<void>((ok) => server?.close(() => ok()));
    await h?.close();
  });

  /** The control plane as the start of recipe `n` expects it: lane-n carries model-1. */
  const serveOn = (n: number) =>
    h?.cp.seed(
      Array.from({ length: 9 }, (_, i) => ({
        id: `lane-${i + 1}`,
        model: "model-1",
        weight: i + 1 === n ? 100 : 0,
      })),
    );

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const releaseCount = async () =>
    ((await api("GET", "/v1/releases?limit=200")).body.releases as unknown[]).length;
  type Problem = { path: string; message: string; fix: string };
  const refusedChecks = (b: Record<string, unknown>) =>
    (((b.error as { problems?: Problem[] } | undefined)?.problems ?? []) as Problem[]).map(
      (p) => p.path,
    );

  it.skipIf(skip)(
    "signs with the workflow's OIDC identity: admitted, the evidence names repository + workflow ref; another repository or ref is refused (manifest_signature)",
    async () => {
      expect(workflow.jobs.start.permissions?.["id-token"]).toBe("write");
      oidc.asked.length = 0;
      oidc.identity = { repository: GH_REPO, workflow: GH_WORKFLOW, ref: GH_REF };
      const ok = await runStart(checkout(`good-${kind}`), runnerEnv(url));
      expect(ok.code, ok.out).toBe(0);
      expect(ok.out).toMatch(/Signing keylessly/);
      expect(ok.out).toContain(`signed keylessly by ${SAN}`);
      // The token endpoint was asked, for Sigstore's audience, with the runner's request token.
      expect(oidc.asked).toEqual([{ audience: "sigstore", auth: `Bearer ${REQUEST_TOKEN}` }]);
      const list = (await api("GET", "/v1/releases?limit=200")).body.releases as { id: string }[];
      expect(list).toHaveLength(1);
      const rel = (await api("GET", `/v1/releases/${list[0]?.id}`)).body as {
        admission: {
          ok: boolean;
          signer: { kind: string; san: string; issuer: string };
          checks: { check: string; outcome: string; message: string }[];
        };
        history: { kind: string; message: string }[];
      };
      expect(rel.admission.ok).toBe(true);
      expect(rel.admission.signer).toEqual({
        kind: "keyless",
        san: SAN,
        issuer: "https://token.actions.githubusercontent.com",
      });
      const sig = rel.admission.checks.find((c) => c.check === "manifest_signature");
      expect(sig?.outcome).toBe("pass");
      expect(sig?.message).toContain(SAN);
      expect(rel.history.find((e) => e.kind === "admission")?.message).toContain(SAN);

      // The same job in another repository, and on another ref: refused, nothing started.
      for (const identity of [
        { repository: "evil/models", workflow: GH_WORKFLOW, ref: GH_REF },
        { repository: GH_REPO, workflow: GH_WORKFLOW, ref: "refs/heads/dev" },
        { repository: GH_REPO, workflow: ".github/workflows/other.yml", ref: GH_REF },
      ]) {
        oidc.identity = identity;
        serveOn(2);
        const c = checkout(
          `who-${kind}-${identity.repository}-${identity.ref}-${identity.workflow}`,
          2,
        );
        const bad = await runStart(c, runnerEnv(url));
        expect(bad.code, bad.out).toBe(1);
        expect(bad.out).toMatch(/failed\s+recipes\/svc-1\.yaml: .*manifest_signature/);
        expect(bad.out).toContain(
          `https://github.com/${identity.repository}/${identity.workflow}@${identity.ref}`,
        );
        if (identity.repository !== GH_REPO) {
          // The same kind of bundle sent by hand: 422 naming the check and the fix.
          const bundle = await signKeyless(c, runnerEnv(url));
          const res = await api("POST", "/v1/releases", { recipe: recipeText(2), bundle });
          expect(res.status).toBe(422);
          expect(refusedChecks(res.body)).toEqual(["manifest_signature"]);
          expect(JSON.stringify(res.body)).toMatch(/not allow/);
        }
      }
      expect(await releaseCount()).toBe(1);
      oidc.identity = { repository: GH_REPO, workflow: GH_WORKFLOW, ref: GH_REF };
    },
    480_000,
  );

  it.skipIf(skip)(
    "refuses a replayed older keyless manifest (manifest_freshness), an expired one (manifest_expiry), a forged payload and a certificate from an untrusted CA (manifest_signature)",
    async () => {
      oidc.identity = { repository: GH_REPO, workflow: GH_WORKFLOW, ref: GH_REF };
      const before = await releaseCount();
      // Signed first, sent last: an older manifest for the model than the one admitted next.
      const old = checkout(`old-${kind}`, 3);
      const oldBundle = await signKeyless(old, runnerEnv(url));
      serveOn(4);
      const fresh = await runStart(checkout(`fresh-${kind}`, 4), runnerEnv(url));
      expect(fresh.code, fresh.out).toBe(0);
      expect(await releaseCount()).toBe(before + 1);
      serveOn(3);
      const replay = await api("POST", "/v1/releases", {
        recipe: recipeText(3),
        bundle: oldBundle,
      });
      expect(replay.status).toBe(422);
      expect(refusedChecks(replay.body)).toEqual(["manifest_freshness"]);

      // Forged: the signed payload changed after signing (another manifest digest).
      const c5 = checkout(`forged-${kind}`, 5);
      const good = await signKeyless(c5, runnerEnv(url));
      const statement = JSON.parse(Buffer.from(good.dsseEnvelope.payload, "base64").toString());
      statement.subject[0].digest.sha256 = "0".repeat(64);
      const forged = {
        ...good,
        dsseEnvelope: {
          ...good.dsseEnvelope,
          payload: Buffer.from(JSON.stringify(statement)).toString("base64"),
        },
      };
      serveOn(5);
      const f = await api("POST", "/v1/releases", { recipe: recipeText(5), bundle: forged });
      expect(f.status).toBe(422);
      expect(refusedChecks(f.body)).toEqual(["manifest_signature"]);
      expect(JSON.stringify(f.body)).toMatch(/verification failed/);

      // A certificate for the right identity from a CA the trust root does not hold.
      oidc.issuer = rogue;
      serveOn(6);
      const r = await runStart(checkout(`rogue-${kind}`, 6), runnerEnv(url, rogue));
      oidc.issuer = null;
      expect(r.code, r.out).toBe(1);
      expect(r.out).toMatch(/failed\s+recipes\/svc-1\.yaml: .*manifest_signature/);

      // Expired: signed valid for 1h, sent when the engine's clock is 2h later.
      const c7 = checkout(`expired-${kind}`, 7);
      const short = await signKeyless(c7, runnerEnv(url), ["--valid-for", "1h"]);
      clock.advance(2 * 3_600_000);
      serveOn(7);
      const e = await api("POST", "/v1/releases", { recipe: recipeText(7), bundle: short });
      expect(e.status).toBe(422);
      expect(refusedChecks(e.body)).toEqual(["manifest_expiry"]);
      expect(await releaseCount()).toBe(before + 1);
    },
    480_000,
  );

  it.skipIf(skip)(
    "without an OIDC token the variable alone does not sign: a warning, then unsigned (refused by this engine)",
    async () => {
      const env = runnerEnv(url);
      delete (env as Record<string, string | undefined>).ACTIONS_ID_TOKEN_REQUEST_URL;
      serveOn(8);
      const r = await runStart(checkout(`no-token-${kind}`, 8), env);
      expect(r.out).toMatch(/::warning::BATON_KEYLESS is true but the job has no OIDC token/);
      expect(r.code, r.out).toBe(1);
      expect(r.out).toMatch(/manifest_signature/);
    },
    180_000,
  );
});

// Image attestations through the workflow: BATON_ATTESTATIONS=github makes the start step read
// the attestations GitHub holds for each recipe's image digest (a local stand-in of the
// attestations API, serving provenance signed keylessly by the build workflow) and send them;
// the engine's policy requires provenance from that workflow.
describe.each(STORE_KINDS)(
  "recipe.yml start job, keyless with GitHub's image attestations, on %s",
  (kind) => {
    const skip = skipStore(kind);
    let h: Harness | null = null;
    let server: ReturnType<typeof serve> | null = null;
    let api: Server | null = null;
    let url = "";
    let apiUrl = "";
    const GH_TOKEN = "ghs_job_token_1";
    const BUILD = ".github/workflows/build.yml";
    /** digest -> bundles the API stand-in serves; and what it was asked. */
    const held = new Map<string, unknown[]>();
    const asked: { path: string; auth: string | undefined }[] = [];
    /**
     * Digests whose attestations are listed by reference only (no `bundle`, a `bundle_url`
     * on the stand-in's blob path serving the bundle Snappy-compressed, as GitHub does), and
     * the status each blob answers (default 200).
     */
    const byUrl = new Set<string>();
    const blobStatus = new Map<string, number>();
    const LIST = "/repos/{owner}/{repo}/attestations/{subject_digest}";

    beforeAll(async () => {
      if (skip) return;
      const pdir = join(dir, `policy-att-${kind}`);
      mkdirSync(pdir);
      writeFileSync(join(pdir, "trusted_root.json"), JSON.stringify(sigstore.trustedRoot));
      writeFileSync(
        join(pdir, "trust-policy.json"),
        JSON.stringify({
          version: 1,
          trusted_root: "trusted_root.json",
          manifest: {
            signers: { identities: [{ repository: GH_REPO, workflow: GH_WORKFLOW, ref: GH_REF }] },
          },
          images: {
            provenance: "required",
            signers: { identities: [{ repository: GH_REPO, workflow: BUILD, ref: GH_REF }] },
            builders: [GITHUB_HOSTED_BUILDER],
            source_repositories: [`https://github.com/${GH_REPO}`],
          },
        }),
      );
      const policy = loadTrustPolicy(join(pdir, "trust-policy.json"));
      h = await makeHarness({
        kind,
        admission: { mode: "enforce", policy },
        clock: new FakeClock(Date.now()),
      });
      server = serve({ fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
      await new Promise<void>((ok) => server?.once("listening", () => ok()));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      api = createServer((req, res) => {
        asked.push({ path: req.url ?? "", auth: req.headers.authorization });
        const blob = /^\/blobs\/([a-f0-9]{64})\/(\d+)\.json\.sn$/.exec(req.url ?? "");
        if (blob) {
          const [, d, n] = blob as unknown as [string, string, string];
          const bundle = held.get(d)?.[Number(n)];
          const status = blobStatus.get(d) ?? (bundle ? 200 : 404);
          if (status !== 200 || !bundle) {
            res.writeHead(status, { "content-type": "application/xml" }).end("<Error/>");
            return;
          }
          res.writeHead(200, { "content-type": "application/x-snappy" });
          res.end(compress(Buffer.from(JSON.stringify(bundle))));
          return;
        }
        const m = /^\/repos\/acme\/models\/attestations\/sha256(?::|%3A)([a-f0-9]{64})/.exec(
          req.url ?? "",
        );
        const digest = m?.[1] as string;
        const bundles = m ? held.get(digest) : undefined;
        if (!bundles) {
          res.writeHead(404, { "content-type": "application/json" }).end('{"message":"Not Found"}');
          return;
        }
        // The documented shape (@octokit/openapi): `bundle` inline, or only `bundle_url`.
        const body = {
          attestations: bundles.map((bundle, i) =>
            byUrl.has(digest)
              ? {
                  repository_id: 1,
                  bundle_url: `${apiUrl}/blobs/${digest}/${i}.json.sn`,
                  initiator: "actions",
                }
              : { bundle, repository_id: 1 },
          ),
        };
        expect(responseProblems("get", LIST, 200, body)).toEqual([]);
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      });
      await new Promise<void>((ok) => api?.listen(0, "127.0.0.1", ok));
      apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    }, 60_000);

    afterAll(async () => {
      if (api) await new Promise<void>((ok) => api?.close(() => ok()));
      if (server) await new Promise<void>((ok) => server?.close(() => ok()));
      await h?.close();
    });

    const serveOn = (n: number) =>
      h?.cp.seed(
        Array.from({ length: 9 }, (_, i) => ({
          id: `lane-${i + 1}`,
          model: "model-1",
          weight: i + 1 === n ? 100 : 0,
        })),
      );

    it.skipIf(skip)(
      "sends the provenance GitHub holds for the image: admitted with image_provenance passing; an image GitHub has none for is refused (image_provenance)",
      async () => {
        oidc.identity = { repository: GH_REPO, workflow: GH_WORKFLOW, ref: GH_REF };
        const digest = (n: number) => n.toString(16).padStart(64, "0");
        const image = (n: number) => `ghcr.io/acme/summarizer@sha256:${digest(n)}`;
        held.set(digest(1), [
          await signStatement(
            provenanceStatement(image(1), {
              builder: GITHUB_HOSTED_BUILDER,
              repository: `https://github.com/${GH_REPO}`,
            }),
            {
              fulcioURL: sigstore.url,
              tsaServerURL: sigstore.url,
              tlogUpload: false,
              identityToken: sigstore.githubToken({
                repository: GH_REPO,
                workflow: BUILD,
                ref: GH_REF,
              }),
            },
          ),
        ]);
        const env = {
          ...runnerEnv(url),
          BATON_ATTESTATIONS: "github",
          GITHUB_REPOSITORY: GH_REPO,
          GITHUB_API_URL: apiUrl,
          GITHUB_TOKEN: GH_TOKEN,
        };
        serveOn(1);
        const ok = await runStart(checkout(`att-good-${kind}`, 1), env);
        expect(ok.code, ok.out).toBe(0);
        expect(ok.out).toContain(`1 attestation(s) of the image from GitHub (${GH_REPO})`);
        expect(asked).toEqual([
          expect.objectContaining({
            path: expect.stringMatching(
              new RegExp(`^/repos/acme/models/attestations/sha256(:|%3A)${digest(1)}`),
            ),
            auth: `token ${GH_TOKEN}`,
          }),
        ]);
        const res = await fetch(`${url}/v1/releases?limit=200`, {
          headers: { authorization: `Bearer ${OPERATOR}` },
        });
        const [rel] = ((await res.json()) as { releases: { id: string }[] }).releases;
        const full = (await (
          await fetch(`${url}/v1/releases/${rel?.id}`, {
            headers: { authorization: `Bearer ${OPERATOR}` },
          })
        ).json()) as {
          admission: { checks: { check: string; outcome: string; message: string }[] };
        };
        const prov = full.admission.checks.find((c) => c.check === "image_provenance");
        expect(prov?.outcome).toBe("pass");
        expect(prov?.message).toContain(`https://github.com/${GH_REPO}/${BUILD}@${GH_REF}`);

        // GitHub holds nothing for this image: the start is refused naming image_provenance.
        serveOn(2);
        const none = await runStart(checkout(`att-none-${kind}`, 2), env);
        expect(none.code, none.out).toBe(1);
        expect(none.out).toMatch(/failed\s+recipes\/svc-1\.yaml: .*image_provenance/);
      },
      480_000,
    );

    it.skipIf(skip)(
      "attestations listed only by bundle_url are fetched (Snappy, without the token) and sent; a bundle_url that fails refuses the start naming the attestation",
      async () => {
        oidc.identity = { repository: GH_REPO, workflow: GH_WORKFLOW, ref: GH_REF };
        const digest = (n: number) => n.toString(16).padStart(64, "0");
        const image = (n: number) => `ghcr.io/acme/summarizer@sha256:${digest(n)}`;
        const provenance = async (n: number) =>
          signStatement(
            provenanceStatement(image(n), {
              builder: GITHUB_HOSTED_BUILDER,
              repository: `https://github.com/${GH_REPO}`,
            }),
            {
              fulcioURL: sigstore.url,
              tsaServerURL: sigstore.url,
              tlogUpload: false,
              identityToken: sigstore.githubToken({
                repository: GH_REPO,
                workflow: BUILD,
                ref: GH_REF,
              }),
            },
          );
        held.set(digest(3), [await provenance(3)]);
        byUrl.add(digest(3));
        const env = {
          ...runnerEnv(url),
          BATON_ATTESTATIONS: "github",
          GITHUB_REPOSITORY: GH_REPO,
          GITHUB_API_URL: apiUrl,
          GITHUB_TOKEN: GH_TOKEN,
        };
        asked.length = 0;
        serveOn(3);
        const ok = await runStart(checkout(`att-url-${kind}`, 3), env);
        expect(ok.code, ok.out).toBe(0);
        expect(ok.out).toContain(
          `1 attestation(s) of the image from GitHub (${GH_REPO}) (1 fetched from bundle_url)`,
        );
        // The list with the token; the blob without it (a pre-signed URL on another host).
        expect(asked).toEqual([
          expect.objectContaining({
            path: expect.stringMatching(/^\/repos\/acme\/models\/attestations\//),
            auth: `token ${GH_TOKEN}`,
          }),
          { path: `/blobs/${digest(3)}/0.json.sn`, auth: undefined },
        ]);
        const res = await fetch(`${url}/v1/releases?limit=200`, {
          headers: { authorization: `Bearer ${OPERATOR}` },
        });
        const [rel] = ((await res.json()) as { releases: { id: string }[] }).releases;
        const full = (await (
          await fetch(`${url}/v1/releases/${rel?.id}`, {
            headers: { authorization: `Bearer ${OPERATOR}` },
          })
        ).json()) as {
          manifest: { image: string };
          admission: { checks: { check: string; outcome: string; message: string }[] };
        };
        expect(full.manifest.image).toBe(image(3));
        const prov = full.admission.checks.find((c) => c.check === "image_provenance");
        expect(prov?.outcome).toBe("pass");
        expect(prov?.message).toContain(`https://github.com/${GH_REPO}/${BUILD}@${GH_REF}`);

        // The blob store refuses (an expired link): the start fails naming the attestation.
        held.set(digest(4), [await provenance(4)]);
        byUrl.add(digest(4));
        blobStatus.set(digest(4), 403);
        serveOn(4);
        const bad = await runStart(checkout(`att-url-bad-${kind}`, 4), env);
        expect(bad.code, bad.out).toBe(1);
        expect(bad.out).toMatch(
          new RegExp(
            `failed\\s+recipes/svc-1\\.yaml: .*cannot fetch the bundle of attestation 1 of 1 \\(repository_id 1\\) of sha256:${digest(4).slice(0, 12)}… in ${GH_REPO} from its bundle_url at http://127\\.0\\.0\\.1:\\d+/blobs/${digest(4)}/0\\.json\\.sn: HTTP 403`,
          ),
        );
      },
      480_000,
    );
  },
);
