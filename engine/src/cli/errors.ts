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
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** A usage error (exit 2). */
export function usage(message: string): CliError {
  return new CliError(message, EXIT.usage);
}

/** The lines to print for an error: its message, then `  - path: message; fix: …` per problem. */
export function errorLines(err: CliError): string[] {
  return [
    err.message,
    ...err.problems.map((p) =>
      // A problem that only repeats the headline adds its fix alone.
      p.message === err.message
        ? `  fix: ${p.fix ?? "see the message above"}`
        : `  - ${p.path || "recipe"}: ${p.message}${p.fix ? `; fix: ${p.fix}` : ""}`,
    ),
  ];
}
