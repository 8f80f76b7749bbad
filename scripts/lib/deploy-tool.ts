/**
 * The shared body of the SSH tools: connect to the lane (pinned host key), run deploy.sh one
 * phase per remote command (each with its own deadline), and turn every phase's JSON line,
 * exit code and signal into checks.json. After a phase that is not ok/skipped the later phases
 * stay `not_run` (F07); a signal or a missing exit status is a failure (F08); a deadline is
 * `timeout` (F11). The result files are rewritten after every phase, so a cancelled tool
 * leaves what it observed.
 */
import { readFileSync } from "node:fs";
import { appendLog, type Check, writeChecks as writeChecksFile, writeOutcome } from "./result.ts";
import { shQuote } from "./shell-quote.ts";
import { connect, type ExecResult, SshError, type SshSession } from "./ssh.ts";
import { parseToolCli, type ReleaseStamp, readToolArgs, type ToolArgs } from "./tool-args.ts";

/** One tool: the deploy.sh subcommand it runs and the phases it reports, in order. */
export interface DeployToolSpec {
  name: string;
  /**
   * `inspect` (read-only, the rollback probe): one remote command for every phase; each check
   * record also carries the lane it is about (`lane`), which the engine checks.
   */
  subcommand: "deploy" | "restore" | "smoke" | "inspect";
  phases: readonly string[];
}

/** Default deadline per phase (ms); BATON_PHASE_TIMEOUT_MS overrides all of them. */
const PHASE_TIMEOUT_MS: Record<string, number> = {
  pull: 600_000,
  start: 120_000,
  health: 150_000,
  "stop-old": 120_000,
  running: 60_000,
  inspect: 30_000,
};

function envMs(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const v = Number(env[name]);
  return Number.isFinite(v) && v > 0 ? v : fallback;
}

/**
 * The remote command line for one phase. Every argument is validated and single-quoted.
 * `release` (deploy/restore only) turns on deploy.sh's generation fence.
 */
export function remoteCommand(
  spec: DeployToolSpec,
  script: string,
  args: ToolArgs,
  operationKey: string,
  phase: string,
  healthTimeoutS: string | undefined,
  release?: ReleaseStamp,
): string {
  if (spec.subcommand === "inspect") {
    return `exec ${[script, "inspect", "--lane", args.lane.id, "--image", args.image].map(shQuote).join(" ")}`;
  }
  const parts = [
    script,
    spec.subcommand,
    "--lane",
    args.lane.id,
    "--image",
    args.image,
    "--health-url",
    args.lane.health_url,
  ];
  if (spec.subcommand !== "smoke") {
    parts.push("--operation-key", operationKey);
    if (args.previous_image) parts.push("--previous-image", args.previous_image);
    if (release) parts.push("--release", release.id, "--generation", String(release.generation));
  }
  if (spec.subcommand === "deploy" && args.env) {
    for (const [k, v] of Object.entries(args.env).sort()) parts.push("--env", `${k}=${v}`);
  }
  parts.push("--phase", phase);
  if (healthTimeoutS) parts.push("--health-timeout", healthTimeoutS);
  // `exec` makes deploy.sh the session's process, so a signal that kills it reaches us as a signal.
  return `exec ${parts.map(shQuote).join(" ")}`;
}

/** Turns one phase's remote outcome into its check record (pure; unit-tested). */
export function phaseCheck(phase: string, r: ExecResult): Check {
  const base = {
    name: phase,
    exit_code: r.exit_code,
    signal: r.signal,
    duration_ms: r.duration_ms,
  };
  if (r.timed_out) {
    return {
      ...base,
      status: "timeout",
      message: `phase ${phase} did not finish within its deadline; the remote process was signalled`,
    };
  }
  if (r.exit_code === null) {
    const why = r.signal ? `killed by signal ${r.signal}` : "ended with no exit status";
    return { ...base, status: "failed", message: `remote ${phase} ${why}` };
  }
  let line: Record<string, unknown> | undefined;
  for (const text of r.stdout.split("\n").reverse()) {
    try {
      const parsed = JSON.parse(text);
      if (parsed && parsed.phase === phase) {
        line = parsed;
        break;
      }
      // deploy.sh refused before any phase ran (generation fence, lane lock): that line speaks for it.
      if (parsed && (parsed.phase === "fence" || parsed.phase === "lock")) line ??= parsed;
    } catch {}
  }
  if (line && line.phase !== phase) {
    const refused = line.phase === "fence" && line.status === "refused";
    return {
      ...base,
      status: "failed",
      class: refused ? "stale_generation" : line.phase === "lock" ? "lane_busy" : "target_refused",
      remote_exit_code: typeof line.exit_code === "number" ? line.exit_code : null,
      message: typeof line.message === "string" ? line.message : `deploy.sh ${String(line.phase)}`,
    };
  }
  if (!line) {
    return {
      ...base,
      status: "failed",
      message: `deploy.sh printed no result for ${phase}: ${(r.stderr || r.stdout).trim().slice(-300)}`,
    };
  }
  const reported = typeof line.status === "string" ? line.status : "failed";
  // Both must agree for success: a zero exit with a failed line, or "ok" with a non-zero exit, fails.
  const ok = (reported === "ok" || reported === "skipped") && r.exit_code === 0;
  return {
    ...base,
    status: ok ? reported : reported === "ok" ? "failed" : reported,
    remote_exit_code: typeof line.exit_code === "number" ? line.exit_code : null,
    remote_duration_ms: typeof line.duration_ms === "number" ? line.duration_ms : undefined,
    message: typeof line.message === "string" ? line.message : "",
    // The image the container runs as the runtime reports it (name@sha256:…): the running digest.
    ...(typeof line.image === "string" && line.image ? { image: line.image } : {}),
    // A failed health check's answer: its HTTP status and the first 2 KiB of its body, as
    // deploy.sh sanitised them (the dashboard and `baton status` show "503: <body>").
    ...(typeof line.http_status === "number" ? { http_status: line.http_status } : {}),
    ...(typeof line.body === "string" && line.body ? { body: line.body.slice(0, 2048) } : {}),
    ...(line.replayed === true ? { replayed: true } : {}),
  };
}

/**
 * Runs a deploy tool to completion and returns its exit code (0 = overall pass, 1 = fail,
 * 2 = bad command line). Never throws: every failure lands in the result files.
 */
export async function runDeployTool(
  spec: DeployToolSpec,
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<number> {
  let cli: ReturnType<typeof parseToolCli>;
  try {
    cli = parseToolCli(argv, env);
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    return 2;
  }
  const dir = cli.resultDir;
  const log = (line: string) => {
    process.stdout.write(`${line}\n`);
    appendLog(dir, line);
  };
  const checks: Check[] = spec.phases.map((p) => ({ name: p, status: "not_run" }));
  // inspect: every record names its lane (set once the arguments are read).
  let laneOf: (c: Check) => Check = (c) => c;
  const writeChecks = (d: string, list: readonly Check[]) => writeChecksFile(d, list.map(laneOf));
  const conclude = (status: string, overall: "pass" | "fail", extra?: Check) => {
    writeChecks(dir, extra ? [extra, ...checks] : checks);
    writeOutcome(dir, status, overall);
    return overall === "pass" ? 0 : 1;
  };
  let sessionRef: SshSession | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    log(`[${spec.name}] received ${sig}; recording what was observed and stopping`);
    const running = checks.find((c) => c.status === "running");
    if (running) running.status = "cancelled";
    conclude("cancelled", "fail");
    sessionRef?.close();
    process.exit(sig === "SIGINT" ? 130 : 143);
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);

  let args: ToolArgs;
  try {
    args = readToolArgs(cli.argsPath);
  } catch (e) {
    log((e as Error).message);
    return conclude("failed", "fail", {
      name: "arguments",
      status: "failed",
      class: "bad_arguments",
      message: (e as Error).message,
    });
  }
  if (spec.subcommand === "inspect") laneOf = (c) => ({ ...c, lane: args.lane.id });
  const script = env.BATON_DEPLOY_SCRIPT || "/usr/local/bin/baton-deploy";
  const connectTimeoutMs = envMs(env, "BATON_CONNECT_TIMEOUT_MS", 20_000);
  const stamp = cli.release
    ? ` release ${cli.release.id} generation ${cli.release.generation}`
    : " (no release generation: the target's generation fence is off)";
  log(
    `[${spec.name}] lane ${args.lane.id} (${args.lane.user}@${args.lane.host}:${args.lane.port}${args.lane.jump ? ` via bastion ${args.lane.jump.user}@${args.lane.jump.host}:${args.lane.jump.port}` : ""}) image ${args.image}${spec.subcommand === "smoke" ? "" : stamp}`,
  );

  const connectStarted = Date.now();
  try {
    sessionRef = await connect(
      {
        host: args.lane.host,
        port: args.lane.port,
        user: args.lane.user,
        hostKey: args.lane.host_key,
        ...(args.lane.jump
          ? {
              jump: {
                host: args.lane.jump.host,
                port: args.lane.jump.port,
                user: args.lane.jump.user,
                hostKey: args.lane.jump.host_key,
              },
            }
          : {}),
      },
      {
        privateKey: readFileSync(cli.keyPath, "utf8"),
        passphrase: env.BATON_SSH_PASSPHRASE || undefined,
        connectTimeoutMs,
      },
    );
  } catch (e) {
    const err =
      e instanceof SshError ? e : new SshError("connect_failed", `[ssh] ${(e as Error).message}`);
    log(err.message);
    return conclude("failed", "fail", {
      name: "connect",
      status: err.errorClass === "connect_timeout" ? "timeout" : "failed",
      class: err.errorClass,
      duration_ms: Date.now() - connectStarted,
      message: err.message,
    });
  }
  const connectCheck: Check = {
    name: "connect",
    status: "ok",
    duration_ms: Date.now() - connectStarted,
  };
  let overall: "pass" | "fail" = "pass";
  try {
    if (spec.subcommand === "inspect") {
      overall = await inspectPhases(sessionRef, spec, script, args, checks, env, log, dir);
      writeChecks(dir, [connectCheck, ...checks]);
      writeOutcome(dir, overall === "pass" ? "succeeded" : "failed", overall);
      return overall === "pass" ? 0 : 1;
    }
    for (const check of checks) {
      check.status = "running";
      const cmd = remoteCommand(
        spec,
        script,
        args,
        cli.operationKey,
        check.name,
        env.BATON_HEALTH_TIMEOUT_S,
        cli.release,
      );
      const timeout = envMs(env, "BATON_PHASE_TIMEOUT_MS", PHASE_TIMEOUT_MS[check.name] ?? 120_000);
      const result = await sessionRef.exec(cmd, timeout);
      Object.assign(check, phaseCheck(check.name, result));
      if (result.stderr.trim()) appendLog(dir, result.stderr);
      log(
        `[${spec.name}] ${check.name}: ${check.status}${check.message ? ` — ${check.message}` : ""}`,
      );
      writeChecks(dir, [connectCheck, ...checks]);
      if (check.status !== "ok" && check.status !== "skipped") {
        overall = "fail";
        break;
      }
    }
  } finally {
    sessionRef.close();
  }
  writeChecks(dir, [connectCheck, ...checks]);
  writeOutcome(dir, overall === "pass" ? "succeeded" : "failed", overall);
  return overall === "pass" ? 0 : 1;
}

/**
 * `deploy.sh inspect` (read-only): one remote command that prints one JSON line per phase
 * (access, image, capacity) and exits 1 when one failed; every phase is reported, none stops
 * the others. Fills `checks` in place; returns the overall outcome.
 */
async function inspectPhases(
  session: SshSession,
  spec: DeployToolSpec,
  script: string,
  args: ToolArgs,
  checks: Check[],
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
  dir: string,
): Promise<"pass" | "fail"> {
  for (const c of checks) c.status = "running";
  const cmd = remoteCommand(spec, script, args, "", "inspect", undefined);
  const r = await session.exec(
    cmd,
    envMs(env, "BATON_PHASE_TIMEOUT_MS", PHASE_TIMEOUT_MS.inspect ?? 30_000),
  );
  if (r.stderr.trim()) appendLog(dir, r.stderr);
  const lines = new Map<string, Record<string, unknown>>();
  for (const text of r.stdout.split("\n")) {
    try {
      const parsed = JSON.parse(text);
      if (parsed && typeof parsed.phase === "string") lines.set(parsed.phase, parsed);
    } catch {}
  }
  let overall: "pass" | "fail" = "pass";
  for (const check of checks) {
    const line = lines.get(check.name);
    const base = {
      name: check.name,
      exit_code: r.exit_code,
      signal: r.signal,
      duration_ms: r.duration_ms,
    };
    if (r.timed_out) {
      Object.assign(check, {
        ...base,
        status: "timeout",
        message: `${script} inspect did not finish within its deadline`,
      });
    } else if (!line) {
      const refused = lines.get("args");
      Object.assign(check, {
        ...base,
        status: "failed",
        message:
          typeof refused?.message === "string"
            ? refused.message
            : `deploy.sh printed no result for ${check.name}: ${(r.stderr || r.stdout).trim().slice(-300) || "no output"}`,
      });
    } else {
      Object.assign(check, {
        ...base,
        status: line.status === "ok" ? "ok" : "failed",
        message: typeof line.message === "string" ? line.message : "",
      });
    }
    if (check.status !== "ok") overall = "fail";
    log(
      `[${spec.name}] ${check.name}: ${check.status}${check.message ? ` — ${check.message}` : ""}`,
    );
  }
  return overall;
}
