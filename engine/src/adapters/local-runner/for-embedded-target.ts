/**
 * Wiring of the embedded default: a local runner whose action talks to this engine and whose
 * tools SSH into embedded targets (engine/src/embedded-target). Used by the demo and the e2e
 * tests so they configure the action the same way.
 */
import { LocalRunner, type LocalRunnerOptions } from "./runner.ts";

export interface EmbeddedRunnerOptions {
  repoRoot: string;
  workDir: string;
  /** The engine's public URL (the action's `engine-url`; callback URLs must share its origin). */
  engineUrl: string;
  /** The secret that signs preflights and callbacks (first of BATON_CALLBACK_SECRETS). */
  callbackSecret: string;
  /** The targets' shared client key and installed deploy script. */
  target: { clientPrivateKey: string; deployScript: string };
  /** Passphrase of the client key, if it is encrypted. */
  sshPassphrase?: string;
  runTimeoutMs?: number;
  maxConcurrentRuns?: number;
  env?: Record<string, string>;
  onEvent?: LocalRunnerOptions["onEvent"];
}

/** A LocalRunner configured for embedded targets (action inputs and BATON_DEPLOY_SCRIPT). */
export function localRunnerForEmbeddedTarget(o: EmbeddedRunnerOptions): LocalRunner {
  const inputs: Record<string, string> = {
    "engine-url": o.engineUrl,
    "callback-secret": o.callbackSecret,
    "ssh-key": o.target.clientPrivateKey,
  };
  if (o.sshPassphrase) inputs["ssh-passphrase"] = o.sshPassphrase;
  const options: LocalRunnerOptions = {
    repoRoot: o.repoRoot,
    workDir: o.workDir,
    inputs,
    env: { BATON_DEPLOY_SCRIPT: o.target.deployScript, ...o.env },
  };
  if (o.runTimeoutMs !== undefined) options.runTimeoutMs = o.runTimeoutMs;
  if (o.maxConcurrentRuns !== undefined) options.maxConcurrentRuns = o.maxConcurrentRuns;
  if (o.onEvent) options.onEvent = o.onEvent;
  return new LocalRunner(options);
}
