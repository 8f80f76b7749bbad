/**
 * The real runner against the Workers entry on the real runtime: the bundled release-step
 * action (`node actions/release-step/dist/index.js`, then its post step, with a runner's
 * INPUT_* and GITHUB_* environment) answers every dispatch of a release served by workerd
 * (miniflare 3) on Postgres, authenticating each preflight and callback with both credentials
 * (`BATON_RUNNER_CREDENTIAL=hmac+oidc`): the HMAC signature and a GitHub OIDC token the action
 * asks for through `@actions/core` getIDToken from a loopback token service, which the worker
 * verifies with jose against a loopback JWKS. The release ends `succeeded`, driven only by
 * the action's requests and Cron Trigger events; the control plane holds the last wave's plan.
 *
 * The action reaches the worker through a loopback proxy (its URL is the engine's public URL,
 * so callback URLs point at it), which hands each request to workerd with `dispatchFetch`.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  OIDC_REPOSITORY,
  OIDC_REQUEST_TOKEN,
  OIDC_WORKFLOW_REF,
  type OidcIssuer,
  startOidcIssuer,
} from "../support/oidc-issuer.ts";
import { runAction } from "../support/run-action.ts";
import {
  MODEL,
  type ServerlessWorld,
  serverlessRecipe,
  startServerlessWorld,
  startWorkerd,
  type Workerd,
} from "../support/serverless-world.ts";
import { generateKey, sharedTempDir } from "../support/sshd.ts";

const PG = process.env.BATON_TEST_DATABASE_URL;

/** A tool that reports success without touching a machine (the runner side is under test). */
const TOOL = `#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in --result-dir) d="$2" ;; esac; shift 2; done
echo '[{"name":"health","status":"passed","exit_code":0}]' > "$d/checks.json"
echo "tool ran for $BATON_STEP_RUN_ID" > "$d/log"
echo succeeded > "$d/status"
echo pass > "$d/overall"
`;

describe.skipIf(!PG && process.env.CI !== "true")("the release-step action against workerd", () => {
  let dir: string;
  let proxy: Server;
  let publicUrl: string;
  let issuer: OidcIssuer;
  let world: ServerlessWorld;
  let workerd: Workerd;
  let sshKey: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "baton-worker-action-"));
    const out = join(dir, "worker.mjs");
    const built = spawnSync(process.execPath, ["scripts/build-worker.mjs", out], {
      encoding: "utf8",
    });
    expect(built.status, built.stderr).toBe(0);
    // The proxy first: its URL is the engine's public URL (callback URLs are built from it).
    proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(req.headers)) {
          if (typeof v === "string" && k !== "host" && k !== "connection") headers[k] = v;
        }
        const body = Buffer.concat(chunks).toString("utf8");
        workerd
          .send(req.method === "POST" ? "POST" : "GET", req.url ?? "/", body || undefined, headers)
          .then((r) => {
            res.writeHead(r.status, { "content-type": "application/json" });
            res.end(r.body);
          })
          .catch((err) => {
            res.writeHead(502).end(String(err));
          });
      });
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
    publicUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    issuer = await startOidcIssuer();
    world = await startServerlessWorld(publicUrl);
    workerd = await startWorkerd(
      readFileSync(out, "utf8"),
      {
        ...world.env,
        BATON_RUNNER_CREDENTIAL: "hmac+oidc",
        BATON_OIDC_ISSUER: issuer.url,
        BATON_OIDC_JWKS_URL: issuer.jwksUrl,
        BATON_OIDC_REPOSITORY: OIDC_REPOSITORY,
        BATON_OIDC_WORKFLOW_REF: OIDC_WORKFLOW_REF,
      },
      publicUrl,
    );
    const keyDir = sharedTempDir("baton-worker-key-");
    sshKey = readFileSync(generateKey(keyDir, "client")[0], "utf8");
    rmSync(keyDir, { recursive: true, force: true });
  }, 120_000);

  afterAll(async () => {
    await workerd?.dispose();
    await world?.close();
    await issuer?.close();
    await new Promise((r) => proxy?.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it("every runner step run by the bundled action with HMAC + OIDC; the release succeeds", async () => {
    const auth = {
      authorization: `Bearer ${world.operatorToken}`,
      "content-type": "application/json",
    };
    const created = await workerd.send(
      "POST",
      "/v1/releases",
      JSON.stringify(serverlessRecipe()),
      auth,
    );
    expect(created.status, created.body).toBe(201);
    const id = (JSON.parse(created.body) as { id: string }).id;
    const runnerTemp = sharedTempDir("baton-worker-runner-");
    const done = new Set<string>();
    const outcomes: { id: string; status: string; code: number | null }[] = [];
    let state = "";
    const terminal = new Set([
      "succeeded",
      "rolled_back",
      "aborted",
      "abandoned",
      "needs_operator",
    ]);
    try {
      for (let round = 0; round < 60 && !terminal.has(state); round++) {
        for (const d of world.github.accepted) {
          const p = d.client_payload as unknown as DispatchPayload;
          if (p.release.id !== id || done.has(p.step_run_id)) continue;
          done.add(p.step_run_id);
          const ws = join(runnerTemp, `ws-${done.size}`);
          mkdirSync(join(ws, "tools"), { recursive: true });
          writeFileSync(join(ws, "tools/tool.sh"), TOOL, { mode: 0o755 });
          writeFileSync(join(ws, "allowlist.json"), JSON.stringify({ [p.tool]: "tools/tool.sh" }));
          const runId = String(70_000 + done.size);
          issuer.tokenClaims = { run_id: runId, run_attempt: 1 };
          const r = await runAction({
            runnerTemp,
            eventName: "repository_dispatch",
            event: { action: "release-step", client_payload: p },
            runId,
            // The recipe's tool_revision: the engine declines a run of other tools.
            sha: "34f9bae4c170320dced1664d4321610c952e4b04",
            workspace: ws,
            inputs: {
              "engine-url": publicUrl,
              "callback-secret": world.secret,
              "oidc-audience": publicUrl,
              "ssh-key": sshKey,
              allowlist: "allowlist.json",
            },
            env: {
              ACTIONS_ID_TOKEN_REQUEST_URL: issuer.requestUrl,
              ACTIONS_ID_TOKEN_REQUEST_TOKEN: OIDC_REQUEST_TOKEN,
              BATON_HTTP_BASE_DELAY_MS: "50",
            },
          });
          outcomes.push({ id: p.step_run_id, status: r.outputs.status ?? "", code: r.main.code });
          if (r.outputs.status !== "succeeded") console.log(r.main.stdout, r.main.stderr);
          expect(r.main.code, `${p.step_run_id}\n${r.main.stdout}\n${r.main.stderr}`).toBe(0);
        }
        await workerd.tick();
        const rec = await workerd.send("GET", `/v1/releases/${id}`, undefined, auth);
        state = (JSON.parse(rec.body) as { state: string }).state;
      }
    } finally {
      rmSync(runnerTemp, { recursive: true, force: true });
    }
    const last = await workerd.send("GET", `/v1/releases/${id}`, undefined, auth);
    expect(state, `${JSON.stringify(outcomes)}\n${last.body.slice(0, 3000)}`).toBe("succeeded");
    expect(outcomes.length).toBeGreaterThan(0);
    expect(outcomes.every((o) => o.status === "succeeded")).toBe(true);
    // Each preflight and callback carried its own token (the worker spends each jti once).
    expect(issuer.minted.length).toBeGreaterThanOrEqual(2 * outcomes.length);
    expect(new Set(issuer.minted).size).toBe(issuer.minted.length);
    // The environment, not only the engine's record: the control plane serves the last plan.
    expect(world.cp.core.lanes(MODEL).map((l) => [l.id, l.weight, l.excluded])).toEqual([
      ["sl-0", 50, false],
      ["sl-1", 50, false],
    ]);
    // The attempts the worker recorded are the action's runs.
    const rec = await workerd.send("GET", `/v1/releases/${id}`, undefined, auth);
    const runs = (
      JSON.parse(rec.body) as { step_runs: { attempts?: { run_id: string }[] }[] }
    ).step_runs.flatMap((s) => (s.attempts ?? []).map((a) => a.run_id));
    expect(runs.length).toBe(outcomes.length);
    expect(runs.every((r) => Number(r) > 70_000)).toBe(true);
    // The worker enforces the token: the HMAC signature alone is refused with the one 401.
    const first = outcomes[0]!.id;
    const cb = JSON.stringify({
      step_run_id: first,
      run_id: "70001",
      run_attempt: 1,
      status: "succeeded",
      overall: "pass",
      checks: [],
      log: "",
    });
    const hmacOnly = await workerd.send("POST", `/v1/releases/step-runs/${first}/callback`, cb, {
      "content-type": "application/json",
      ...signBody(world.secret, cb),
    });
    expect(hmacOnly.status).toBe(401);
    expect(hmacOnly.body).toContain("OIDC token");
  }, 300_000);
});
