/**
 * Mixed-version conformance (docs/recipes.md "Conformance checks"): deterministic checks a
 * recipe lists under `conformance`, each pairing a reader and a writer of different versions
 * (old reader × new writer, new reader × old writer). They compile into the first rows of the
 * step table, `assert_conformance_passed` runner steps before wave 1's first step, so they run
 * before any lane changes and before any traffic reaches the candidate; one failure stops the
 * release with exposure 0. Here: the contract check's rules, the words a failure is told with,
 * and the evidence the record shows (the schema is in conformance-schema.ts).
 */
import { allowlistFix, TOOL_ALLOWLIST } from "./allowlist.ts";
import { CONFORMANCE_STEP, type ConformanceSide } from "./conformance-schema.ts";
import type { Problem } from "./errors.ts";
import { asArray as arr, asObject as obj } from "./json.ts";
import type { ManifestStep, Release } from "./types.ts";

/**
 * The contract check's rules for `conformance` (the schema checks each field's form): unique
 * names, allowlisted tools, and a reader and writer of different versions. Reads only the
 * well-typed parts of `input`; never throws.
 */
export function conformanceProblems(input: unknown): Problem[] {
  const problems: Problem[] = [];
  const seen = new Map<string, number>();
  arr(obj(input)?.conformance).forEach((raw, i) => {
    const c = obj(raw);
    if (!c) return;
    const at = `conformance.${i}`;
    if (typeof c.name === "string") {
      const j = seen.get(c.name);
      if (j !== undefined) {
        problems.push({
          path: `${at}.name`,
          message: `duplicate conformance check name \`${c.name}\` (also conformance.${j})`,
          fix: "Give every conformance check its own name: its step's operation key, the history and the record name it.",
        });
      } else seen.set(c.name, i);
    }
    if (typeof c.tool === "string" && !TOOL_ALLOWLIST.includes(c.tool)) {
      problems.push({
        path: `${at}.tool`,
        message: `conformance tool \`${c.tool}\` is not in the allowlist`,
        fix: allowlistFix(c.tool),
      });
    }
    if ((c.reader === "old" || c.reader === "new") && c.reader === c.writer) {
      problems.push({
        path: `${at}.writer`,
        message: `conformance check \`${String(c.name)}\` pairs a ${c.reader} reader with a ${c.reader} writer: that is not a mixed-version check`,
        fix: `Set \`writer: ${c.reader === "old" ? "new" : "old"}\` (old reader × new writer, or new reader × old writer); a same-version check belongs in the smoke test or a gate check.`,
      });
    }
  });
  return problems;
}

/** What a conformance step's forward action carries about its check (`args.conformance`). */
export interface ConformanceOfStep {
  name: string;
  reader: ConformanceSide;
  writer: ConformanceSide;
}

/** The check a step runs, when it is a conformance step; null otherwise. */
export function conformanceOf(
  step: Pick<ManifestStep, "name" | "forward">,
): ConformanceOfStep | null {
  if (step.name !== CONFORMANCE_STEP || step.forward.kind !== "runner") return null;
  const c = obj(step.forward.args.conformance);
  const { name, reader, writer } = c ?? {};
  if (typeof name !== "string") return null;
  if ((reader !== "old" && reader !== "new") || (writer !== "old" && writer !== "new")) return null;
  return { name, reader, writer };
}

/** `old reader × new writer`: the pair a check covers, in words. */
export function pairWords(c: Pick<ConformanceOfStep, "reader" | "writer">): string {
  return `${c.reader} reader × ${c.writer} writer`;
}

/**
 * The reason a release stops for when a conformance step ended `failed` or `unknown`: names the
 * check and its pair, says that no traffic reached the candidate and what to do; null when
 * `step` is not a conformance step. `why` is the step's own failure text.
 */
export function conformanceFailureWords(
  step: Pick<ManifestStep, "name" | "forward">,
  why: string,
): string | null {
  const c = conformanceOf(step);
  if (!c) return null;
  const fix =
    c.reader === "old"
      ? "make the candidate write what the previous version can read (or expand the old readers in an earlier release)"
      : "make the candidate read what the previous version writes";
  return `conformance check \`${c.name}\` (${pairWords(c)}) did not pass, so no traffic reached the candidate: ${why}. To go on, ${fix}, then start a new release; if the check itself is wrong, fix its tool or its arguments in the recipe`;
}

/** One conformance check as the release record shows it (`evidence.conformance`). */
export interface ConformanceEvidence {
  name: string;
  reader: ConformanceSide;
  writer: ConformanceSide;
  tool: string;
  /** 0-based index of its step in the table. */
  step_index: number;
  /** Its forward step run, null when it never began. */
  step_run_id: string | null;
  /** pass: its step run succeeded; fail: it failed or ended unknown; not_run: still to come or in flight. */
  outcome: "pass" | "fail" | "not_run";
  /** The failure in words (the step run's last error), null otherwise. */
  message: string | null;
}

/** The conformance checks of `release` with their outcomes, in table order; [] when it has none. */
export function conformanceEvidence(
  release: Pick<Release, "manifest" | "step_runs">,
): ConformanceEvidence[] {
  return release.manifest.steps.flatMap((step) => {
    const c = conformanceOf(step);
    if (!c || step.forward.kind !== "runner") return [];
    const sr = release.step_runs.find((s) => s.step_index === step.index && s.direction === "fwd");
    const failed =
      sr?.state === "failed" || sr?.state === "unknown" || sr?.state === "dispatch_failed";
    return [
      {
        ...c,
        tool: step.forward.tool,
        step_index: step.index,
        step_run_id: sr?.id ?? null,
        outcome: sr?.state === "succeeded" ? "pass" : failed ? "fail" : "not_run",
        message: failed ? (sr?.last_error ?? null) : null,
      },
    ];
  });
}
