/**
 * `baton verify <id>` (docs/cli.md, docs/lifecycle.md "Recovery verification"), the action of
 * the verb table's `verify` (domain/verbs.ts, `cli: "own"`): sends the verb as every verb is sent
 * (`postVerb`), then waits (polling, bounded by `--timeout`) for the verdict, and prints it lane
 * by lane: each field that differs with its desired and observed values, and what could not be
 * observed. Exit 0 when it passed, 1 when a lane differs, the engine refused (409 naming why) or
 * the verdict did not come in time.
 */

import { VERBS } from "../domain/verbs.ts";
import type { RecoveryVerification } from "../domain/verification.ts";
import { type Connection, EngineClient } from "./client.ts";
import { type Io, postVerb } from "./commands.ts";
import { CliError, EXIT, type ExitCode, usage } from "./errors.ts";

const print = (io: Io, lines: string[]) => io.out.write(`${lines.join("\n")}\n`);
const printJson = (io: Io, v: unknown) => io.out.write(`${JSON.stringify(v, null, 2)}\n`);

/** How the CLI waits for the verdict (tests pass a fake clock). */
export interface VerifyWait {
  intervalMs: number;
  timeoutMs: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** The lines of a verification for people: the verdict, then one line per lane. */
export function verificationLines(id: string, v: RecoveryVerification): string[] {
  const head = `verification ${v.seq} of ${id} (${v.trigger === "compensation" ? "after its undo" : `asked by ${v.requested_by}`}, against ${v.desired_from === "baseline" ? "the observed baseline" : "the manifest's end state"}): ${v.state === "passed" ? "passed" : v.state === "failed" ? "FAILED" : "reading…"}`;
  const lines = [head];
  if (v.by) lines.push(`  read by ${v.by} at ${new Date(v.at ?? 0).toISOString()}`);
  if (v.state === "failed" && v.lanes.length === 0 && v.summary) lines.push(`  ${v.summary}`);
  for (const l of v.lanes) {
    const differ = l.fields.filter((f) => f.ok === false).map((f) => f.note ?? f.field);
    const seen = l.fields
      .filter((f) => f.ok === true)
      .map((f) => f.field)
      .join(", ");
    lines.push(
      `  ${l.lane.padEnd(12)} ${l.ok ? "ok     " : "DIFFERS"} ${l.ok ? `as desired: ${seen || "nothing observed"}` : differ.join("; ")}`,
    );
  }
  for (const g of v.gaps) lines.push(`  not observed: ${g}`);
  return lines;
}

/**
 * `verify <id> [--actor] [--timeout s] [--interval ms] [--json]`, with `o` as commander parsed
 * the verb's flags (verbs.ts, with their defaults). @throws CliError for bad options (usage, exit 2) and the
 * engine's refusals (exit 1).
 */
export async function runVerify(
  conn: Connection,
  id: string,
  o: Readonly<Record<string, unknown>> & { json: boolean },
  io: Io,
  wait: Partial<VerifyWait> = {},
): Promise<ExitCode> {
  // Commander fills in the defaults the verb table declares.
  const interval = Number(o.interval);
  const timeout = Number(o.timeout);
  if (!Number.isFinite(interval) || interval < 100 || interval > 60_000) {
    throw usage(`[cli] --interval must be 100..60000 ms; got ${JSON.stringify(o.interval)}`);
  }
  if (!Number.isFinite(timeout) || timeout <= 0) {
    throw usage(
      `[cli] --timeout must be a positive number of seconds; got ${JSON.stringify(o.timeout)}`,
    );
  }
  const posted = await postVerb(conn, "verify", id, [], o, io);
  const rid = posted.id;
  const asked = posted.answer as { verification?: RecoveryVerification | null };
  if (!o.json) print(io, VERBS.verify.accepted(rid, posted.answer, conn.engine, posted.sent));
  const client = new EngineClient(conn);
  const seq = asked.verification?.seq ?? 0;
  const now = wait.now ?? Date.now;
  const sleep = wait.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const until = now() + timeout * 1000;
  let v: RecoveryVerification | null = asked.verification ?? null;
  // Bounded: one poll per interval until the deadline.
  for (let i = 0; i < 1_000_000 && (v?.seq !== seq || v.state === "verifying"); i++) {
    if (now() >= until) {
      throw new CliError(
        `[cli] verification ${seq} of ${rid} gave no verdict within ${timeout} s; it goes on in the engine: baton status ${rid}`,
      );
    }
    await sleep(interval);
    v = (
      await client.call<{ verification: RecoveryVerification | null }>("GET", `/v1/releases/${rid}`)
    ).verification;
  }
  if (!v) throw new CliError(`[cli] release ${rid} shows no verification`);
  if (o.json) printJson(io, v);
  else print(io, verificationLines(rid, v));
  return v.state === "passed" ? EXIT.ok : EXIT.failed;
}
