/**
 * CLI errors and exit codes. Exit codes (documented in docs/cli.md): 0 ok, 1 failed or
 * refused (the engine said no, a release ended badly, the engine is unreachable),
 * 2 usage (bad arguments, unreadable files, bad configuration).
 */
import type { Problem } from "../domain/errors.ts";

export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error the CLI prints as one line (plus one line per problem) and exits with. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode = EXIT.failed,
    readonly problems: Problem[] = [],
    /** The engine's error code when the engine refused (`superseded`, `conflict`…). */
    readonly code?: string,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** A usage error (exit 2). */
export function usage(message: string): CliError {
  return new CliError(message, EXIT.usage);
}

/**
 * The JSON body fields the CLI sends, by the flag that sets each (`baton accept --by` sends
 * `by`): the engine names a bad field by its body path (`body.by`), a person typed the flag.
 */
export const BODY_FIELD_FLAGS: Readonly<Record<string, string>> = {
  by: "--by",
  expires_at: "--expires",
  note: "--note",
  record_digest: "--digest",
  reason: "--reason",
  actor: "--actor",
  lanes: "--lane",
  bundle: "--bundle",
  attestations: "--attestation",
  text: "--text",
  summary: "--summary",
  severity: "--severity",
  commander: "--commander",
  operations: "--operations",
  communications: "--communications",
  release_owner: "--release-owner",
  recorder: "--recorder",
  model: "--model",
};

const BODY_PATH = /\bbody\.([A-Za-z_]+)((?:\.[\w-]+)*)/g;

/**
 * Rewrites the engine's body paths into the CLI flags that set them: `body.by` -> `--by`,
 * `body.lanes.lane-a` -> `--lane lane-a`, `body.attestations.0` -> `--attestation #1`.
 * A body field no flag sets keeps its path.
 */
export function flagWords(text: string): string {
  return text.replace(BODY_PATH, (whole, field: string, rest: string) => {
    const flag = BODY_FIELD_FLAGS[field];
    if (!flag) return whole;
    const tail = rest.slice(1);
    if (!tail) return flag;
    if (field === "attestations" && /^\d+/.test(tail)) {
      const [n, ...more] = tail.split(".");
      return `${flag} #${Number(n) + 1}${more.length ? ` (${more.join(".")})` : ""}`;
    }
    return `${flag} ${tail}`;
  });
}

/** The engine's problems with body paths named by their flags (see `flagWords`). */
export function problemsByFlag(problems: readonly Problem[]): Problem[] {
  return problems.map((p) => ({
    ...p,
    path: flagWords(p.path),
    message: flagWords(p.message),
    ...(p.fix ? { fix: flagWords(p.fix) } : {}),
  }));
}

/**
 * The lines to print for an error: its message, then `  - path: message; fix: …` per problem.
 * A headline that quotes the first problem (`…: image: must be pinned (and 4 more)`) is cut
 * to `…: 5 problems:` when more follow, so the list below says each problem once.
 */
export function errorLines(err: CliError): string[] {
  const [first] = err.problems;
  const quoted = first ? err.message.indexOf(`: ${first.path || "recipe"}: ${first.message}`) : -1;
  if (first && quoted >= 0 && err.problems.length > 1) {
    return [
      `${err.message.slice(0, quoted)}: ${err.problems.length} problems:`,
      ...err.problems.map(problemLine),
    ];
  }
  return [
    err.message,
    ...err.problems.map((p) =>
      // A problem that only repeats the headline adds its fix alone.
      p.message === err.message ? `  fix: ${p.fix ?? "see the message above"}` : problemLine(p),
    ),
  ];
}

function problemLine(p: Problem): string {
  return `  - ${p.path || "recipe"}: ${p.message}${p.fix ? `; fix: ${p.fix}` : ""}`;
}
