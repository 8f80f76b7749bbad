/**
 * The mutants of `npm run bench:exposure -- --mutants`: one deliberate break per invariant the
 * benchmark checks, each applied to a PATCHED COPY of the tree (never a switch in shipped
 * code): the copy's file has `find` replaced by `replace` (exactly one occurrence, or the
 * mutant is stale and the benchmark fails). `scripts/check-no-mutants.mjs` fails CI if a
 * mutant's name appears in shipped sources or bundles.
 *
 * Each mutant runs on the generated releases where its behaviour is exercised (`fits`), and
 * must raise the figure it targets (`caughtBy`) while every other figure stays 0.
 */

import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import type { Scenario } from "../test/support/exposure-world.ts";

/** A RESULT figure a mutant targets. */
export type Figure =
  | "max_overshoot_pct"
  | "restore_mismatches"
  | "unread_writes"
  | "step_mismatches"
  | "forward_after_abort";

export interface Mutant {
  name: string;
  /** The behaviour it breaks, in words. */
  breaks: string;
  caughtBy: Figure;
  /** Repository-relative file of the copy to patch. */
  file: string;
  find: string;
  replace: string;
  /**
   * Driven releases it runs (default and upper bound: BATON_EXPOSURE_MUTANT_RELEASES, 20 unless
   * set; CI's size runs fewer).
   */
  releases?: number;
  /** The generated releases it runs on; may reshape one (null: skip it). */
  fits: (s: Scenario) => Scenario | null;
}

const hasRunnerUndo = (s: Scenario) =>
  s.failures.some((f) => f.kind === "abort" || (f.kind === "runner_fail" && f.times > 1));

export const MUTANTS: Mutant[] = [
  {
    name: "mutant-exposure-no-ceiling",
    breaks:
      "exposure arithmetic without the ceiling: each version group gets its lanes' baseline share, not the declared percent",
    caughtBy: "max_overshoot_pct",
    file: "engine/src/domain/weights.ts",
    find: "  const a = largestRemainder(\n    percent,\n    cand.map((l) => l.baseline_weight),\n  );",
    replace: [
      "  const sumOf = (g: readonly WeightedLane[]) => g.reduce((x, l) => x + l.baseline_weight, 0);",
      "  if (cand.length > 0 && base.length > 0 && sumOf(cand) + sumOf(base) > 0)",
      "    percent = Math.round((100 * sumOf(cand)) / (sumOf(cand) + sumOf(base)));",
      "  const a = largestRemainder(",
      "    percent,",
      "    cand.map((l) => l.baseline_weight),",
      "  );",
    ].join("\n"),
    // Two waves or more, the first declaring 5%: its lanes' baseline share is then above it.
    fits: (s) =>
      s.waves.length < 2
        ? null
        : {
            ...s,
            target: "sim",
            waves: s.waves.map((w, i) => (i === 0 ? { ...w, traffic: 5 } : w)),
            failures: [],
          },
  },
  {
    name: "mutant-restore-previous-image",
    breaks:
      "compensation restores the recipe's previous_image instead of the observed baseline's image",
    caughtBy: "restore_mismatches",
    file: "engine/src/domain/catalogue.ts",
    find: "    const image = restoreImage(ctx);",
    replace: "    const image = ctx.previous_image;",
    fits: (s) => {
      if (!hasRunnerUndo(s)) return null;
      // A lane on a third image at start that compensation must put back.
      return {
        ...s,
        target: "sim",
        lanes: s.lanes.map((l, i) =>
          i === 0 ? { ...l, start: "third" as const, excluded: false } : l,
        ),
        failures: s.failures.filter((f) => f.kind !== "runner_fail_bwd"),
      };
    },
  },
  {
    name: "mutant-skip-read-back",
    breaks: "a control-plane write answered 2xx is taken as applied without reading it back",
    caughtBy: "unread_writes",
    file: "engine/src/service/perform/control-plane.ts",
    find: "      event.read_back = await readBack(ctx, request, write);",
    replace: '        event.read_back = { matches: true, message: "" };',
    // A write that lies (200, nothing applied) would then leave the fleet wrong too: those
    // releases are not this mutant's, so every other check can stay green.
    fits: (s) => ({
      ...s,
      target: "sim",
      failures: s.failures.filter((f) => f.kind !== "cp_fault" && f.kind !== "cp_hang"),
    }),
  },
  {
    name: "mutant-forward-after-abort",
    breaks: "an accepted abort of a running release is recorded but the release goes on forward",
    caughtBy: "forward_after_abort",
    file: "engine/src/domain/transition/operator.ts",
    find: "  // running / paused. A dispatch no runner has bound yet is cancelled: the generation moves",
    // Source text with a template placeholder: `$` kept apart from `{`.
    replace: [
      "  d.accept(`[engine] release $",
      "{r.id} abort noted ($",
      "{by})`);\n  return undefined;\n",
      "  // running / paused. A dispatch no runner has bound yet is cancelled: the generation moves",
    ].join(""),
    fits: (s) => {
      const abort = s.failures.find((f) => f.kind === "abort");
      return {
        ...s,
        target: "sim",
        failures: [{ kind: "abort", round: abort?.kind === "abort" ? abort.round % 6 : 2 }],
      };
    },
  },
  {
    name: "mutant-health-any-answer",
    breaks:
      "deploy.sh's health check passes on any answer at the health URL (an old container's too), not only the new container's",
    caughtBy: "step_mismatches",
    file: "scripts/target/deploy.sh",
    find: '      if [ $rc -eq 0 ] && [ -n "$ID" ] && ! answer_has_id "$ID"; then',
    replace: "      if false; then",
    releases: 4,
    // A machine whose candidate never listens, while the old container answers on its port.
    fits: (s) => ({
      ...s,
      target: "real",
      lanes: s.lanes.map((l) => ({
        ...l,
        brokenCandidate: true,
        start: l.start === "candidate" ? ("previous" as const) : l.start,
      })),
      failures: s.failures.filter((f) => f.kind !== "cp_fault" && f.kind !== "cp_hang"),
    }),
  },
];

const REPO = resolve(import.meta.dirname, "..");

/**
 * A copy of the tree (the files of engine/, test/, bench/, scripts/ and the package
 * manifests, with node_modules linked) with `m` applied. Returns the copy's root.
 * Throws when `find` does not occur exactly once in the file (a stale mutant).
 */
export function patchedCopy(m: Mutant): string {
  const root = mkdtempSync(join(tmpdir(), "baton-mutant-"));
  // The working tree as it is (tracked and new files), not a commit.
  const files = execFileSync(
    "git",
    [
      "ls-files",
      "--cached",
      "--others",
      "--exclude-standard",
      "engine",
      "test",
      "bench",
      "scripts",
      "package.json",
      "tsconfig.json",
    ],
    { cwd: REPO, encoding: "utf8" },
  )
    .split("\n")
    .filter((f) => f && existsSync(join(REPO, f)));
  for (const f of files) {
    mkdirSync(dirname(join(root, f)), { recursive: true });
    cpSync(join(REPO, f), join(root, f), { preserveTimestamps: true });
  }
  symlinkSync(join(REPO, "node_modules"), join(root, "node_modules"));
  const target = join(root, m.file);
  const text = readFileSync(target, "utf8");
  const count = text.split(m.find).length - 1;
  if (count !== 1)
    throw new Error(
      `[bench] mutant ${m.name} is stale: ${m.file} holds its text ${count} times, not once; update bench/exposure-mutants.ts`,
    );
  writeFileSync(target, text.replace(m.find, m.replace));
  return root;
}
