/**
 * The action's own annotations, within GitHub's limits: a step shows at most
 * {@link MAX_PER_KIND} annotations of each kind (error, warning, notice) and a job at most 50.
 * Every annotation the action makes goes through here and is counted per kind. Beyond a kind's
 * budget, messages go to the log as plain `[kind] message` lines, and {@link Annotations.flush}
 * adds one annotation per kind saying how many went there. {@link VERDICT_SLOTS} error slots are
 * kept for the step's verdict (the failure that carries the engine's advice, e.g. "re-run this
 * job before 15:32 UTC, or release r5 compensates"), so the verdict is always among the errors
 * shown. Tool output never annotates (workflow-commands.ts), so these are all the step's.
 */
import * as core from "@actions/core";
import { stepCommands } from "./workflow-commands.ts";

/** The annotation kinds GitHub counts separately. */
export type AnnotationKind = "error" | "warning" | "notice";

/** Annotations of one kind GitHub shows per step. */
export const MAX_PER_KIND = 10;

/** Error annotations kept for {@link Annotations.verdict} (the main step gives at most two). */
export const VERDICT_SLOTS = 2;

/** Per-kind counting and capping; `emit` makes an annotation, `log` writes a plain log line. */
export class Annotations {
  private readonly used: Record<AnnotationKind, number> = { error: 0, warning: 0, notice: 0 };
  private readonly moved: Record<AnnotationKind, number> = { error: 0, warning: 0, notice: 0 };

  constructor(
    private readonly emit: (kind: AnnotationKind, message: string) => void,
    private readonly log: (line: string) => void,
  ) {}

  /** Annotates `message` while the kind's budget lasts (one kept for the note), else logs it. */
  add(kind: AnnotationKind, message: string): void {
    const reserved = 1 + (kind === "error" ? VERDICT_SLOTS : 0);
    this.put(kind, message, MAX_PER_KIND - reserved);
  }

  /** The step's verdict: an error annotation in a kept slot (logged only past them). */
  verdict(message: string): void {
    this.put("error", message, MAX_PER_KIND - 1);
  }

  /** One annotation per kind that had messages moved to the log, saying how many. */
  flush(): void {
    for (const kind of ["error", "warning", "notice"] as const) {
      const n = this.moved[kind];
      if (n === 0) continue;
      this.moved[kind] = 0;
      this.used[kind]++;
      this.emit(
        kind,
        `[action] ${n} more ${kind}(s) are in the step log (GitHub shows at most ${MAX_PER_KIND} ${kind} annotations per step)`,
      );
    }
  }

  /** Annotations made so far, per kind (the note included). */
  counts(): Readonly<Record<AnnotationKind, number>> {
    return { ...this.used };
  }

  private put(kind: AnnotationKind, message: string, limit: number): void {
    if (this.used[kind] < limit) {
      this.used[kind]++;
      this.emit(kind, message);
    } else {
      this.moved[kind]++;
      this.log(`[${kind}] ${message}`);
    }
  }
}

const EMIT: Record<AnnotationKind, (message: string) => void> = {
  error: core.error,
  warning: core.warning,
  notice: core.notice,
};

/** The step's annotations, on stdout; made while tool output is shown, they resume commands first. */
const step = new Annotations(
  (kind, message) => stepCommands.interject(() => EMIT[kind](message)),
  (line) => core.info(line),
);

/** Annotates `message` as `kind` within the step's budget. */
export function annotate(kind: AnnotationKind, message: string): void {
  step.add(kind, message);
}

/** Annotates `message` as an error within the step's budget. */
export function annotateError(message: string): void {
  step.add("error", message);
}

/** Fails the step (exit code 1) with `message` as its verdict annotation (`core.setFailed`, counted). */
export function failStep(message: string): void {
  process.exitCode = core.ExitCode.Failure;
  step.verdict(message);
}

/** Emits the step's notes about annotations moved to the log (call once, at the end). */
export function flushAnnotations(): void {
  step.flush();
}
