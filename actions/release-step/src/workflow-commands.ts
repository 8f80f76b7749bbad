/**
 * The tool's output reaches the step log as plain text. While the tool runs, the runner's
 * processing of workflow commands is stopped (`::stop-commands::<token>`, resumed by a line
 * `::<token>::`, as GitHub documents for logging untrusted output), so a tool's `::error::`,
 * `##[error]`, `::add-mask::` or `::set-output::` lines are shown verbatim and neither annotate
 * nor change the step. The token is random per pause and never given to the tool. The runner
 * reads a command only at the start of a line, so the resume line always starts a new one.
 * Annotations the action makes meanwhile (a cancellation) go out through {@link interject}.
 */
import { randomBytes } from "node:crypto";

/** Stop/resume of workflow commands around output that is not ours. */
export class CommandPause {
  private token: string | null = null;
  private atLineStart = true;

  /** `out` writes to the step's stdout (the stream the runner reads commands from). */
  constructor(private readonly out: (text: string | Uint8Array) => void) {}

  /** Whether commands are stopped now. */
  get paused(): boolean {
    return this.token !== null;
  }

  /** Stops command processing (no-op when already stopped). */
  pause(): void {
    if (this.token) return;
    this.token = randomBytes(16).toString("hex");
    this.line(`::stop-commands::${this.token}`);
  }

  /** Writes output that is not ours, verbatim. */
  write(chunk: string | Uint8Array): void {
    if (chunk.length === 0) return;
    this.out(chunk);
    const last = typeof chunk === "string" ? chunk.charCodeAt(chunk.length - 1) : chunk.at(-1);
    this.atLineStart = last === 0x0a;
  }

  /** Resumes command processing (no-op when not stopped), on a line of its own. */
  resume(): void {
    if (!this.token) return;
    const token = this.token;
    this.token = null;
    this.line(`::${token}::`);
  }

  /** Runs `emit` (which prints commands) with commands processed, then stops them again if they were. */
  interject(emit: () => void): void {
    const was = this.paused;
    this.resume();
    try {
      emit();
    } finally {
      if (was) this.pause();
    }
  }

  private line(text: string): void {
    this.out(`${this.atLineStart ? "" : "\n"}${text}\n`);
    this.atLineStart = true;
  }
}

/** The step's one pause, on process.stdout. */
export const stepCommands = new CommandPause((t) => process.stdout.write(t));
