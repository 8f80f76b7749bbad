/**
 * The contract check (docs/glossary.md): validation of a recipe, and of the step table compiled
 * from it, before anything runs. Every problem is reported at once, each with its path and fix,
 * so an author fixes a recipe in one round trip rather than one error per push.
 */

import { LaneId } from "../protocol/fields.ts";
import { GITHUB_DISPATCH_LIMITS } from "../protocol/messages.ts";
import { allowlistFix, TOOL_ALLOWLIST } from "./allowlist.ts";
import { analysisProblems } from "./analysis-check.ts";
import { CATALOGUE, runnerArgs, STEP_NAMES } from "./catalogue.ts";
import { conformanceProblems } from "./conformance.ts";
import { credentialToolProblems } from "./credentials.ts";
import { customStepProblems, hasIrreversibleCustomStep } from "./custom-steps.ts";
import { drillPolicyProblems } from "./drills.ts";
import type { Problem } from "./errors.ts";
import { asArray as arr, asObject as obj } from "./json.ts";
import { migrationProblems } from "./migration.ts";
import { dependencyProblems } from "./mutable-dependencies.ts";
import { Recipe } from "./recipe.ts";
import { schemaProblems } from "./schema-problems.ts";
import { shadowProblems } from "./shadow.ts";
import { escapeControls, unstorablePaths } from "./storable-text.ts";
import { strategyOf, strategyProblems } from "./strategy.ts";
import type { ManifestStep, StepAction } from "./types.ts";

/** Result of `checkRecipe`: the parsed recipe (defaults filled), or every problem found. */
export type RecipeCheck = { ok: true; recipe: Recipe } | { ok: false; problems: Problem[] };

/**
 * Checks a recipe already parsed from YAML/JSON (any value). Runs the schema and the
 * cross-field rules together, so problems of both kinds come back in one list; the
 * cross-field rules read only the parts of `input` that are well typed. Never throws.
 */
export function checkRecipe(input: unknown): RecipeCheck {
  const parsed = Recipe.safeParse(input);
  const schema = parsed.success
    ? []
    : schemaProblems(Recipe, parsed.error.issues, input).map((p) => unsafeAfterSchemaFix(p, input));
  // One problem per field: a NUL in a lane id is told by the id's own rule (naming the
  // character and its position), not a second time as unstorable text.
  const schemaPaths = new Set(schema.map((p) => p.path));
  const problems = [
    ...unstorablePaths(input)
      .filter((path) => !schemaPaths.has(path))
      .map((path) => ({
        path,
        message:
          "holds a NUL character or a lone UTF-16 surrogate, which no store can keep as written",
        fix: "Remove the control character (recipes are plain UTF-8 text).",
      })),
    ...schema,
    ...crossFieldProblems(input),
    ...strategyProblems(input),
    ...recoveryProblems(input),
    ...customStepProblems(input),
    ...migrationProblems(input),
    ...conformanceProblems(input),
    ...shadowProblems(input),
    ...analysisProblems(input),
    ...dependencyProblems(input),
    ...drillPolicyProblems(input),
    ...credentialToolProblems(input, TOOL_ALLOWLIST),
    ...(parsed.success ? dispatchSizeProblems(parsed.data) : []),
  ];
  if (parsed.success && problems.length === 0) return { ok: true, recipe: parsed.data };
  // Problems echo what the recipe holds; a NUL or an escape sequence must not reach a terminal.
  return {
    ok: false,
    problems: problems.map((p) => ({
      ...p,
      path: escapeControls(p.path),
      message: escapeControls(p.message),
      fix: escapeControls(p.fix),
    })),
  };
}

const isPercent = (v: unknown): v is number =>
  typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 100;

const LANE_STEPS = CATALOGUE.filter((c) => c.scope === "lane").map((c) => c.name);
// A gate's check step is read-only: rollback after it is as safe as before it, so
// `unsafe_after` cannot name it.
const WAVE_STEPS = CATALOGUE.filter((c) => c.scope === "wave" || c.scope === "wave_start").map(
  (c) => c.name,
);

/** Lane ids and wave count of a recipe as given (only the well-typed parts are read). */
function unsafeAfterScope(input: unknown): { lanes: string[]; waves: number } {
  const root = obj(input);
  return {
    lanes: arr(root?.lanes)
      .map((l) => obj(l)?.id)
      .filter((x): x is string => typeof x === "string"),
    waves: arr(obj(root?.rollout)?.waves).length,
  };
}

/** The lane ids of the recipe as a phrase, or a placeholder when it has none yet. */
function laneChoices(lanes: string[]): string {
  return lanes.length > 0 ? lanes.join(", ") : "<a lane id of the recipe>";
}

/** The wave numbers `unsafe_after.wave` can take, as a phrase (`1 to 3`, `1`). */
function waveChoices(waves: number): string {
  return waves > 1 ? `1 to ${waves}` : "1";
}

/**
 * What `unsafe_after` can be, with this recipe's lanes and waves: the two forms, the step names
 * each takes, and a concrete example of each (for a fix text).
 */
function unsafeAfterForms(input: unknown): string {
  const { lanes, waves } = unsafeAfterScope(input);
  return `\`unsafe_after: {step: attach_queue_lane, lane: ${lanes[0] ?? "<lane id>"}}\` (a lane step, one of ${LANE_STEPS.join(", ")}; \`lane\` one of ${laneChoices(lanes)}) or \`unsafe_after: {step: set_traffic, wave: 1}\` (a wave step, one of ${WAVE_STEPS.join(", ")}; \`wave\` ${waveChoices(waves)}, 1 = the first wave)`;
}

/**
 * A schema problem under `unsafe_after` with a fix that names the exact field and what to write
 * there (the step names, this recipe's lanes or waves); other problems are returned as given.
 */
function unsafeAfterSchemaFix(p: Problem, input: unknown): Problem {
  const { lanes, waves } = unsafeAfterScope(input);
  const given = obj(obj(input)?.unsafe_after);
  const step = typeof given?.step === "string" ? given.step : null;
  switch (p.path) {
    case "unsafe_after": {
      const raw = obj(input)?.unsafe_after;
      // A bare step name: show it in the mapping it belongs in.
      const named = typeof raw === "string" ? CATALOGUE.find((c) => c.name === raw) : undefined;
      const example = named
        ? named.scope === "lane"
          ? ` e.g. \`unsafe_after: {step: ${named.name}, lane: ${lanes[0] ?? "<lane id>"}}\` (\`lane\` one of ${laneChoices(lanes)})`
          : ` e.g. \`unsafe_after: {step: ${named.name}, wave: 1}\` (\`wave\` ${waveChoices(waves)})`
        : ` ${unsafeAfterForms(input)}`;
      return {
        ...p,
        fix: `Write \`unsafe_after\` as a mapping of the step after which rollback is unsafe:${example}.`,
      };
    }
    case "unsafe_after.step":
      return {
        ...p,
        fix: `Set \`unsafe_after.step\` to a step name: a lane step (${LANE_STEPS.join(", ")}) with \`unsafe_after.lane\` (one of ${laneChoices(lanes)}), or a wave step (${WAVE_STEPS.join(", ")}) with \`unsafe_after.wave\` (${waveChoices(waves)}).`,
      };
    case "unsafe_after.lane":
      return {
        ...p,
        fix: `Set \`unsafe_after.lane\` to one of ${laneChoices(lanes)} (a lane id of this recipe, as text), e.g. \`unsafe_after: {step: ${step ?? "attach_queue_lane"}, lane: ${lanes[0] ?? "<lane id>"}}\`.`,
      };
    case "unsafe_after.wave":
      return {
        ...p,
        fix: `Set \`unsafe_after.wave\` to a whole wave number, ${waveChoices(waves)} (1 = the first wave), e.g. \`unsafe_after: {step: ${step ?? "set_traffic"}, wave: 1}\`.`,
      };
    default:
      return p;
  }
}

/**
 * The recovery class's fields (docs/recipes.md "Recovery class"): `unsafe_after` is given with
 * `roll_forward_only` and only then, and names a step of the table (a lane step with a lane of
 * the recipe, a wave step with a wave of the rollout); `restore` goes with `recoverable`.
 */
function recoveryProblems(input: unknown): Problem[] {
  const root = obj(input);
  if (!root) return [];
  const problems: Problem[] = [];
  const cls = root.recovery_class;
  const after = obj(root.unsafe_after);
  // An irreversible custom step is a roll-forward point of its own: unsafe_after is optional.
  if (
    cls === "roll_forward_only" &&
    root.unsafe_after === undefined &&
    !hasIrreversibleCustomStep(input)
  ) {
    problems.push({
      path: "unsafe_after",
      message: "recovery_class roll_forward_only needs the step after which rollback is unsafe",
      fix: `Add ${unsafeAfterForms(input)}.`,
    });
  }
  if (cls !== "roll_forward_only" && root.unsafe_after !== undefined) {
    problems.push({
      path: "unsafe_after",
      message: `unsafe_after is only read with recovery_class roll_forward_only (this recipe's class is ${typeof cls === "string" ? cls : "reversible, the default"})`,
      fix: "Set `recovery_class: roll_forward_only`, or remove `unsafe_after`.",
    });
  }
  if (cls === "recoverable" && root.restore === undefined && root.restore_state === undefined) {
    problems.push({
      path: "restore",
      message:
        "recovery_class recoverable needs the restore action that must follow a traffic rollback",
      fix: 'Add `restore_state: {tool: <allowlisted restore tool>}` (the engine runs it), or `restore: "<what to run after the rollback, e.g. restore the feature store snapshot with ./ops/restore-fs.sh>"` (an operator runs it and confirms), or declare `recovery_class: reversible` if traffic rollback alone restores service.',
    });
  }
  if (cls !== "recoverable" && root.restore_state !== undefined) {
    problems.push({
      path: "restore_state",
      message: `restore_state is only read with recovery_class recoverable (this recipe's class is ${typeof cls === "string" ? cls : "reversible, the default"})`,
      fix: "Set `recovery_class: recoverable`, or remove `restore_state`.",
    });
  }
  const restoreTool = obj(root.restore_state)?.tool;
  if (typeof restoreTool === "string" && !TOOL_ALLOWLIST.includes(restoreTool)) {
    problems.push({
      path: "restore_state.tool",
      message: `restore tool \`${restoreTool}\` is not in the allowlist`,
      fix: allowlistFix(restoreTool),
    });
  }
  if (cls !== "recoverable" && root.restore !== undefined) {
    problems.push({
      path: "restore",
      message: `restore is only read with recovery_class recoverable (this recipe's class is ${typeof cls === "string" ? cls : "reversible, the default"})`,
      fix: "Set `recovery_class: recoverable`, or remove `restore`.",
    });
  }
  if (!after || cls !== "roll_forward_only") return problems;
  const row = CATALOGUE.find((c) => c.name === after.step);
  if (typeof after.step === "string" && !row) {
    problems.push({
      path: "unsafe_after.step",
      message: `\`${after.step}\` is not a step of the step table`,
      fix: `Set \`unsafe_after.step\` to a step of the table: a lane step (${LANE_STEPS.join(", ")}) with \`unsafe_after.lane\`, or a wave step (${WAVE_STEPS.join(", ")}) with \`unsafe_after.wave\`.`,
    });
    return problems;
  }
  if (!row) return problems;
  if (row.scope === "check") {
    problems.push({
      path: "unsafe_after.step",
      message: `${row.name} is a gate's read-only check: rollback after it is as safe as before it`,
      fix: `Set \`unsafe_after.step\` to the step that changes something rollback cannot undo: a lane step (${LANE_STEPS.join(", ")}) with \`unsafe_after.lane\`, or a wave step (${WAVE_STEPS.join(", ")}) with \`unsafe_after.wave\`.`,
    });
    return problems;
  }
  if (row.scope === "lane") {
    const ids = arr(root.lanes)
      .map((l) => obj(l)?.id)
      .filter((x): x is string => typeof x === "string");
    if (after.lane === undefined) {
      problems.push({
        path: "unsafe_after.lane",
        message: `${row.name} is a lane step: it runs once per lane, so unsafe_after must say which lane`,
        fix: `Add \`unsafe_after.lane\`: one of ${laneChoices(ids)}, e.g. \`unsafe_after: {step: ${row.name}, lane: ${ids[0] ?? "<lane id>"}}\`.`,
      });
    } else if (typeof after.lane === "string" && !ids.includes(after.lane)) {
      problems.push({
        path: "unsafe_after.lane",
        message: `lane \`${after.lane}\` is not a lane of this recipe`,
        fix: `Set \`unsafe_after.lane\` to one of ${laneChoices(ids)}.`,
      });
    }
    if (after.wave !== undefined) {
      problems.push({
        path: "unsafe_after.wave",
        message: `${row.name} is a lane step: its wave is the lane's`,
        fix: `Remove \`unsafe_after.wave\` and name the lane in \`unsafe_after.lane\` (one of ${laneChoices(ids)}).`,
      });
    }
  } else {
    const n = arr(obj(root.rollout)?.waves).length;
    if (after.wave === undefined) {
      problems.push({
        path: "unsafe_after.wave",
        message: `${row.name} is a wave step: it runs once per wave, so unsafe_after must say which wave`,
        fix: `Add \`unsafe_after.wave\`: ${waveChoices(n)} (1 = the first wave), e.g. \`unsafe_after: {step: ${row.name}, wave: 1}\`.`,
      });
    } else if (typeof after.wave === "number" && after.wave > n) {
      problems.push({
        path: "unsafe_after.wave",
        message: `wave ${after.wave} does not exist: the rollout has ${n} wave(s)`,
        fix: `Set \`unsafe_after.wave\` to a wave of the rollout: ${waveChoices(n)} (1 = the first wave).`,
      });
    }
    if (after.lane !== undefined) {
      problems.push({
        path: "unsafe_after.lane",
        message: `${row.name} is a wave step, not a lane step`,
        fix: `Remove \`unsafe_after.lane\` and name the wave in \`unsafe_after.wave\` (${waveChoices(n)}).`,
      });
    }
  }
  return problems;
}

/** Rules across fields: lane ids, wave membership, traffic order, baseline weights. */
function crossFieldProblems(input: unknown): Problem[] {
  const root = obj(input);
  if (!root) return [];
  const problems: Problem[] = [];
  const lanes = arr(root.lanes).map((l) => obj(l));

  // The same digest twice is a no-op rollout, almost always a forgotten edit.
  const digestOf = (v: unknown) =>
    typeof v === "string" ? /@sha256:([a-f0-9]{64})$/.exec(v)?.[1] : undefined;
  const newDigest = digestOf(root.image);
  if (newDigest !== undefined && newDigest === digestOf(root.previous_image)) {
    problems.push({
      path: "previous_image",
      message: "image and previous_image are the same digest, so the rollout changes nothing",
      fix: "Set `image` to the new build's digest and `previous_image` to the digest the lanes run now.",
    });
  }

  // Lane ids: unique. An id that is not a lane id (a NUL, a look-alike letter…) has its own
  // problem at lanes.N.id and takes no part in the rules below: fixing it may be all the wave
  // that names it needs, so no "unknown lane" or "in no wave" on top (one problem per field).
  const firstIndex = new Map<string, number>();
  let badIds = 0;
  lanes.forEach((lane, i) => {
    const id = lane?.id;
    if (typeof id !== "string") return;
    if (!LaneId.safeParse(id).success) {
      badIds++;
      return;
    }
    const j = firstIndex.get(id);
    if (j === undefined) firstIndex.set(id, i);
    else {
      problems.push({
        path: `lanes.${i}.id`,
        message: `duplicate lane id \`${id}\` (also lanes.${j})`,
        fix: "Give every lane its own id; to deploy one machine twice, list it once.",
      });
    }
  });
  const known = [...firstIndex.keys()];

  // Baseline weights: on every lane or none; they sum to 100.
  const weights = lanes.map((l) => l?.weight);
  const given = weights.filter((w) => w !== undefined).length;
  if (given > 0 && given < lanes.length) {
    problems.push({
      path: "lanes",
      message: `weight is given on ${given} of ${lanes.length} lanes`,
      fix: "Give `weight` (baseline traffic %) on every lane or on none (none = equal split).",
    });
  } else if (given > 0 && weights.every(isPercent)) {
    const sum = (weights as number[]).reduce((a, b) => a + b, 0);
    if (sum !== 100) {
      problems.push({
        path: "lanes",
        message: `baseline weights sum to ${sum}, not 100`,
        fix: "Set each lane's `weight` to the % of traffic it carries now, so that they add up to 100.",
      });
    }
  }

  // Waves: each known lane in exactly one wave; traffic absolute, never decreasing, ends at 100.
  const waves = arr(obj(root.rollout)?.waves).map((w) => obj(w));
  const waveOf = new Map<string, number>();
  const deployed = new Set<string>();
  let prev: { traffic: number; wave: number } | undefined;
  waves.forEach((wave, w) => {
    arr(wave?.lanes).forEach((id, k) => {
      if (typeof id !== "string") return;
      const path = `rollout.waves.${w}.lanes.${k}`;
      if (known.length > 0 && !firstIndex.has(id)) {
        if (badIds > 0) return;
        problems.push({
          path,
          message: `wave ${w + 1} names unknown lane \`${id}\``,
          fix: `Use one of the lane ids (${known.join(", ")}), or add the lane under \`lanes\`.`,
        });
        return;
      }
      const other = waveOf.get(id);
      if (other !== undefined) {
        problems.push({
          path,
          message: `lane \`${id}\` is already in wave ${other + 1}`,
          fix: "Deploy each lane in exactly one wave: remove this entry or the earlier one.",
        });
        return;
      }
      waveOf.set(id, w);
      deployed.add(id);
    });
    const traffic = wave?.traffic;
    // Under rolling and blue_green the compiler derives the percents (strategy.ts).
    if (!isPercent(traffic) || strategyOf(input) !== "canary") return;
    const isLast = w === waves.length - 1;
    if (prev && traffic < prev.traffic) {
      problems.push({
        path: `rollout.waves.${w}.traffic`,
        message: `traffic goes down from ${prev.traffic}% (wave ${prev.wave + 1}) to ${traffic}% (wave ${w + 1})`,
        fix: `Traffic is absolute and may only stay or rise: use ${prev.traffic} or more here. A failed step undoes traffic by itself.`,
      });
    }
    if (isLast && traffic !== 100) {
      problems.push({
        path: `rollout.waves.${w}.traffic`,
        message: `the last wave sets traffic to ${traffic}%, so the rollout never completes`,
        fix: "End the rollout with `traffic: 100` on the last wave.",
      });
    } else if (
      !isLast &&
      badIds === 0 &&
      known.length > 0 &&
      deployed.size >= known.length &&
      traffic < 100
    ) {
      problems.push({
        path: `rollout.waves.${w}.traffic`,
        message: `after wave ${w + 1} every lane runs the new image, but ${100 - traffic}% of traffic is meant for stable lanes and none remain`,
        fix: "Set `traffic: 100` on the wave that deploys the last lane, or move a lane to a later wave.",
      });
    }
    prev = { traffic, wave: w };
  });
  // Under blue_green the lanes in no wave are the blue environment (strategy.ts).
  for (const id of strategyOf(input) === "blue_green" ? [] : known) {
    if (waves.length > 0 && !waveOf.has(id)) {
      problems.push({
        path: `lanes.${firstIndex.get(id)}.id`,
        message: `lane \`${id}\` is in no wave`,
        fix: `Add \`${id}\` to a wave under rollout.waves, or remove the lane.`,
      });
    }
  }
  return problems;
}

/**
 * Bytes a dispatch payload holds besides the runner `args`: version, release id, step run id,
 * operation key, callback and preflight URLs, tool name, deadlines, dispatch sequence. 2 KiB
 * is several times what those take with the engine's ids and a 200-character public URL.
 */
export const DISPATCH_OVERHEAD_BYTES = 2048;
/** Largest runner `args` JSON (bytes, UTF-8) that keeps a dispatch under GitHub's 64 KiB. */
export const MAX_RUNNER_ARGS_BYTES =
  GITHUB_DISPATCH_LIMITS.client_payload_max_bytes - DISPATCH_OVERHEAD_BYTES;

const utf8 = new TextEncoder();
const bytes = (v: unknown) => utf8.encode(JSON.stringify(v) ?? "").length;

/**
 * Every runner step of a lane carries `{lane: {id, host, port, user, host_key, queue,
 * health_url}, image, previous_image}` (catalogue `runnerArgs`) in its dispatch payload; GitHub
 * refuses a `client_payload` over 64 KiB (GITHUB_DISPATCH_LIMITS), which would surface only as
 * `dispatch_failed` mid-rollout. Names the largest field of each lane whose args are too big.
 */
function dispatchSizeProblems(recipe: Recipe): Problem[] {
  const problems: Problem[] = [];
  recipe.lanes.forEach((lane, i) => {
    const args = runnerArgs(lane, recipe.image, recipe.previous_image);
    const fields = args.lane as Record<string, unknown>;
    const size = bytes(args);
    if (size <= MAX_RUNNER_ARGS_BYTES) return;
    const candidates: [string, number][] = [
      ...Object.entries(fields).map(([k, v]): [string, number] => [`lanes.${i}.${k}`, bytes(v)]),
      ["image", bytes(recipe.image)],
      ["previous_image", bytes(recipe.previous_image)],
    ];
    const [path, largest] = candidates.reduce((a, b) => (b[1] > a[1] ? b : a));
    problems.push({
      path,
      message: `lane \`${lane.id}\`'s runner steps would dispatch ${size + DISPATCH_OVERHEAD_BYTES} bytes, over GitHub's ${GITHUB_DISPATCH_LIMITS.client_payload_max_bytes}-byte client_payload limit; \`${path}\` alone is ${largest} bytes`,
      fix: `Shorten \`${path}\`: a lane's fields and both images must stay under ${MAX_RUNNER_ARGS_BYTES} bytes of JSON together.`,
    });
  });
  return problems;
}

const ROWS = new Map(CATALOGUE.map((r) => [r.name, r]));

/**
 * Checks a compiled step table (also used on hand-made tables in tests): indexes in order,
 * catalogue names (or a recipe's custom step), every mutating step has a backward step unless it
 * is an irreversible custom step, and no assertion has one, runner
 * tools in `allowlist`, and unique operation keys (`{step}:{direction}:{target}`; the release
 * part is the same for the whole table). Returns every problem; paths are `steps.<i>.<field>`.
 */
export function checkStepTable(
  steps: readonly ManifestStep[],
  allowlist: readonly string[] = TOOL_ALLOWLIST,
): Problem[] {
  const problems: Problem[] = [];
  const keys = new Map<string, number>();
  const effects = new Map<string, number>();
  const checkAction = (i: number, dir: "forward" | "backward", a: StepAction) => {
    const at = `steps.${i}.${dir}`;
    if (a.kind === "runner" && !allowlist.includes(a.tool)) {
      problems.push({
        path: `${at}.tool`,
        message: `runner tool \`${a.tool}\` is not in the allowlist`,
        fix: allowlistFix(a.tool, allowlist),
      });
    }
    if (a.kind === "runner") {
      const size = bytes(a.args) + DISPATCH_OVERHEAD_BYTES;
      if (size > GITHUB_DISPATCH_LIMITS.client_payload_max_bytes) {
        problems.push({
          path: `${at}.args`,
          message: `the dispatch payload would be about ${size} bytes, over GitHub's ${GITHUB_DISPATCH_LIMITS.client_payload_max_bytes}-byte client_payload limit`,
          fix: "Shorten the lane's fields or the image references in the recipe.",
        });
      }
    }
    if (!/^[^\s]{1,200}$/.test(a.target)) {
      problems.push({
        path: `${at}.target`,
        message: `operation key target \`${a.target}\` is empty, too long or has spaces`,
        fix: "Build targets with the catalogue's action builders (e.g. `traffic=10`).",
      });
      return;
    }
    const key = `${steps[i]?.index}:${dir === "forward" ? "fwd" : "bwd"}:${a.target}`;
    const other = keys.get(key);
    if (other !== undefined) {
      problems.push({
        path: `${at}.target`,
        message: `operation key \`<release>:${key}\` is also used by steps.${other}`,
        fix: "Give each effect its own key: number steps uniquely and recompile the recipe.",
      });
    } else keys.set(key, i);
  };
  steps.forEach((step, i) => {
    if (step.index !== i) {
      problems.push({
        path: `steps.${i}.index`,
        message: `step at position ${i} has index ${step.index}`,
        fix: "Number steps 0..n-1 in table order; recompile the recipe rather than editing a manifest.",
      });
    }
    const row = ROWS.get(step.name as never);
    // A recipe's custom step (docs/recipes.md "Custom steps") is named by the recipe.
    const custom = step.custom !== undefined;
    if (!row && !custom) {
      problems.push({
        path: `steps.${i}.name`,
        message: `step \`${step.name}\` is not in the catalogue`,
        fix: `Use a catalogue step: ${STEP_NAMES.join(", ")}.`,
      });
    }
    if (step.forward.kind !== step.kind) {
      problems.push({
        path: `steps.${i}.kind`,
        message: `step kind \`${step.kind}\` differs from its forward action's \`${step.forward.kind}\``,
        fix: "Set the step's kind to where its forward action runs.",
      });
    }
    const assertion = step.name.startsWith("assert_");
    if (custom && step.kind !== "runner") {
      problems.push({
        path: `steps.${i}.kind`,
        message: `custom step ${i + 1} (\`${step.name}\`) is not a runner step`,
        fix: "Custom steps run allowlisted runner tools; recompile the recipe rather than editing a manifest.",
      });
    }
    if (custom && step.custom?.irreversible === true && step.backward !== null) {
      problems.push({
        path: `steps.${i}.backward`,
        message: `irreversible custom step ${i + 1} (\`${step.name}\`) has a backward step`,
        fix: "An irreversible step has nothing compensation can run: remove its backward action, or drop `irreversible`.",
      });
    }
    if (!assertion && step.backward === null && step.custom?.irreversible !== true) {
      problems.push({
        path: `steps.${i}.backward`,
        message: `step ${i + 1} (\`${step.name}\`) changes state but has no backward step`,
        fix: "Give it its compensating action from the catalogue (e.g. exclude_lane ↔ include_lane), or make it a read-only assert_* step.",
      });
    }
    if (assertion && step.backward !== null) {
      problems.push({
        path: `steps.${i}.backward`,
        message: `assertion step ${i + 1} (\`${step.name}\`) has a backward step`,
        fix: "Assertions change nothing, so they have nothing to undo: remove the backward action.",
      });
    }
    checkAction(i, "forward", step.forward);
    if (step.backward) checkAction(i, "backward", step.backward);
    if (step.lane !== null && !assertion) {
      const effect = `${step.forward.name}|${step.forward.target}`;
      const j = effects.get(effect);
      if (j !== undefined) {
        problems.push({
          path: `steps.${i}.forward.target`,
          message: `step ${i + 1} repeats the effect of step ${j + 1} (\`${step.forward.name}\` ${step.forward.target})`,
          fix: "Deploy each lane once per release: a lane belongs to exactly one wave.",
        });
      } else effects.set(effect, i);
    }
  });
  return problems;
}
