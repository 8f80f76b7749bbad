/**
 * DBOS Transact's side of `bench:peer` (protocol: peer-side.ts): the same release written as
 * a TypeScript engineer would with DBOS, on the same Postgres server (a database of its own,
 * which DBOS migrates), with DBOS's shipped defaults (`DBOS.setConfig` names only the
 * application and the system database URL).
 *
 * - One workflow per release (workflow id = release id), started by `POST /v1/releases`
 *   after the same contract check and compile Baton runs (`checkAndCompile`).
 * - One DBOS step per step of the manifest, in order. A control-plane step is one
 *   `DBOS.runStep` that writes to the same in-memory control plane Baton uses and reads the
 *   write back. A runner step is one `DBOS.runStep` that dispatches (the same in-memory
 *   GitHub), then `DBOS.recv` of the runner's preflight and `DBOS.recv` of its callback.
 * - The runners' preflight and callback arrive over the same routes and in the same bodies
 *   as Baton's, through a Hono app in process: HMAC over the raw body (the same
 *   `verifyBody`), parsed with the same schemas, then `DBOS.send` to the release's workflow;
 *   200 once the message is stored. The preflight answer decides nothing else (Baton's
 *   preflight binds and fences attempts; this one only records the runner's arrival).
 */
import { DBOS } from "@dbos-inc/dbos-sdk";
import { Hono } from "hono";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import type { Manifest } from "../../engine/src/domain/types.ts";
import type { WriteContext } from "../../engine/src/ports/control-plane.ts";
import { canonicalJson } from "../../engine/src/protocol/canonical-json.ts";
import {
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  verifyBody,
} from "../../engine/src/protocol/credential.ts";
import { stepRunId } from "../../engine/src/protocol/ids.ts";
import { CallbackBody, PreflightRequest } from "../../engine/src/protocol/messages.ts";
import { manifestDigest } from "../../engine/src/recipes/digest.ts";
import { serveSide } from "./peer-side.ts";
import { benchRecipe, OPERATOR, PerReleaseControlPlane, SECRET } from "./release-world.ts";

/** How long a runner step waits for its preflight, then its callback (s). */
const RECV_TIMEOUT_S = 300;

await serveSide(async (outcomes) => {
  const url = process.env.PEER_DATABASE_URL;
  if (!url) throw new Error("[bench] PEER_DATABASE_URL is not set");
  const dispatcher = new MemoryDispatcher();
  const controlPlane = new PerReleaseControlPlane();

  const release = DBOS.registerWorkflow(
    async (id: string, manifest: Manifest, digest: string): Promise<string> => {
      const n = Number(id.slice(1));
      for (const step of manifest.steps) {
        const a = step.forward;
        const key = `${id}:${step.index}:fwd:${a.target}`;
        if (a.kind === "runner") {
          const sr = stepRunId(n, step.index, false);
          await DBOS.runStep(
            async () => {
              const r = await dispatcher.dispatch({
                v: 1,
                step_run_id: sr,
                tool: a.tool,
                args: a.args,
                callback_url: "http://127.0.0.1:8787/v1/releases/step-runs",
                release: {
                  id,
                  generation: 1,
                  manifest_digest: digest,
                  dispatch: 1,
                  operation_key: key,
                },
              });
              if (!r.ok) throw new Error(`[peer] dispatch of ${sr} refused: ${r.message}`);
            },
            { name: a.name },
          );
          const pre = await DBOS.recv<PreflightRequest>(`preflight:${sr}`, RECV_TIMEOUT_S);
          if (!pre) throw new Error(`[peer] ${sr}: no preflight in ${RECV_TIMEOUT_S} s`);
          const cb = await DBOS.recv<CallbackBody>(`callback:${sr}`, RECV_TIMEOUT_S);
          if (cb?.overall !== "pass") throw new Error(`[peer] ${sr} did not pass`);
        } else {
          const write: WriteContext = {
            operation_key: key,
            release_id: id,
            generation: 1,
            model: manifest.model,
          };
          await DBOS.runStep(
            async () => {
              const r = await controlPlane.apply(a.request, write);
              if (r.outcome !== "ok") throw new Error(`[peer] ${key}: ${r.outcome}`);
              if (a.request.op === "assert_traffic") return;
              const seen = await controlPlane.observe(a.request, write);
              if (!seen.ok || !seen.matches) throw new Error(`[peer] ${key}: read-back differs`);
            },
            { name: a.name },
          );
        }
      }
      return "succeeded";
    },
    { name: "release" },
  );

  DBOS.setConfig({ name: "baton-peer", systemDatabaseUrl: url });
  await DBOS.launch();

  let seq = 0;
  const app = new Hono();
  app.post("/v1/releases", async (c) => {
    if (c.req.header("authorization") !== `Bearer ${OPERATOR}`) return c.json({}, 401);
    const checked = checkAndCompile(await c.req.json());
    if (!checked.ok) return c.json({ problems: checked.problems }, 422);
    const id = `r${++seq}`;
    const digest = manifestDigest(canonicalJson(checked.manifest));
    const handle = await DBOS.startWorkflow(release, { workflowID: id })(
      id,
      checked.manifest,
      digest,
    );
    handle.getResult().then(
      () => outcomes.succeeded(id),
      (e: unknown) => outcomes.failed(e as Error),
    );
    return c.json({ id }, 201);
  });
  const runnerRoute = (what: "preflight" | "callback") =>
    app.post(`/v1/releases/step-runs/:id/${what}`, async (c) => {
      const raw = new Uint8Array(await c.req.arrayBuffer());
      const v = verifyBody(
        [SECRET],
        raw,
        c.req.header(SIGNATURE_HEADER),
        c.req.header(TIMESTAMP_HEADER),
      );
      if (!v.ok) return c.json({ error: "bad credential" }, 401);
      const schema = what === "preflight" ? PreflightRequest : CallbackBody;
      const parsed = schema.safeParse(JSON.parse(new TextDecoder().decode(raw)));
      if (!parsed.success) return c.json({ error: parsed.error.message }, 400);
      const sr = c.req.param("id");
      const wf = `r${sr.split("_")[1]}`;
      await DBOS.send(wf, parsed.data, `${what}:${sr}`);
      return c.json(
        what === "preflight" ? { proceed: true, step_run_id: sr, attempt: 1, release_id: wf } : {},
        200,
      );
    });
  runnerRoute("preflight");
  runnerRoute("callback");

  const compiled = checkAndCompile(benchRecipe());
  if (!compiled.ok) throw new Error("[bench] the benchmark recipe fails its contract check");
  return {
    steps: compiled.manifest.steps.length,
    app,
    dispatcher,
    async close() {
      await DBOS.shutdown();
    },
  };
});
