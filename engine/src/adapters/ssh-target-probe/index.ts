/**
 * The target probe over SSH: logs in to a lane's machine the way the runner's tools do (the
 * same key, the lane's pinned host key, its bastion) and runs `deploy.sh inspect` (a
 * rollback's prerequisites) or `deploy.sh smoke` (what a verified lane runs and its health),
 * both read-only.
 * Used where the engine holds the runners' SSH key: the local dispatcher (BATON_SSH_KEY_FILE),
 * the demo and the e2e tests. Bounded: one connect deadline and one command deadline per lane.
 */
import { shQuote } from "../../../../scripts/lib/shell-quote.ts";
import { connect, SshError } from "../../../../scripts/lib/ssh.ts";
import {
  checksFromInspect,
  checksUnreachable,
  type PrerequisiteCheck,
} from "../../domain/prerequisites.ts";
import type { ManifestLane } from "../../domain/types.ts";
import { answerFromSmoke, type TargetAnswer } from "../../domain/verification.ts";
import type { TargetProbe } from "../../ports/target-probe.ts";

export interface SshTargetProbeOptions {
  /** The runners' SSH private key (OpenSSH or PEM). */
  privateKey: string;
  passphrase?: string;
  /** The deploy script as the tools call it on the machine (BATON_DEPLOY_SCRIPT; default /usr/local/bin/baton-deploy). */
  deployScript?: string;
  /** Connect deadline per lane (ms, default 10 s). */
  connectTimeoutMs?: number;
  /** Deadline of `deploy.sh inspect` (ms, default 30 s). */
  commandTimeoutMs?: number;
}

export const DEFAULT_DEPLOY_SCRIPT = "/usr/local/bin/baton-deploy";

export class SshTargetProbe implements TargetProbe {
  private readonly deployScript: string;
  constructor(private readonly o: SshTargetProbeOptions) {
    this.deployScript = o.deployScript ?? DEFAULT_DEPLOY_SCRIPT;
  }

  /** Logs in to `lane`'s machine; the SSH error's class and message when it cannot. */
  private async login(
    lane: ManifestLane,
  ): Promise<
    | { ok: true; session: Awaited<ReturnType<typeof connect>> }
    | { ok: false; cls: string; message: string }
  > {
    try {
      const session = await connect(
        {
          host: lane.host,
          port: lane.port,
          user: lane.user,
          hostKey: lane.host_key,
          ...(lane.jump
            ? {
                jump: {
                  host: lane.jump.host,
                  port: lane.jump.port,
                  user: lane.jump.user,
                  hostKey: lane.jump.host_key,
                },
              }
            : {}),
        },
        {
          privateKey: this.o.privateKey,
          ...(this.o.passphrase ? { passphrase: this.o.passphrase } : {}),
          connectTimeoutMs: this.o.connectTimeoutMs ?? 10_000,
        },
      );
      return { ok: true, session };
    } catch (e) {
      return {
        ok: false,
        cls: e instanceof SshError ? e.errorClass : "connect_failed",
        message: (e as Error).message,
      };
    }
  }

  async observe(lane: ManifestLane, image: string): Promise<TargetAnswer> {
    const where = `${lane.user}@${lane.host}:${lane.port}`;
    const login = await this.login(lane);
    if (!login.ok) {
      return {
        reached: false,
        running: null,
        image: null,
        health: null,
        message: `could not log in to ${where} (${login.cls}): ${login.message}`,
      };
    }
    try {
      const cmd = [
        this.deployScript,
        "smoke",
        "--lane",
        lane.id,
        "--image",
        image,
        "--health-url",
        lane.health_url,
      ]
        .map(shQuote)
        .join(" ");
      const r = await login.session.exec(cmd, this.o.commandTimeoutMs ?? 30_000);
      if (r.timed_out) {
        return {
          reached: false,
          running: null,
          image: null,
          health: null,
          message: `${this.deployScript} smoke on ${where} did not answer in time`,
        };
      }
      return answerFromSmoke(`${r.stdout}\n${r.stderr}`, this.deployScript);
    } finally {
      login.session.close();
    }
  }

  async inspect(lane: ManifestLane, image: string): Promise<PrerequisiteCheck[]> {
    const where = `${lane.user}@${lane.host}:${lane.port}`;
    const login = await this.login(lane);
    if (!login.ok) {
      const cls = login.cls;
      return checksUnreachable(
        lane.id,
        `could not log in to ${where} (${cls}): ${login.message}`,
        cls === "auth_failed"
          ? `authorise the runners' SSH key for ${lane.user} on lane ${lane.id}'s machine (authorized_keys), then roll back again`
          : `make lane ${lane.id}'s machine reachable at ${where} with the pinned host key, then roll back again`,
      );
    }
    const session = login.session;
    try {
      const cmd = [this.deployScript, "inspect", "--lane", lane.id, "--image", image]
        .map(shQuote)
        .join(" ");
      const r = await session.exec(cmd, this.o.commandTimeoutMs ?? 30_000);
      if (r.timed_out) {
        return checksUnreachable(
          lane.id,
          `${this.deployScript} inspect on ${where} did not answer in time`,
          `check lane ${lane.id}'s machine (load, container runtime), then roll back again`,
        );
      }
      return checksFromInspect(lane.id, image, `${r.stdout}\n${r.stderr}`, this.deployScript);
    } finally {
      session.close();
    }
  }
}
