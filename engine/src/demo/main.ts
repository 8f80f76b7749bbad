/**
 * `npm run demo` / `baton demo`: the embedded default end to end (docs/demo.md). Starts the
 * engine on SQLite, the reference control plane, the embedded SSH target and the local runner;
 * starts a release from recipes/example.yaml aimed at them; prints each step run as it ends;
 * exits 0 only when the release `succeeded`.
 *
 *   demo [--fail-at <step>] [--candidate-error-rate <r>] [--candidate-latency-ms <ms>]
 *        [--recipe <file>] [--data-dir <dir>] [--port <port>] [--serve] [--timeout <s>]
 *        [--record <file>]
 *
 * The reference router generates traffic and the release is gated (docs/gate.md): a recipe
 * without an `analysis:` section gets the demo's own (`DEMO_ANALYSIS`, seconds instead of
 * minutes), so each partial wave is held until the candidate is shown non-inferior.
 */

import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import type { AdmissionReport } from "../domain/admission.ts";
import { waveLabel } from "../domain/gate/waves.ts";
import { count } from "../domain/gate/words.ts";
import type { RecipeInput } from "../domain/recipe.ts";
import { TERMINAL_RELEASE_STATES } from "../domain/states.ts";
import { strategyOf } from "../domain/strategy.ts";
import type { ManifestStep, Release } from "../domain/types.ts";
import { suggestedCommand } from "../domain/verbs.ts";
import { makeDirs, proveWritable, unwritableFileProblem } from "../node/data-dir.ts";
import { compileRecipeInput } from "../recipes/compile-text.ts";
import { contractRecipe, phaseLines, seedMigrationTable, tableLines } from "./migration.ts";
import { ProgressPrinter, resolveStep, stepLabel } from "./progress.ts";
import { EXAMPLE_RECIPE, loadRecipe, type Stack, startStack } from "./stack.ts";

const USAGE = `usage: npm run demo -- [options]
  --fail-at <step>   make that runner step's health check fail, to show compensation:
                     the number of a lane's runner step as the dashboard shows it (with the
                     example recipe 3, 4, 11, 12, 19 or 20) or name:lane
                     (e.g. attach_queue_lane:lane-b)
  --candidate-error-rate <r>
                     share of the candidate's requests that fail in the router's traffic
                     (0..1, default 0.01 like the baseline); e.g. 0.05 fails the gate and
                     the release rolls back
  --candidate-latency-ms <ms>
                     ms added to every candidate request's latency in the router's traffic
                     and its latency histogram (default 0); e.g. 400 fails the gate's p99
                     metric and the release rolls back
  --recipe <file>    recipe to roll out (default recipes/example.yaml)
  --data-dir <dir>   keep the engine's SQLite file, the control plane, the sandbox, the
                     target's addresses and the demo's signing key here, for the next run
                     (default: a temporary folder, removed at the end)
  --port <port>      the engine's port (API and dashboard) on 127.0.0.1 (default: a free one)
  --serve            keep the engine and dashboard up after the release ends (Ctrl-C stops)
  --timeout <s>      give up after this many seconds (default 600)
  --record <file>    write the finished release's record (docs/record.md) to this file`;

/**
 * The gate the demo adds to a recipe without one: every wave between 1% and 99% is held until
 * the candidate's error rate is shown to be at most 50% above the baseline's serving beside it
 * (a relative margin, never under 0.5 points: at the demo's 1% baseline a candidate at twice
 * the error rate fails), with at least 1,000 requests per arm and 2 s of bake. Two guardrails
 * fail the wave when breached: the candidate's p99 latency certainly more than 100 ms above the
 * baseline's (anytime-valid, at the histogram's buckets' resolution), and its share of requests
 * slower than 1 s certainly more than 5 points above the baseline's. The router draws
 * `DEMO_UNITS_PER_S` units a second.
 */
/** Assignment units the demo's router draws a second while a gate is held. */
export const DEMO_UNITS_PER_S = 20_000;

export const DEMO_ANALYSIS: NonNullable<RecipeInput["analysis"]> = {
  assignment_unit: "request",
  alpha: 0.05,
  min_samples: 1000,
  bake_ms: 2000,
  interval_ms: 1000,
  max_wait_ms: 60_000,
  metrics: [
    { name: "error-rate", kind: "ratio", better: "lower", margin: { relative: 0.5, floor: 0.005 } },
    {
      name: "latency-p99",
      kind: "quantile",
      quantile: 0.99,
      margin: { ms: 100 },
      required: false,
    },
    {
      name: "slow-requests",
      kind: "latency",
      threshold_ms: 1000,
      margin: { absolute: 0.05 },
      required: false,
    },
  ],
};

/**
 * What the demo says when it adds `DEMO_ANALYSIS` to a recipe without `analysis:`: the gate,
 * in words, and how to change it. `aimed` is the file the demo wrote the recipe it started to.
 */
export function addedGateLines(aimed: string): string[] {
  const a = DEMO_ANALYSIS;
  const pts = (m: (typeof a.metrics)[number]["margin"]) =>
    m && "absolute" in m
      ? `${(m.absolute * 100).toFixed(1)} points`
      : m && "relative" in m
        ? `${count(m.relative * 100)}% (at least ${((m.floor ?? 0) * 100).toFixed(1)} points)`
        : m && "ms" in m
          ? `${count(m.ms)} ms`
          : m && "percent" in m
            ? `${count(m.percent)}%`
            : "its margin";
  const metrics = a.metrics.map((m) => {
    const what =
      m.kind === "latency"
        ? `${m.name} (over ${m.threshold_ms} ms)`
        : m.kind === "quantile"
          ? `${m.name} (the p${Math.round(m.quantile * 100)} latency)`
          : m.name;
    const role = m.required === false ? ", a guardrail" : "";
    return `${what} at most ${pts(m.margin)} worse than the baseline${role}`;
  });
  return [
    `[demo] gate added     the recipe has no analysis: section, so the demo gates each wave between 1% and 99% with its own: ${metrics.join("; ")}; at least ${count(a.min_samples ?? 0)} requests per arm, ${(a.bake_ms ?? 0) / 1000} s of bake, α ${a.alpha}, inconclusive after ${(a.max_wait_ms ?? 0) / 1000} s`,
    `[demo]                to change it: give the recipe an analysis: section of its own (or analysis: false for none; docs/gate.md) and pass it with --recipe; the recipe as started, this gate included, is ${aimed}`,
  ];
}

/** How often the demo's engine looks for drift once the release has ended, ms. */
export const DEMO_DRIFT_INTERVAL_MS = 5000;

/** Same as `runDemo` (the CLI's `demo` command looks for `main`). */
export const main = (argv: string[]) => runDemo(argv);

/**
 * Runs the demo. Resolves to the exit code: 0 when the release succeeded, 1 when it ended any
 * other way (or timed out), 2 for bad arguments. Prints to stdout; never throws.
 */
export async function runDemo(argv: string[]): Promise<number> {
  const t0 = Date.now();
  let args: ReturnType<typeof parse>;
  try {
    args = parse(argv);
  } catch (e) {
    console.error(`[demo] ${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
  // Check the recipe and --fail-at before starting anything (labels do not depend on hosts).
  let recipe: RecipeInput;
  let failStep: ManifestStep | null = null;
  let gateAdded = false;
  try {
    recipe = loadRecipe(args.recipe);
    // Blue-green never splits traffic between the arms: there is no wave to gate.
    if (recipe.analysis === undefined && strategyOf(recipe) !== "blue_green") {
      gateAdded = true;
      recipe = { ...recipe, analysis: structuredClone(DEMO_ANALYSIS) };
    }
    // --fail-at shows compensation: no one re-runs the failed job in a demo, so unless the
    // recipe sets a re-run window, the release compensates at once instead of waiting 30 min.
    if (args.failAt && recipe.policy?.rerun_window_minutes === undefined) {
      recipe = { ...recipe, policy: { ...recipe.policy, rerun_window_minutes: 0 } };
    }
    const planned = compileRecipeInput(recipe).manifest;
    if (args.failAt) failStep = resolveStep(planned, args.failAt);
  } catch (e) {
    console.error(describe(e));
    return 2;
  }
  // A --data-dir that cannot hold files, or a --record file that cannot be written, stops
  // here, before anything starts.
  const bad =
    (args.dataDir ? dataDirProblem(args.dataDir) : null) ??
    (args.record ? recordPathProblem("--record", args.record) : null);
  if (bad) {
    console.error(bad);
    return 2;
  }
  const dir = args.dataDir ?? mkdtempSync(join(tmpdir(), "baton-demo-"));
  let stack: Stack | null = null;
  let code = 1;
  let starting: Promise<Stack> | null = null;
  // What the interrupt line names: the release once started, and its last seen state.
  let id = "";
  let state = "";
  // `npm run demo` runs this process as `node --import tsx`, not under the tsx CLI: that CLI's
  // parent process relays a signal and SIGKILLs its child when the child's acknowledgement
  // misses a 30 ms window, which a signal to the whole group (npm, systemd, docker) races,
  // killing the demo mid-cleanup (test/e2e/demo-interrupt.test.ts, SIGTERM to the group).
  // Ctrl-C / SIGTERM at any time: the same cleanup as a normal end (the stand-in health servers
  // stopped, the temporary folder with the demo's signing key removed), then exit 130 / 143.
  // The handlers stay installed until the end: a terminal's Ctrl-C reaches this process twice
  // (directly and relayed by npm/tsx), and the second must not kill it mid-cleanup.
  let cleaning: Promise<void> | null = null;
  const cleanup = () =>
    (cleaning ??= (async () => {
      const s = stack ?? (await starting?.catch(() => null)) ?? null;
      await s?.close().catch(() => {});
      if (!args.dataDir) rmSync(dir, { recursive: true, force: true });
    })());
  let interrupted: NodeJS.Signals | null = null;
  let stopServing: (() => void) | null = null;
  const signalCode = (sig: NodeJS.Signals) => (sig === "SIGINT" ? 130 : 143);
  const onSignal = (sig: NodeJS.Signals) => {
    // --serve after the release ended: the normal stop (once; a group's signal comes twice).
    if (stopServing) {
      console.log(`[demo] ${sig}: stopping the engine and the stand-in; cleaning up`);
      const stop = stopServing;
      stopServing = () => {};
      return stop();
    }
    if (interrupted) return;
    interrupted = sig;
    console.log(
      `[demo] interrupted: ${id ? `release ${id} left ${state || "starting"}` : "no release started yet"}; cleaning up`,
    );
    void cleanup().finally(() => process.exit(signalCode(sig)));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    console.log(
      `[demo] data dir       ${dir} (${args.dataDir ? "kept" : "temporary: removed at the end, also on Ctrl-C"})`,
    );
    console.log(
      "[demo] starting the control plane, the SSH target, the local runner and the engine…",
    );
    starting = startStack({
      dir,
      recipe,
      admission: "sign",
      // Drift detection on, every 5 s (docs/drift.md): /metrics shows baton_drift_* under --serve.
      driftIntervalMs: DEMO_DRIFT_INTERVAL_MS,
      ...(args.port === undefined ? {} : { port: args.port }),
      ...(args.candidateErrorRate === undefined && args.candidateLatencyMs === undefined
        ? {}
        : {
            candidateProfile: {
              ...(args.candidateErrorRate === undefined
                ? {}
                : { errorRate: args.candidateErrorRate }),
              ...(args.candidateLatencyMs === undefined
                ? {}
                : { latencyAddMs: args.candidateLatencyMs }),
            },
          }),
    });
    stack = await starting;
    const { manifest } = stack;
    if (failStep) stack.failHealthAt(failStep.index);
    const t = stack.fleet.target;
    // First, so that a new user can open the release live while it runs.
    console.log(`[demo] dashboard      ${stack.url}/releases  (open it now to watch live)`);
    console.log(
      `[demo] sign in        ${stack.url}/login?next=/releases  with the operator token ${stack.operatorToken}`,
    );
    console.log(`[demo] engine         ${stack.url} (SQLite in ${join(dir, "engine")})`);
    console.log(`[demo] control plane  ${stack.fleet.cp.url} (model ${manifest.model})`);
    console.log(
      `[demo] SSH target     ${t.user}@${t.host}:${t.port} host key ${t.hostKeyPin}${stack.fleet.kept ? " (the address and host key of the last run on this data dir)" : ""}`,
    );
    for (const m of stack.fleet.moved) console.log(`[demo] warning        ${m}`);
    // The recipe as aimed at this fleet and the engine's address, for commands by hand.
    const aimed = join(dir, "recipe.yaml");
    writeFileSync(aimed, stringify(stack.recipe, { lineWidth: 0 }));
    const envFile = join(dir, "demo.env");
    writeFileSync(envFile, `BATON_ENGINE_URL=${stack.url}\nBATON_TOKEN=${stack.operatorToken}\n`, {
      mode: 0o600,
    });
    chmodSync(envFile, 0o600);
    console.log(
      `[demo] recipe         ${aimed} (the recipe as started, aimed at the embedded fleet: copy it to roll out another image)`,
    );
    console.log(
      `[demo] env            ${envFile} (BATON_ENGINE_URL and BATON_TOKEN for baton commands: set -a; . ${envFile}; set +a)`,
    );
    console.log(
      `[demo] lanes          ${manifest.lanes.map((l) => `${l.id} ${l.baseline_weight}%`).join(", ")} (running ${manifest.previous_image.split("@")[0]})`,
    );
    const gated = manifest.waves.flatMap((w, i) => (w.analysis ? [waveLabel(manifest, i)] : []));
    if (gateAdded) for (const line of addedGateLines(aimed)) console.log(line);
    if (gated.length > 0) {
      console.log(
        `[demo] gates        ${gated.join(", ")}: the router serves ${manifest.model} traffic; candidate error rate ${((args.candidateErrorRate ?? 0.01) * 100).toFixed(1)}% vs baseline 1.0%${args.candidateLatencyMs ? `, candidate latency +${count(args.candidateLatencyMs)} ms` : ""} (docs/gate.md)`,
      );
    }
    if (failStep) {
      console.log(
        `[demo] --fail-at: the health check of step ${failStep.index + 1} (${stepLabel(failStep)}) will fail; re-run window ${recipe.policy?.rerun_window_minutes ?? 30} min`,
      );
    }

    // A recipe with a migration: the table it backfills, on the SSH target (a real SQLite file).
    const sandbox = join(resolve(dir), "target");
    for (const line of seedMigrationTable(stack.recipe, sandbox)) console.log(line);
    const started = Date.now();
    // A release of an earlier run on this data dir that never ended (the demo was stopped while
    // it ran): the engine resumes it, and the demo follows it instead of being refused a new one.
    const earlier = (await stack.engine.service.list({ limit: 50 })).find(
      (r) => r.model === manifest.model && !TERMINAL_RELEASE_STATES.has(r.state as never),
    );
    if (earlier) {
      id = earlier.id;
      console.log(
        `[demo] resuming       release ${id} of an earlier run on this data dir is still ${earlier.state}: the engine resumes it and the demo follows it instead of starting another. To start afresh, abort it while the demo serves (BATON_ENGINE_URL=${stack.url} BATON_TOKEN=${stack.operatorToken} npx ${suggestedCommand("abort", { target: id })} --actor <you>) or use another --data-dir`,
      );
    } else {
      const res = await stack.api("/v1/releases", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: await stack.startBody(),
      });
      const body = (await res.json()) as {
        id?: string;
        error?: { message: string };
        admission?: AdmissionReport;
      };
      if (res.status !== 201 || !body.id) {
        throw new Error(
          `[demo] the engine refused the recipe (HTTP ${res.status}): ${body.error?.message ?? JSON.stringify(body)}`,
        );
      }
      id = body.id;
      if (body.admission) for (const line of admissionLines(body.admission)) console.log(line);
    }
    console.log(`[demo] watch live     ${stack.url}/releases/${id}`);
    console.log(
      `[demo] release ${id}: ${manifest.recipe_name}, ${manifest.steps.length} steps, ${manifest.lanes.length} lanes, tool revision ${manifest.tool_revision?.slice(0, 12) ?? "(not pinned)"}`,
    );
    console.log(`   #  step                               dir  attempt  result     duration`);

    const printer = new ProgressPrinter();
    let deadline = started + args.timeoutS * 1000;
    const endLines: string[] = [];
    let gateSeen = "";
    // The gate evaluations printed (generation:wave:seq).
    const evaluationsSaid = new Set<string>();
    // The waiting state (paused, needs_operator) whose how-to-resume lines were printed.
    let waitingSaid = "";
    for (;;) {
      if (interrupted) throw new Error("interrupted");
      const record = await stack.engine.service.get(id);
      const ended = TERMINAL_RELEASE_STATES.has(record.release.state as never);
      const g = record.release.gate;
      const mark = g ? `${g.wave}:${g.seq}` : "";
      // Every evaluation the store holds, once each, among the step lines by time: the engine
      // can make several between two polls, a passing one lets the next steps run before the
      // next poll (and its gate may be gone from the release by then), and the summary counts
      // them all.
      const evaluations: { at: number; text: string }[] = [];
      if (mark !== gateSeen || ended) {
        for (const e of await stack.engine.store.listEvidence(id)) {
          const key = `${e.generation}:${e.wave}:${e.seq}`;
          if (evaluationsSaid.has(key)) continue;
          evaluationsSaid.add(key);
          evaluations.push({
            at: e.at,
            text: `[demo] gate ${waveLabel(manifest, e.wave)} evaluation ${e.seq}: ${e.decision}: ${e.reason}`,
          });
        }
      }
      for (const line of printer.update(record.release, evaluations)) {
        // The terminal state's line comes last, after the gates' summary (below the loop).
        if (ended && /^\[demo\] release \S+ is /.test(line)) endLines.push(line);
        else console.log(line);
      }
      // The router serves traffic while a gate is being evaluated (DEMO_UNITS_PER_S).
      const serving = g !== undefined && g !== null && g.decision !== "inconclusive";
      if (serving && !gateSeen) stack.traffic.start(DEMO_UNITS_PER_S / 10, 100);
      if (!serving && gateSeen) stack.traffic.stop();
      gateSeen = mark;
      state = record.release.state;
      if (TERMINAL_RELEASE_STATES.has(record.release.state as never)) break;
      // Paused or waiting for an operator is not the end: someone resumes it. Under --serve the
      // demo keeps serving and following (the router's traffic for the gates included), and the
      // wait for a person does not count against --timeout; without --serve the engine stops.
      const waiting = state === "needs_operator" || state === "paused";
      if (waiting && waitingSaid !== state) {
        for (const line of waitingLines(stack, record.release, args.serve)) console.log(line);
      }
      waitingSaid = waiting ? state : "";
      if (waiting && !args.serve) break;
      if (waiting) deadline = Date.now() + args.timeoutS * 1000;
      if (Date.now() > deadline) {
        console.log(`[demo] gave up after ${args.timeoutS} s; release ${id} is ${state}`);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const releaseMs = Date.now() - started;
    for (const line of await gateLines(stack, id)) console.log(line);
    for (const line of endLines) console.log(line);
    console.log(
      `[demo] release ${id} ended ${state} in ${(releaseMs / 1000).toFixed(1)} s (wall time ${((Date.now() - t0) / 1000).toFixed(1)} s)`,
    );
    if (stack.recipe.migration) {
      const doc = await stack.engine.service.releaseRecord(id);
      for (const line of phaseLines(doc)) console.log(line);
      for (const line of tableLines(stack.recipe, sandbox, state)) console.log(line);
      if (state === "succeeded") for (const line of await contractLines(stack)) console.log(line);
    }
    if (args.record) {
      const doc = await stack.engine.service.releaseRecord(id);
      writeFileSync(args.record, `${JSON.stringify(doc, null, 2)}\n`);
      console.log(
        `[demo] record         ${args.record} (digest ${doc.digest ?? "none: not closed"}; ${args.serve ? `accept it while the demo serves: BATON_ENGINE_URL=${stack.url} BATON_TOKEN=${stack.operatorToken} npx ${suggestedCommand("accept", { target: id })}` : "the engine stops now (no --serve), so nothing can accept it; run the demo with --serve --record to accept it with baton accept while it serves"})`,
      );
    }
    const weights = stack.fleet.cp.core.lanes(manifest.model).map((l) => `${l.id} ${l.weight}%`);
    console.log(`[demo] control plane  weights now ${weights.join(", ")}`);
    // The URLs only help while the engine is up: without --serve it stops right after this.
    if (!args.serve) console.log("[demo] (run with --serve to keep the dashboard up)");
    if (args.serve) {
      console.log(`[demo] dashboard      ${stack.url}/releases/${id}`);
      console.log(
        `[demo] API            curl -H 'Authorization: Bearer ${stack.operatorToken}' ${stack.url}/v1/releases/${id}`,
      );
      console.log("[demo] serving until Ctrl-C (or SIGTERM)");
      // The router keeps serving the model's traffic, so the gates of releases started by hand
      // (baton deploy, roll-forward, rollback) see requests too.
      stack.traffic.start(DEMO_UNITS_PER_S / 10, 100);
      await new Promise<void>((r) => {
        stopServing = r;
      });
    }
    code = state === "succeeded" ? 0 : 1;
  } catch (e) {
    // After an interrupt, the parts closing under the loop are no news.
    if (!interrupted) console.error(describe(e));
    code = 1;
  } finally {
    await cleanup();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  return interrupted ? signalCode(interrupted) : code;
}

/**
 * The verb a `paused` release waits for (docs/lifecycle.md): `resume` lifts an operator's pause,
 * `release` a dark deploy's hold, `promote` a manual promotion's hold or an inconclusive gate.
 * `resume` is refused for the other holds, so the hint must name the right one.
 */
export function pausedVerb(r: Pick<Release, "hold" | "gate">): "resume" | "promote" | "release" {
  if (r.hold?.kind === "pause") return "resume";
  if (r.hold?.kind === "dark") return "release";
  if (r.hold?.kind === "promotion") return "promote";
  // No hold: paused at a gate that ended inconclusive, which waits for promote (or abort).
  return r.gate ? "promote" : "resume";
}

/**
 * What to do about a release waiting for a person (`paused`, `needs_operator`): the command it
 * waits for (resume, promote or release; `pausedVerb`) against this demo's engine (with its URL
 * and operator token) and the release's page. Without --serve the engine stops right after, so
 * it says to run with --serve instead.
 */
export function waitingLines(
  stack: Pick<Stack, "url" | "operatorToken">,
  r: Pick<Release, "id" | "state" | "hold" | "gate">,
  serve: boolean,
): string[] {
  const { id, state } = r;
  const verb = pausedVerb(r);
  if (!serve) {
    const how =
      state === "paused"
        ? `an operator ${verb}s it. Without --serve the engine stops now; run the demo with --serve to keep it up and ${verb} it (\`${suggestedCommand(verb, { target: id })}\` or the dashboard)`
        : `an operator decides what next. Without --serve the engine stops now; run the demo with --serve to keep it up and act on it (\`baton status ${id}\` or the dashboard)`;
    return [`[demo] release ${id} is ${state}, which is not the end: ${how}`];
  }
  const page = `${stack.url}/releases/${id}`;
  if (state === "paused") {
    const button = verb[0]?.toUpperCase() + verb.slice(1);
    return [
      `[demo] ${verb.padEnd(14)} BATON_ENGINE_URL=${stack.url} BATON_TOKEN=${stack.operatorToken} npx ${suggestedCommand(verb, { target: id })}   (or ${button} on ${page})`,
      "[demo] still serving and following the release until it ends (Ctrl-C stops)",
    ];
  }
  return [
    `[demo] operator       the release waits for an operator: ${page} says what it asks (retry, resolve, confirm-restore or abandon; docs/cli.md), e.g. BATON_ENGINE_URL=${stack.url} BATON_TOKEN=${stack.operatorToken} npx baton status ${id}`,
    "[demo] still serving and following the release until it ends (Ctrl-C stops)",
  ];
}

/**
 * Asks the engine to start the release that contracts the migration (`contractRecipe`) right
 * after the release that activated the new form succeeded: it is refused (409
 * `contract_not_yet`) with when it may run, which is what the demo shows. Nothing is started.
 */
async function contractLines(stack: Stack): Promise<string[]> {
  const next = contractRecipe(stack.recipe);
  if (!next) return [];
  const res = await stack.api("/v1/releases", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: await stack.startBody(next),
  });
  const body = (await res.json()) as { id?: string; error?: { code?: string; message?: string } };
  if (res.status === 201)
    return [
      `[demo] contract       started as ${body.id} (unexpected: its rollback window should be open)`,
    ];
  return [
    `[demo] contract       refused (HTTP ${res.status} ${body.error?.code ?? ""}): ${body.error?.message ?? JSON.stringify(body)}`,
  ];
}

/** Each gate's last evaluation (its decision and reason), and why compensation began. */
async function gateLines(stack: Stack, id: string): Promise<string[]> {
  const { manifest } = stack;
  const evidence = await stack.engine.store.listEvidence(id);
  const last = new Map<number, (typeof evidence)[number]>();
  for (const e of evidence) last.set(e.wave, e);
  const out = [...last.values()].map(
    (e) =>
      `[demo] gate ${waveLabel(manifest, e.wave)}: ${e.decision} after ${e.seq} evaluations (${(e.elapsed_ms / 1000).toFixed(1)} s, ${count(e.arms?.candidate ?? 0)}/${count(e.arms?.control ?? 0)} units candidate/control): ${e.reason}`,
  );
  const began = (await stack.engine.store.getHistory(id)).find((h) =>
    / compensating from step /.test(h.message),
  );
  if (began) out.push(`[demo] reason         ${began.message.replace(/^.*?\): /, "")}`);
  return out;
}

/** The admission checks as the demo prints them: one line each. */
function admissionLines(a: AdmissionReport): string[] {
  const who = a.signer?.kind === "key" ? `key ${a.signer.key_id}` : (a.signer?.san ?? "nobody");
  return [
    `[demo] admission      ${a.ok ? "passed" : "refused"}: manifest signed by ${who} (a key generated for this demo; docs/trust.md)`,
    ...a.checks.map((c) => `[demo]   ${c.outcome.padEnd(7)} ${c.check.padEnd(19)} ${c.message}`),
  ];
}

/**
 * Why `--data-dir <dir>` cannot be used (one line naming the flag, the OS error and the fix), or
 * null once `dir` exists (created if missing) and a file can be written in it.
 */
export function dataDirProblem(dir: string): string | null {
  try {
    makeDirs(dir);
    proveWritable(dir);
    return null;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return `[demo] --data-dir ${dir} cannot hold the demo's files (${err.code ?? err.message}); fix: pass a folder this user can write (it is created if missing), e.g. --data-dir ./.baton-demo, or leave --data-dir out for a temporary one`;
  }
}

/**
 * Why a record cannot be written to `file` (one line naming `flag`, the OS error and the fix), or
 * null when `file` is not a folder and its folder takes a new file. Checked before a run starts,
 * so a run's result is never lost to a bad path at its end.
 */
export function recordPathProblem(flag: string, file: string): string | null {
  return unwritableFileProblem("[demo]", file, `${flag} ${file}`, `${flag} ./record.json`);
}

/** An error as one line for people: BatonError problems listed with their fix. */
function describe(e: unknown): string {
  const err = e as Error & { problems?: { path: string; message: string; fix?: string }[] };
  const msg = err.message?.startsWith("[") ? err.message : `[demo] ${err.message ?? String(e)}`;
  const problems = (err.problems ?? []).map((p) =>
    // A problem that only repeats the message adds its fix alone.
    p.message === err.message
      ? `  fix: ${p.fix ?? "see the message above"}`
      : `  - ${p.path || "recipe"}: ${p.message}${p.fix ? `; fix: ${p.fix}` : ""}`,
  );
  return [msg, ...problems].join("\n");
}

const OPTIONS = {
  "fail-at": { type: "string" },
  "candidate-error-rate": { type: "string" },
  "candidate-latency-ms": { type: "string" },
  recipe: { type: "string" },
  "data-dir": { type: "string" },
  port: { type: "string" },
  serve: { type: "boolean", default: false },
  timeout: { type: "string", default: "600" },
  record: { type: "string" },
  help: { type: "boolean", short: "h", default: false },
} as const;

/**
 * `--timeout -1` as `--timeout=-1`: node's parseArgs refuses a value that starts with a dash
 * ("argument is ambiguous"), so a negative number given to a value option is joined to it here,
 * and the option's own check then names the flag and its valid range.
 */
function joinNegativeValues(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const next = argv[i + 1];
    const name = a.startsWith("--") ? a.slice(2) : "";
    const takesValue = name in OPTIONS && OPTIONS[name as keyof typeof OPTIONS].type === "string";
    if (takesValue && next !== undefined && /^-(\d|\.\d)/.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: joinNegativeValues(argv),
    options: OPTIONS,
    strict: true,
    allowPositionals: false,
  });
  const timeoutS = Number(values.timeout);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0) {
    throw new Error(`--timeout must be a positive number of seconds (got ${values.timeout})`);
  }
  let port: number | undefined;
  if (values.port !== undefined) {
    port = Number(values.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new Error(`--port must be a port number 1..65535, e.g. 8787 (got ${values.port})`);
    }
  }
  let candidateErrorRate: number | undefined;
  if (values["candidate-error-rate"] !== undefined) {
    candidateErrorRate = Number(values["candidate-error-rate"]);
    if (!(candidateErrorRate >= 0 && candidateErrorRate <= 1)) {
      throw new Error(
        `--candidate-error-rate must be a share between 0 and 1, e.g. 0.05 (got ${values["candidate-error-rate"]})`,
      );
    }
  }
  let candidateLatencyMs: number | undefined;
  if (values["candidate-latency-ms"] !== undefined) {
    candidateLatencyMs = Number(values["candidate-latency-ms"]);
    if (!(candidateLatencyMs >= 0 && candidateLatencyMs <= 60_000)) {
      throw new Error(
        `--candidate-latency-ms must be a number of ms between 0 and 60000, e.g. 400 (got ${values["candidate-latency-ms"]})`,
      );
    }
  }
  return {
    candidateErrorRate,
    candidateLatencyMs,
    failAt: values["fail-at"],
    recipe: values.recipe ? resolve(values.recipe) : EXAMPLE_RECIPE,
    dataDir: values["data-dir"] ? resolve(values["data-dir"]) : undefined,
    serve: values.serve === true,
    port,
    timeoutS,
    record: values.record ? resolve(values.record) : undefined,
    help: values.help === true,
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  runDemo(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: Error) => {
      console.error(e.message);
      process.exit(1);
    },
  );
}
