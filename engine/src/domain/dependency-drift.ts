/**
 * Drift of mutable dependencies (docs/drift.md "Mutable dependencies"): what the engine keeps of
 * each probe's answers (the engine state `dependencies`), the judgement of a model's dependencies
 * against them, the history entries that record it, and the refusal of a start that needs
 * requalification. Pure: `now` is passed in.
 */
import type { Problem } from "./errors.ts";
import {
  contractExpiresAt,
  type DependencyKind,
  type MutableDependency,
} from "./mutable-dependencies.ts";
import type { HistoryEntry, Json } from "./types.ts";

function obj(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === "object" && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

/** A manifest's view of what is needed here (the compiled recipe's model and dependencies). */
export interface DependentManifest {
  model: string;
  mutable_dependencies?: MutableDependency[];
}

/** The last answer of one dependency's probe, kept in the engine state `dependencies`. */
export interface DependencyObservation {
  model: string;
  name: string;
  /** The release whose manifest's probe was asked. */
  release: string;
  /** The revision the probe last answered; null before its first answer. */
  revision: string | null;
  /** Epoch ms of that answer; null before it. */
  observed_at: number | null;
  /** The last probe failure (null after an answer); its time, epoch ms. */
  error: string | null;
  error_at: number | null;
}

/** What the engine keeps between observations: per model, the observations and what was recorded. */
export interface DependencyBook {
  observations: DependencyObservation[];
  /** Per model: the print of the dependency drift last recorded ("" none) and its release. */
  recorded: { model: string; print: string; release: string }[];
}

export const EMPTY_DEPENDENCY_BOOK: DependencyBook = { observations: [], recorded: [] };

/** The book stored as engine state, or the empty book for anything else. */
export function dependencyBookOf(value: unknown): DependencyBook {
  const v = obj(value);
  if (!v || !Array.isArray(v.observations) || !Array.isArray(v.recorded))
    return EMPTY_DEPENDENCY_BOOK;
  return v as unknown as DependencyBook;
}

/** The observation of dependency `name` of `model`, if any. */
export function observationOf(
  book: DependencyBook,
  model: string,
  name: string,
): DependencyObservation | undefined {
  return book.observations.find((o) => o.model === model && o.name === name);
}

/** One drifted dependency: what the recipe declares and what was observed. */
export interface DependencyDrift {
  name: string;
  kind: DependencyKind;
  owner: string;
  /** The revision the recipe was qualified against. */
  declared: string;
  /** The revision the probe last answered, when it differs from `declared`; else null. */
  observed: string | null;
  /** Epoch ms of that answer; null when the revision did not change. */
  observed_at: number | null;
  /** True when the contract's last day has passed. */
  expired: boolean;
  contract_expires: string;
  /** The gate checks that requalify it. */
  checks: string[];
  fallback: string;
}

/** A model's drifted dependencies, judged against the manifest of `release`. */
export interface ModelDependencyDrift {
  model: string;
  release: string;
  /** Epoch ms of the judgement. */
  observed_at: number;
  dependencies: DependencyDrift[];
}

/** What is wrong with dependency `d` at `now` given its observation, or null when nothing. */
export function dependencyDrift(
  d: MutableDependency,
  o: DependencyObservation | undefined,
  now: number,
): DependencyDrift | null {
  const changed = o?.revision != null && o.revision !== d.revision;
  const expired = now >= contractExpiresAt(d.contract_expires);
  if (!changed && !expired) return null;
  return {
    name: d.name,
    kind: d.kind,
    owner: d.owner,
    declared: d.revision,
    observed: changed ? (o?.revision ?? null) : null,
    observed_at: changed ? (o?.observed_at ?? null) : null,
    expired,
    contract_expires: d.contract_expires,
    checks: [...d.requalification.checks],
    fallback: d.fallback,
  };
}

/** The drift of the dependencies `manifest` (of release `release`) declares, or null. */
export function modelDependencyDrift(
  manifest: DependentManifest,
  release: string,
  book: DependencyBook,
  now: number,
): ModelDependencyDrift | null {
  const drifted = (manifest.mutable_dependencies ?? [])
    .map((d) => dependencyDrift(d, observationOf(book, manifest.model, d.name), now))
    .filter((d): d is DependencyDrift => d !== null);
  return drifted.length
    ? { model: manifest.model, release, observed_at: now, dependencies: drifted }
    : null;
}

/** What identifies one distinct dependency drift (the same drift is recorded once). */
export function dependencyDriftPrint(d: ModelDependencyDrift | null): string {
  if (!d) return "";
  return JSON.stringify(d.dependencies.map((x) => [x.name, x.declared, x.observed, x.expired]));
}

/** What changed of one dependency, in words. */
function changeWords(d: DependencyDrift): string {
  const parts: string[] = [];
  if (d.observed !== null)
    parts.push(
      `provider revision changed: the recipe declares ${JSON.stringify(d.declared)}, its probe observed ${JSON.stringify(d.observed)}${d.observed_at !== null ? ` at ${new Date(d.observed_at).toISOString()}` : ""}`,
    );
  if (d.expired) parts.push(`contract expired: it held through ${d.contract_expires}`);
  return parts.join("; ");
}

/** The message of a dependency drift (history, log, notice). */
export function dependencyDriftMessage(d: ModelDependencyDrift): string {
  return `[drift] model ${d.model}: ${d.dependencies
    .map(
      (x) =>
        `mutable dependency ${x.name} (${x.kind}, owner ${x.owner}): ${changeWords(x)}; its next release must pass the requalification checks ${x.checks.join(", ")}; fallback: ${x.fallback}`,
    )
    .join(". ")}`;
}

/** History kinds of a dependency drift and of its end. */
export const DEPENDENCY_DRIFT_KIND = "dependency_drift";
export const DEPENDENCY_CLEARED_KIND = "dependency_drift_cleared";

/** The `dependency_drift` entry on release `d.release` (not a decision: no record digest moves). */
export function dependencyDriftEntry(d: ModelDependencyDrift, now: number): HistoryEntry {
  return {
    release_id: d.release,
    at: now,
    kind: DEPENDENCY_DRIFT_KIND,
    step_run_id: null,
    outcome: "accepted",
    message: dependencyDriftMessage(d),
    data: d as unknown as Json,
  };
}

/**
 * The `dependency_drift_cleared` entry on `releaseId`: the model's newest succeeded release
 * (`by`) declares the observed revisions with contracts in force: requalified.
 */
export function dependencyClearedEntry(
  releaseId: string,
  model: string,
  by: string,
  now: number,
  /** `requalified` (default): `by` declares what the probes observe; `moved`: `by` holds the drift now. */
  why: "requalified" | "moved" = "requalified",
): HistoryEntry {
  return {
    release_id: releaseId,
    at: now,
    kind: DEPENDENCY_CLEARED_KIND,
    step_run_id: null,
    outcome: "accepted",
    message:
      why === "moved"
        ? `[drift] model ${model}: its mutable dependencies' drift is now recorded on ${by}, the model's newest succeeded release`
        : `[drift] model ${model}: mutable dependencies requalified: release ${by} declares the revisions their probes observe, with contracts in force`,
    data: { model, by, why },
  };
}

/** The dependency drift a release's history holds now (null when none, or cleared since). */
export function currentDependencyDrift(
  history: readonly HistoryEntry[],
): ModelDependencyDrift | null {
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i];
    if (h?.kind === DEPENDENCY_CLEARED_KIND) return null;
    if (h?.kind === DEPENDENCY_DRIFT_KIND) return h.data as unknown as ModelDependencyDrift;
  }
  return null;
}

/**
 * Why a release of `manifest` may not start at `now`: one problem per dependency whose contract
 * has expired, or whose probe last observed a revision other than the one the recipe declares
 * (the provider changed since it was qualified), and one per dependency of the model recorded in
 * drift that the recipe no longer declares. Empty: it may start. A dependency its probe never
 * answered for is judged by its contract alone.
 */
export function requalificationProblems(
  manifest: DependentManifest,
  book: DependencyBook,
  now: number,
): Problem[] {
  const problems: Problem[] = [];
  (manifest.mutable_dependencies ?? []).forEach((dep, i) => {
    const d = dependencyDrift(dep, observationOf(book, manifest.model, dep.name), now);
    if (!d) return;
    const checks = d.checks.join(", ");
    if (d.observed !== null)
      problems.push({
        path: `mutable_dependencies.${i}.revision`,
        message: `mutable dependency ${d.name} (${d.kind}, owner ${d.owner}): ${changeWords({ ...d, expired: false })}`,
        fix: `Requalify it: set mutable_dependencies.${i}.revision to ${JSON.stringify(d.observed)} in the recipe and start it again; that release must pass the requalification checks ${checks} before it widens. Until then: ${d.fallback}`,
      });
    if (d.expired)
      problems.push({
        path: `mutable_dependencies.${i}.contract_expires`,
        message: `mutable dependency ${d.name} (${d.kind}, owner ${d.owner}): contract expired: it held through ${d.contract_expires}`,
        fix: `Renew the contract with ${d.owner}, set mutable_dependencies.${i}.contract_expires to its new last day and start the recipe again; that release must pass the requalification checks ${checks} before it widens. Until then: ${d.fallback}`,
      });
  });
  // A dependency in drift stays in drift when a recipe leaves it out: leaving it out is not a
  // requalification (the record would say the model was requalified when nothing was checked).
  const declared = new Set((manifest.mutable_dependencies ?? []).map((d) => d.name));
  const recorded = book.recorded.find((r) => r.model === manifest.model);
  for (const [name, was, observed, expired] of recordedDrift(recorded?.print ?? "")) {
    if (declared.has(name)) continue;
    const what = [
      observed !== null
        ? `its provider revision changed from ${JSON.stringify(was)} to ${JSON.stringify(observed)}`
        : "",
      expired ? "its contract expired" : "",
    ]
      .filter(Boolean)
      .join(" and ");
    problems.push({
      path: "mutable_dependencies",
      message: `mutable dependency ${name} of ${manifest.model} is in drift (${what}; recorded on release ${recorded?.release}), and this recipe no longer declares it: leaving it out does not requalify it`,
      fix: `Declare ${name} again in mutable_dependencies with the revision its probe observes${observed !== null ? ` (${JSON.stringify(observed)})` : ""} and a contract in force, and start again; once a release that declares it has succeeded (its requalification checks passed), a later recipe may leave it out.`,
    });
  }
  return problems;
}

/** The `[name, declared, observed, expired]` rows of a recorded drift print ("" none). */
function recordedDrift(print: string): [string, string, string | null, boolean][] {
  if (print === "") return [];
  try {
    const rows = JSON.parse(print) as unknown;
    return Array.isArray(rows)
      ? (rows.filter((r) => Array.isArray(r) && typeof r[0] === "string") as [
          string,
          string,
          string | null,
          boolean,
        ][])
      : [];
  } catch {
    return [];
  }
}
