/**
 * Mutable dependencies (docs/recipes.md "Mutable dependencies", docs/drift.md): parts of a
 * model's service that have no byte identity — a hosted model API, a live tool, a changing
 * corpus. A recipe declares each with its owner, the provider revision it was qualified
 * against, the contract's expiry, a probe that reports the provider's current revision, the
 * gate checks that requalify it, and a fallback. The engine probes on the drift schedule
 * (service/dependency-probes.ts); a changed revision or an expired contract is drift, and a
 * start that declares a revision other than the observed one, or an expired contract, is
 * refused until the recipe is requalified.
 *
 * Pure: the schema, the contract check's cross-field rules, the drift judgement, the start's
 * refusal and the history entries. No clock, no I/O: `now` is passed in.
 */
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";
import type { Problem } from "./errors.ts";
import { asArray as arr, asObject as obj } from "./json.ts";

/** What a mutable dependency is. */
export const DEPENDENCY_KINDS = ["hosted_model", "tool", "corpus"] as const;
export type DependencyKind = (typeof DEPENDENCY_KINDS)[number];

/** Most mutable dependencies one recipe declares. */
export const MAX_DEPENDENCIES = 16;
/** Longest provider revision kept (characters); a longer probe answer is an error. */
export const MAX_REVISION = 256;

const NAME = /^[a-z][a-z0-9_-]{0,62}$/;
const OWNER = /^[A-Za-z0-9][A-Za-z0-9 ._@+/-]{0,127}$/;
/** Printable, no control characters: what a terminal and both stores show as written. */
const REVISION = /^\P{Cc}{1,256}$/u;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const FIELD = /^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$/;
const CHECK = /^[a-z][a-z0-9_-]{0,62}$/;

/** Hosts a plain `http://` probe may name: the engine's own machine (tests, side-cars). */
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** Epoch ms at which a contract that holds through `date` (YYYY-MM-DD, UTC) has expired. */
export function contractExpiresAt(date: string): number {
  const m = DATE.exec(date);
  if (!m) return Number.NaN;
  return Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]) + 1);
}

/** True when `date` is a real calendar day written YYYY-MM-DD. */
function isDay(date: string): boolean {
  const m = DATE.exec(date);
  if (!m) return false;
  const t = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return t.toISOString().slice(0, 10) === date;
}

/** Why `url` cannot be a probe URL, or null when it can. */
function probeUrlProblem(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "is not an absolute URL";
  }
  if (u.username || u.password) return "carries credentials";
  if (u.protocol === "https:") return null;
  if (u.protocol === "http:" && LOOPBACK.has(u.hostname)) return null;
  return u.protocol === "http:"
    ? "uses plain http to a host other than the engine's own machine"
    : `uses ${u.protocol.replace(/:$/, "")}, not https`;
}

/**
 * How the engine learns the provider's current revision: an HTTPS GET (plain http only to
 * 127.0.0.1, localhost or [::1]) answered 2xx within the probe timeout. With `field`, the body
 * is JSON and the revision is the string or number at that dotted path; without it, the body's
 * text, trimmed.
 */
export const DependencyProbeSpec = lazySchema(() =>
  z
    .object({
      url: z
        .string()
        .max(2000, "probe.url must be at most 2000 characters")
        .superRefine((url, ctx) => {
          const p = probeUrlProblem(url);
          if (p)
            ctx.addIssue({
              code: "custom",
              message: `probe.url ${p}: give an https URL whose answer is the provider's revision (plain http only to 127.0.0.1, localhost or [::1]), with no user or password in it`,
            });
        })
        .describe(
          "URL the engine GETs on the drift schedule; its answer is the provider's current revision. https (plain http only to the engine's own machine), no credentials in it.",
        ),
      field: z
        .string()
        .regex(
          FIELD,
          "probe.field must be a dotted path of JSON member names, e.g. model.revision (letters, digits, '_' or '-'; at most 8 parts)",
        )
        .optional()
        .describe(
          "Dotted path of the revision in the probe's JSON answer (e.g. model.revision); absent: the answer's text, trimmed.",
        ),
    })
    .strict(),
);
export type DependencyProbeSpec = z.infer<typeof DependencyProbeSpec>;

/** One mutable dependency as a recipe declares it (and its manifest keeps it). */
export const MutableDependency = lazySchema(() =>
  z
    .object({
      name: z
        .string()
        .regex(
          NAME,
          "name must be lowercase letters, digits, '_' or '-', starting with a letter (≤ 63)",
        )
        .describe("Name of the dependency, unique in the recipe, e.g. summarizer-api."),
      kind: z
        .enum(DEPENDENCY_KINDS, {
          error: `kind must be one of ${DEPENDENCY_KINDS.join(", ")}`,
        })
        .describe(
          "hosted_model (a provider's model API), tool (a live tool), corpus (changing data).",
        ),
      owner: z
        .string()
        .regex(
          OWNER,
          "owner must name who answers for the dependency: 1–128 letters, digits, spaces, '.', '_', '@', '+', '/' or '-'",
        )
        .describe("Who answers for the dependency and its contract (a person or team)."),
      revision: z
        .string()
        .regex(
          REVISION,
          `revision must be the provider's revision as its probe reports it: 1–${MAX_REVISION} printable characters`,
        )
        .describe(
          "The provider revision this recipe was qualified against, exactly as its probe reports it.",
        ),
      contract_expires: z
        .string()
        .refine(
          isDay,
          "contract_expires must be a calendar date written YYYY-MM-DD (quoted or not), e.g. 2027-03-31",
        )
        .describe(
          "Last day (UTC) the provider's contract holds; from the next day the dependency is expired.",
        ),
      probe: DependencyProbeSpec,
      requalification: z
        .object({
          checks: z
            .array(
              z
                .string()
                .regex(
                  CHECK,
                  "each requalification check is the name of a gate check, e.g. task-set",
                ),
            )
            .min(1, "requalification.checks names at least one gate check")
            .max(16, "requalification.checks names at most 16 gate checks"),
        })
        .strict()
        .describe(
          "The deterministic gate checks (`analysis.checks` names) a release must pass on a new revision or contract.",
        ),
      fallback: z
        .string()
        .min(1, "fallback must say what to do when the dependency cannot be used")
        .max(500, "fallback must be at most 500 characters")
        .describe(
          "What to do while the dependency cannot be used (e.g. the recipe of a self-hosted model, a runbook).",
        ),
    })
    .strict(),
);
export type MutableDependency = z.infer<typeof MutableDependency>;

/** The recipe's `mutable_dependencies` list. */
export const MutableDependencies = lazySchema(() =>
  z
    .array(MutableDependency)
    .max(MAX_DEPENDENCIES, `a recipe declares at most ${MAX_DEPENDENCIES} mutable dependencies`)
    .describe(
      "Parts without byte identity (hosted model, live tool, corpus): probed on the drift schedule; a new revision or an expired contract needs requalification.",
    ),
);

/** Names of the deterministic checks the recipe's gated waves run (as written). */
function gateCheckNames(root: Record<string, unknown>): Set<string> {
  const names = new Set<string>();
  const recipeAnalysis = obj(root.analysis);
  const waves = arr(obj(root.rollout)?.waves);
  for (const w of waves) {
    const wave = obj(w);
    const traffic = wave?.traffic;
    const own = wave?.analysis;
    if (own === false) continue;
    const ownObj = obj(own);
    const gated =
      ownObj !== undefined ||
      (typeof traffic === "number" && traffic > 0 && traffic < 100 && recipeAnalysis);
    if (!gated) continue;
    const checks = ownObj && "checks" in ownObj ? ownObj.checks : recipeAnalysis?.checks;
    for (const c of arr(checks)) {
      const n = obj(c)?.name;
      if (typeof n === "string") names.add(n);
    }
  }
  return names;
}

/**
 * Cross-field rules of `mutable_dependencies` (the schema checks each field): names are unique,
 * and every requalification check is a deterministic check a gated wave of the recipe runs.
 */
export function dependencyProblems(input: unknown): Problem[] {
  const root = obj(input);
  if (!root) return [];
  const deps = arr(root.mutable_dependencies);
  if (deps.length === 0) return [];
  const problems: Problem[] = [];
  const checks = gateCheckNames(root);
  const seen = new Map<string, number>();
  deps.forEach((d, i) => {
    const dep = obj(d);
    const name = dep?.name;
    if (typeof name === "string") {
      const j = seen.get(name);
      if (j !== undefined)
        problems.push({
          path: `mutable_dependencies.${i}.name`,
          message: `duplicate mutable dependency \`${name}\` (also mutable_dependencies.${j})`,
          fix: "Give each mutable dependency its own name: its observed revision is kept by model and name.",
        });
      else seen.set(name, i);
    }
    arr(obj(dep?.requalification)?.checks).forEach((c, k) => {
      if (typeof c !== "string" || checks.has(c)) return;
      problems.push({
        path: `mutable_dependencies.${i}.requalification.checks.${k}`,
        message: `requalification check \`${c}\` is not a check of any gated wave of this recipe${checks.size ? ` (its gates run ${[...checks].join(", ")})` : " (its gates run no checks)"}`,
        fix: `Add {name: ${c}, tool: <an allowlisted tool>} to \`analysis.checks\` (or a gated wave's own analysis), so every release of this recipe runs it before it widens, or name a check the gates already run.`,
      });
    });
  });
  return problems;
}

/**
 * The revision in a probe's answer: the trimmed text, or with `field` the string or number at
 * that dotted path of the JSON body. Returns the revision, or an error in words.
 */
export function revisionFromAnswer(
  body: string,
  field: string | undefined,
): { ok: true; revision: string } | { ok: false; message: string } {
  let value: unknown = body.trim();
  if (field !== undefined) {
    try {
      value = JSON.parse(body);
    } catch {
      return { ok: false, message: `the answer is not JSON, so it has no field ${field}` };
    }
    for (const part of field.split(".")) {
      const o = obj(value);
      if (!o || !Object.hasOwn(o, part))
        return { ok: false, message: `the answer has no field ${field}` };
      value = o[part];
    }
    if (typeof value === "number" && Number.isFinite(value)) value = String(value);
  }
  if (typeof value !== "string" || !REVISION.test(value))
    return {
      ok: false,
      message: `the revision${field ? ` at ${field}` : ""} is not 1–${MAX_REVISION} printable characters`,
    };
  return { ok: true, revision: value };
}
