/**
 * Everything an action test needs: a real sshd whose sessions see the stand-in container CLI,
 * the engine stand-in, a RUNNER_TEMP, and builders for payloads, events and inputs.
 */

import { chmodSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { payloadDigestOf } from "../../engine/src/protocol/payload-digest.ts";
import { type EngineStandin, startEngineStandin } from "./engine-standin.ts";
import { type ActionRun, type RunActionOptions, runAction, TEST_ALLOWLIST } from "./run-action.ts";
import { type Sshd, sharedTempDir, startSshd } from "./sshd.ts";
import { DEPLOY_SH, image, makeStandinTarget, type StandinTarget } from "./standin-target.ts";

export interface Fixture {
  sshd: Sshd;
  engine: EngineStandin;
  target: StandinTarget;
  runnerTemp: string;
  /** A new step run known to the engine, with its payload (unique release, lane and port). */
  stepRun(opts?: { tool?: string; previous?: boolean }): Promise<{
    payload: DispatchPayload;
    lane: string;
    healthUrl: string;
    img: string;
    prev: string;
  }>;
  /** Runs the bundled action for `payload` as repository_dispatch release-step. */
  run(payload: unknown, o?: Partial<RunActionOptions>): Promise<ActionRun>;
  /** Names of leftover key directories under RUNNER_TEMP (must be empty after every job). */
  keyDirs(): string[];
  /** A throwaway workspace with an allowlist mapping `attach-queue-lane` to `script` (sh). */
  workspaceWithTool(script: string | null, mode?: number): string;
  close(): Promise<void>;
}

let counter = 0;

export const ACTION_ENV = (deployScript = DEPLOY_SH): Record<string, string> => ({
  BATON_DEPLOY_SCRIPT: deployScript,
  // Generous deadlines: the suite shares two cores with the rest of CI.
  BATON_HEALTH_TIMEOUT_S: "10",
  BATON_CONNECT_TIMEOUT_MS: "10000",
  BATON_HTTP_BASE_DELAY_MS: "50",
  BATON_HTTP_ATTEMPTS: "4",
});

/** Starts sshd + engine stand-in. */
export async function startFixture(): Promise<Fixture> {
  const target = makeStandinTarget();
  const sshd = await startSshd(target.env);
  const engine = await startEngineStandin();
  const runnerTemp = sharedTempDir("baton-runner-");
  const workspaces: string[] = [];
  return {
    sshd,
    engine,
    target,
    runnerTemp,
    async stepRun(opts = {}) {
      counter++;
      const n = 100 + counter + Math.floor(Math.random() * 1e6) * 1000;
      const id = `sr_${n}_3_f`;
      const lane = `lane-${n}`;
      const healthUrl = await target.healthUrl();
      const hex = n.toString(16);
      const img = image(hex.padStart(64, "a"));
      const prev = image(hex.padStart(64, "b"));
      const payload: DispatchPayload = {
        v: 1,
        step_run_id: id,
        tool: opts.tool ?? "attach-queue-lane",
        args: {
          lane: {
            id: lane,
            host: "127.0.0.1",
            port: sshd.port,
            user: sshd.user,
            host_key: sshd.hostKeyPin,
            queue: "q-main",
            health_url: healthUrl,
          },
          image: img,
          previous_image: prev,
        },
        callback_url: `${engine.url}/v1/releases/step-runs/${id}/callback`,
        release: {
          id: `r${n}`,
          generation: 1,
          manifest_digest: "c".repeat(64),
          dispatch: 1,
          operation_key: `r${n}:3:fwd:${lane}`,
        },
      };
      engine.addStepRun({
        id,
        release_id: `r${n}`,
        generation: 1,
        manifest_digest: "c".repeat(64),
        dispatch: 1,
        payload_digest: payloadDigestOf(payload),
      });
      return { payload, lane, healthUrl, img, prev };
    },
    run(payload, o = {}) {
      // The test-only noop tool is named only by the test allowlist.
      const noop = (payload as { tool?: unknown } | null)?.tool === "noop";
      const inputs = o.inputs ?? {
        "engine-url": engine.url,
        "callback-secret": engine.secret,
        "ssh-key": sshd.clientKey,
      };
      return runAction({
        runnerTemp,
        eventName: "repository_dispatch",
        event: { action: "release-step", client_payload: payload },
        ...o,
        inputs:
          noop && inputs.allowlist === undefined
            ? { ...inputs, allowlist: TEST_ALLOWLIST }
            : inputs,
        env: { ...ACTION_ENV(), ...o.env },
      });
    },
    keyDirs: () => readdirSync(runnerTemp).filter((f) => f.startsWith("baton-key-")),
    workspaceWithTool(script, mode = 0o755) {
      const ws = sharedTempDir("baton-ws-");
      workspaces.push(ws);
      mkdirSync(join(ws, "tools"));
      writeFileSync(
        join(ws, "allowlist.json"),
        JSON.stringify({ "attach-queue-lane": "tools/tool.sh" }),
      );
      if (script !== null) {
        writeFileSync(join(ws, "tools/tool.sh"), script);
        chmodSync(join(ws, "tools/tool.sh"), mode);
      }
      return ws;
    },
    async close() {
      await sshd.stop();
      await engine.close();
      target.cleanup();
      for (const w of workspaces) rmSync(w, { recursive: true, force: true });
      if (existsSync(runnerTemp)) rmSync(runnerTemp, { recursive: true, force: true });
    },
  };
}

/** The callbacks the engine stand-in received for a step run (parsed), in order. */
export function callbacksOf(
  engine: EngineStandin,
  id: string,
): { status: number; body: Record<string, unknown> }[] {
  return engine.received
    .filter((r) => r.route === "callback" && r.stepRunId === id)
    .map((r) => ({ status: r.status, body: JSON.parse(r.body) }));
}
