/**
 * The GitHub OIDC runner credential on both stores: a loopback issuer (keys generated here,
 * JWKS on 127.0.0.1) and the engine in `oidc` mode. A good token preflights and calls back;
 * every bad one (expired, wrong audience, issuer, repository, repository id, workflow ref,
 * event, run, attempt, replayed jti, unknown key, unsigned, HMAC-signed, another step run's
 * run) is 401 with one identical body and changes nothing on the release; an unreachable key
 * set is 503 and changes nothing (fail closed).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineConfig } from "../../engine/src/config.ts";
import type { RunnerOidcSettings } from "../../engine/src/http/runner-oidc.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  OIDC_REPOSITORY,
  OIDC_REPOSITORY_ID,
  OIDC_WORKFLOW_REF,
  type OidcIssuer,
  startOidcIssuer,
} from "../support/oidc-issuer.ts";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  firstDispatch,
  type Harness,
  makeHarness,
  preflightBody,
  preflightUrl,
  SECRET,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const AUDIENCE = "https://baton.example.org";

let issuer: OidcIssuer;
beforeAll(async () => {
  issuer = await startOidcIssuer();
});
afterAll(async () => {
  await issuer?.close();
});

function oidcSettings(over: Partial<RunnerOidcSettings> = {}): RunnerOidcSettings {
  return {
    issuer: issuer.url,
    audience: AUDIENCE,
    jwksUrl: issuer.jwksUrl,
    repository: OIDC_REPOSITORY,
    repositoryId: OIDC_REPOSITORY_ID,
    workflowRef: OIDC_WORKFLOW_REF,
    eventName: "repository_dispatch",
    clockToleranceSec: 60,
    maxTokenAgeSec: 900,
    ...over,
  };
}

function oidcConfig(
  mode: "oidc" | "hmac+oidc",
  over: Partial<RunnerOidcSettings> = {},
): Partial<EngineConfig> {
  return { runnerCredential: { mode, oidc: oidcSettings(over) } };
}

/** POSTs `body` with a bearer token (and HMAC headers when `hmac`). */
function post(h: Harness, url: string, body: string, token: string | null, hmac = false) {
  return Promise.resolve(
    h.engine.app.request(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(hmac ? signBody(SECRET, body, h.clock.now()) : {}),
      },
      body,
    }),
  );
}

/** What must not change when a credential is refused: the release document and attempts. */
async function snapshot(h: Harness, id: string) {
  const r = await h.store.getRelease(id);
  return {
    state: r?.state,
    resource_version: r?.resource_version,
    attempts: r?.step_runs.map((s) => s.attempts.length),
    results: (await h.store.listAttemptResults(id)).length,
  };
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");

for (const kind of STORE_KINDS) {
  describe.skipIf(skipStore(kind))(`OIDC runner credential (${kind})`, () => {
    it("a good token preflights and calls back; every bad one is 401 with one body and changes nothing", async () => {
      const h = await makeHarness({ kind, config: oidcConfig("oidc") });
      try {
        const id = await createRelease(h);
        const p = await firstDispatch(h);
        const sr = p.step_run_id;
        const run = { run_id: "5001", run_attempt: 1 };
        const now = h.clock.now();
        const mint = (over: Record<string, unknown> = {}, o: { foreignKey?: boolean } = {}) =>
          issuer.mint({ audience: AUDIENCE, nowMs: now, ...run, over, ...o });
        const pre = preflightBody(p, run);
        const before = await snapshot(h, id);

        const alg = { alg: "none", typ: "JWT" };
        const claims = JSON.parse(
          Buffer.from((await mint()).split(".")[1]!, "base64url").toString(),
        ) as Record<string, unknown>;
        const bad: Record<string, string | null> = {
          "no token": null,
          "not a JWT": "not-a-token",
          expired: await issuer.mint({
            audience: AUDIENCE,
            nowMs: now - 900_000,
            ...run,
            over: { exp: Math.floor(now / 1000) - 120 },
          }),
          "issued in the future": await issuer.mint({
            audience: AUDIENCE,
            nowMs: now + 600_000,
            ...run,
          }),
          "wrong audience": await mint({ aud: "https://other.example.org" }),
          "wrong issuer": await mint({ iss: "https://token.actions.githubusercontent.com" }),
          "wrong repository": await mint({ repository: "evil/models" }),
          "wrong repository id": await mint({ repository_id: "987" }),
          "wrong workflow ref": await mint({
            workflow_ref: "acme/models/.github/workflows/release-step.yml@refs/heads/feature",
          }),
          "wrong event": await mint({ event_name: "workflow_dispatch" }),
          "wrong run": await mint({ run_id: "5002" }),
          "wrong attempt": await mint({ run_attempt: "2" }),
          "no jti": await mint({ jti: undefined }),
          "key not in the JWKS": await mint({}, { foreignKey: true }),
          "unsigned (alg none)": `${b64(alg)}.${b64(claims)}.`,
          "signature of another token": `${(await mint({ run_id: "5002" })).split(".").slice(0, 2).join(".")}.${(await mint()).split(".")[2]}`,
        };
        const texts = new Set<string>();
        for (const [why, token] of Object.entries(bad)) {
          const res = await post(h, preflightUrl(sr), pre, token);
          expect(res.status, why).toBe(401);
          texts.add(await res.text());
        }
        // HMAC alone is not a credential in `oidc` mode.
        const hmacOnly = await post(h, preflightUrl(sr), pre, null, true);
        expect(hmacOnly.status).toBe(401);
        texts.add(await hmacOnly.text());
        expect(texts.size).toBe(1);
        expect(JSON.parse([...texts][0]!)).toMatchObject({ error: { code: "unauthorized" } });
        expect(await snapshot(h, id)).toEqual(before);
        expect(await h.store.boundStepRun(`${OIDC_REPOSITORY}#5001`)).toBeNull();

        // The good token: preflight binds run 5001 to this step run.
        const good = await mint();
        const ok = await post(h, preflightUrl(sr), pre, good);
        expect(ok.status, await ok.clone().text()).toBe(200);
        expect(await h.store.boundStepRun(`${OIDC_REPOSITORY}#5001`)).toBe(sr);
        const afterPreflight = await snapshot(h, id);

        // The same token again (replayed jti): refused, nothing changes.
        const cb = callbackBody(sr, run);
        const replay = await post(h, callbackUrl(sr), cb, good);
        expect(replay.status).toBe(401);
        expect(await replay.text()).toBe([...texts][0]);
        // A token of another run of the workflow at this step run's callback.
        const otherRun = await issuer.mint({ audience: AUDIENCE, nowMs: now, run_id: "5003" });
        const other = await post(
          h,
          callbackUrl(sr),
          callbackBody(sr, { run_id: "5003", run_attempt: 1 }),
          otherRun,
        );
        expect(other.status).toBe(401);
        expect(await other.text()).toBe([...texts][0]);
        expect(await snapshot(h, id)).toEqual(afterPreflight);

        // A fresh token of the bound run calls back.
        const done = await post(h, callbackUrl(sr), cb, await mint());
        expect(done.status, await done.clone().text()).toBe(200);
        const rec = await h.store.getRelease(id);
        expect(rec?.step_runs.find((s) => s.id === sr)?.attempts[0]?.run_id).toBe("5001");

        // Run 5001 is bound to `sr`: its token at the next step run's URL is refused.
        let next: DispatchPayload | undefined;
        for (let i = 0; i < 50 && !next; i++) {
          await h.engine.tick();
          next = h.dispatcher.accepted.find((d) => d.step_run_id !== sr);
        }
        expect(next).toBeDefined();
        const beforeNext = await snapshot(h, id);
        const stolen = await post(
          h,
          preflightUrl(next!.step_run_id),
          preflightBody(next!, run),
          await mint(),
        );
        expect(stolen.status).toBe(401);
        expect(await stolen.text()).toBe([...texts][0]);
        const stolenCb = await post(
          h,
          callbackUrl(next!.step_run_id),
          callbackBody(next!.step_run_id, run),
          await mint(),
        );
        expect(stolenCb.status).toBe(401);
        expect(await snapshot(h, id)).toEqual(beforeNext);
        // Each refusal is recorded with its precise reason (for the operator, not the caller).
        const history = await h.store.getHistory(id);
        const reasons = history
          .filter((x) => x.outcome === "refused")
          .map((x) => x.message)
          .join("\n");
        expect(reasons).toMatch(/bad credential \(oidc: /);
      } finally {
        await h.close();
      }
    });

    it("an unreachable JWKS fails closed: 503 with Retry-After, nothing changes", async () => {
      const h = await makeHarness({
        kind,
        config: oidcConfig("oidc", { jwksUrl: issuer.downJwksUrl }),
      });
      try {
        const id = await createRelease(h);
        const p = await firstDispatch(h);
        const run = { run_id: "6001", run_attempt: 1 };
        const before = await snapshot(h, id);
        const token = await issuer.mint({ audience: AUDIENCE, nowMs: h.clock.now(), ...run });
        const res = await post(h, preflightUrl(p.step_run_id), preflightBody(p, run), token);
        expect(res.status).toBe(503);
        expect(res.headers.get("retry-after")).toBeTruthy();
        expect(await snapshot(h, id)).toEqual(before);
        expect(await h.store.boundStepRun(`${OIDC_REPOSITORY}#6001`)).toBeNull();
      } finally {
        await h.close();
      }
    });

    it("hmac+oidc needs both: a good token without the HMAC signature is 401, with it 200", async () => {
      const h = await makeHarness({ kind, config: oidcConfig("hmac+oidc") });
      try {
        await createRelease(h);
        const p = await firstDispatch(h);
        const run = { run_id: "7001", run_attempt: 1 };
        const body = preflightBody(p, run);
        const mint = () => issuer.mint({ audience: AUDIENCE, nowMs: h.clock.now(), ...run });
        expect((await post(h, preflightUrl(p.step_run_id), body, await mint())).status).toBe(401);
        expect((await post(h, preflightUrl(p.step_run_id), body, null, true)).status).toBe(401);
        const ok = await post(h, preflightUrl(p.step_run_id), body, await mint(), true);
        expect(ok.status, await ok.clone().text()).toBe(200);
      } finally {
        await h.close();
      }
    });
  });
}
