/**
 * Starting a release from a recipe: contract check and compile, admission (docs/trust.md), the
 * lane claims (lane-claims.ts), the observed baseline read from the control plane, the plan
 * compiled against it, and one write of the new release, already started, with its first
 * effects. Starts run one at a time in this process.
 */
import { admit } from "../../admission/admit.ts";
import type { AdmissionConfig } from "../../admission/policy.ts";
import { describeSigner } from "../../admission/signer.ts";
import type { BundleVerifier } from "../../admission/verify.ts";
import { observeBaseline } from "../../domain/baseline.ts";
import { switchBackPlan, switchBackRefusal } from "../../domain/blue-green.ts";
import { changeDeploymentStatus, type EffectsPolicy } from "../../domain/change-effects.ts";
import { requalificationProblems } from "../../domain/dependency-drift.ts";
import { BatonError } from "../../domain/errors.ts";
import { contractRefusal } from "../../domain/migration.ts";
import { type PrerequisiteReport, withProbeSteps } from "../../domain/prerequisites.ts";
import { creationHistory } from "../../domain/release-history.ts";
import { rollbackWindowClosesAt } from "../../domain/rollback-window.ts";
import {
  type SourceClaim,
  type SourceMark,
  sourceRefusal,
  sourceRefusalWords,
} from "../../domain/source-order.ts";
import type {
  HistoryEntry,
  Lineage,
  Manifest,
  ObservedBaseline,
  OutboxEffect,
  Release,
} from "../../domain/types.ts";
import type { ControlPlane, LanesRead } from "../../ports/control-plane.ts";
import { type CreateExtras, LanesClaimed, SourceMarkMoved } from "../../ports/store.ts";
import { canonicalJson } from "../../protocol/canonical-json.ts";
import { randomHex } from "../../protocol/ids.ts";
import { manifestDigest } from "../../recipes/digest.ts";
import { readDependencyBook } from "../dependency-probes.ts";
import type { ApplyKernel } from "../kernel.ts";
import { assertLanesFree, lanesClaimedError } from "../lane-claims.ts";
import type { Logger } from "../logger.ts";
import type { Drills } from "./drills.ts";
import type { Incidents } from "./incidents.ts";
import { activatingRelease } from "./migration-reads.ts";

/** What a start carries besides the recipe (docs/trust.md "Sending the bundle"). */
export interface StartOptions {
  /** Create the release `pending`; `resume` starts it. */
  hold?: boolean;
  /**
   * `dark` (deploy): the release waits at 0% exposure before its first traffic write above
   * 0% until `release` (docs/lifecycle.md "Deploy and release").
   */
  exposure?: "dark";
  /** The manifest's Sigstore bundle (JSON), as `baton sign` or the recipe workflow wrote it. */
  bundle?: unknown;
  /** Image attestation bundles (provenance, SBOM). */
  attestations?: unknown[];
  /** An explicit rollback: a manifest older than the model's last admitted one is allowed. */
  rollback?: boolean;
  /** Set by the lifecycle verbs (rollback, roll forward): stored on the release. */
  lineage?: Lineage;
  /**
   * The image the lanes run now, when it is not the recipe's `previous_image` (a rollback:
   * the rolled-back release's image). The plan's undo restores it; admission still checks the
   * recipe as signed (its digest is `baseline.recipe_manifest_digest`).
   */
  restoreImage?: string;
  /** A rollback's prerequisites as asked of the lanes: stored on the release and in its history. */
  prerequisites?: PrerequisiteReport;
  /**
   * Put one read-only probe step per lane first in the plan (`withProbeSteps`): a rollback
   * whose prerequisites are asked by runners. Its first effect runs only after every probe passed.
   */
  probeSteps?: boolean;
  /**
   * A switch back (domain/blue-green.ts): the succeeded blue-green release whose old
   * environment takes the traffic again. The recipe is that release's own, admitted again as
   * a rollback; the plan run is `switchBackPlan` (one traffic write and its read-back), against
   * the lanes as the control plane reports them now.
   */
  switchBack?: Release;
  /**
   * The recipe workflow's commit and the mark it checked it against (docs/lifecycle.md "Merge
   * order is release order"): judged by `sourceRefusal` before admission, stored on the
   * release, and the model's source mark moves to it in the release's own write.
   */
  source?: SourceClaim;
}

export interface StartDeps {
  kernel: ApplyKernel;
  log: Logger;
  effects: EffectsPolicy;
  /** Refuse a release whose lanes a non-terminal release owns (lane-claims.ts). */
  exclusiveLanes: boolean;
  admission: AdmissionConfig;
  /** The bundle verifier of `enforce` mode; null otherwise. */
  verifier: BundleVerifier | null;
  /** Read at start for the observed baseline; null or without `lanes`: the recipe's assumed one. */
  controlPlane: ControlPlane | null;
  /** Open incidents freeze starts of models they do not name (rollbacks excepted). */
  incidents: Incidents;
  /** The drill book: a start is warned about, or refused, by the recipe's drill policy. */
  drills: Drills;
}

/**
 * A compiled plan with the rollback's probe steps put first (`withProbeSteps`), its digest
 * taken again over the new canonical JSON (the plan actually run; admission checked the recipe).
 */
function probedPlan(m: Manifest): { manifest: Manifest; manifest_digest: string } {
  const manifest = withProbeSteps(m);
  return { manifest, manifest_digest: manifestDigest(canonicalJson(manifest)) };
}

export class Starts {
  /** Tail of the `start` queue: starts run one at a time so the lane check cannot interleave. */
  private starting: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: StartDeps) {}

  /**
   * Creates a release from a recipe and starts it (`pending` → `running`, first step begun),
   * stored in one write. With `opts.hold` it stays `pending` until `resume` starts it.
   * Admission runs first (docs/trust.md); its checks are stored on the release.
   * @throws BatonError `contract_failed` (422) with every problem of the recipe.
   * @throws BatonError `admission_refused` (422), one problem per failed check (path = check
   *   name, with its fix); nothing is written then.
   * @throws BatonError `conflict` (409) when a non-terminal release owns one of its lanes
   *   (same model and lane id, or same host:port); nothing is written then.
   * @throws BatonError `superseded` (409) when `opts.source` is older than the model's source
   *   mark, or was checked against another commit (`judgeSource`); nothing is written then.
   * @throws BatonError `frozen` (409) when an open incident does not name the model (a
   *   rollback is never frozen); nothing is written then.
   * @throws BatonError `requalification_required` (409) when a mutable dependency's probe
   *   observed a revision other than the recipe's, or its contract expired (a rollback is never
   *   refused for it); one problem per dependency, naming the field and how to requalify.
   */
  start(recipe: unknown, actor: string, opts: StartOptions = {}): Promise<Release> {
    // Serialised within this process: check-then-create must not interleave with another
    // start (several engines on one database can still race; the store's lane claims settle
    // that, see lane-claims.ts). Starts also read the control plane's lanes (the observed
    // baseline): one at a time per engine keeps a burst of starts from timing those reads out.
    const run = this.starting.then(() => this.startNow(recipe, actor, opts));
    this.starting = run.catch(() => undefined);
    return run;
  }

  /**
   * Refuses a start whose mutable dependencies need requalification (domain/dependency-drift.ts),
   * judged against the probes' last answers and the engine clock.
   */
  private async assertQualified(manifest: Manifest): Promise<void> {
    const { store, clock } = this.deps.kernel;
    const problems = requalificationProblems(
      manifest,
      await readDependencyBook(store),
      clock.now(),
    );
    if (problems.length === 0) return;
    this.deps.log.warn(
      `[engine] a release of ${manifest.model} was refused: ${problems.map((p) => p.message).join("; ")}`,
    );
    throw new BatonError(
      "requalification_required",
      `[engine] release of ${manifest.model} refused: ${problems.map((p) => `${p.message}. Fix: ${p.fix}`).join(" ")}`,
      problems,
    );
  }

  /**
   * Refuses a release that contracts a migration (docs/recipes.md "Migrations") until the
   * rollback window of the release that activated the new form (the latest succeeded release
   * of the model whose migration of the same id expanded and migrated) has closed and no lane
   * runs an image the migration lists as an old-form reader (the lanes' images as observed at
   * start, else the recipe's previous_image). 409 `contract_not_yet`, saying when it may run.
   */
  private async assertContractMayRun(
    manifest: Manifest,
    baseline: ObservedBaseline | null,
  ): Promise<void> {
    const m = manifest.migration;
    if (!m?.steps.includes("contract")) return;
    const { store, clock } = this.deps.kernel;
    const activated = await activatingRelease(store, manifest.model, m.id);
    const readers = new Set(m.old_form_readers ?? []);
    const lanes = manifest.lanes
      .map((l) => ({
        lane: l.id,
        image: baseline?.lanes.find((b) => b.id === l.id)?.image ?? manifest.previous_image,
      }))
      .filter((l) => readers.has(l.image));
    const why = contractRefusal(
      m.id,
      manifest.model,
      activated,
      activated ? rollbackWindowClosesAt(activated) : null,
      clock.now(),
      lanes,
    );
    if (!why) return;
    this.deps.log.warn(`[engine] a release of ${manifest.model} was refused: ${why}`);
    throw new BatonError(
      "contract_not_yet",
      `[engine] release of ${manifest.model} refused: ${why}`,
      [
        {
          path: "migration.contract",
          message: why,
          fix: "Start it again once it may run (the time above); until then the old form stays.",
        },
      ],
    );
  }

  private async startNow(recipe: unknown, actor: string, opts: StartOptions): Promise<Release> {
    const { kernel, log } = this.deps;
    const { store, clock, domain } = kernel;
    const compiled = domain.compile(recipe);
    const model = compiled.manifest.model;
    if (opts.rollback !== true) await this.deps.incidents.assertNotFrozen(model, "start");
    if (opts.rollback !== true) await this.assertQualified(compiled.manifest);
    // A rollback is a recovery: the drill policy never holds it back.
    const drill = opts.rollback !== true ? await this.deps.drills.verdict(compiled.manifest) : null;
    if (drill?.refuse) {
      log.warn(`[engine] a release of ${model} was refused: ${drill.message}`);
      throw new BatonError(
        "drill_required",
        `[engine] release of ${model} refused: ${drill.message}. Fix: ${drill.fix}`,
        [{ path: "policy.drill_max_age_days", message: drill.message, fix: drill.fix }],
      );
    }
    // Judged before admission: an older commit is refused whatever its signature says.
    const mark = opts.source ? await this.judgeSource(model, opts.source) : null;
    const report = admit(this.deps.admission, this.deps.verifier, {
      manifest: compiled.manifest,
      manifest_digest: compiled.manifest_digest,
      bundle: opts.bundle,
      attestations: opts.attestations ?? [],
      rollback: opts.rollback === true,
      mark: await store.getAdmissionMark(compiled.manifest.model),
      now: clock.now(),
    });
    if (!report.ok) {
      const failed = report.checks.filter((c) => c.outcome === "fail");
      log.warn(
        `[engine] admission refused a release of ${compiled.manifest.model} (manifest sha256:${compiled.manifest_digest}) for ${actor}: ${failed.map((c) => c.check).join(", ")}`,
      );
      throw new BatonError(
        "admission_refused",
        `[admission] refused: ${failed.map((c) => `${c.check}: ${c.message}`).join("; ")}`,
        failed.map((c) => ({ path: c.check, message: c.message, fix: c.fix ?? "" })),
      );
    }
    if (this.deps.exclusiveLanes) await assertLanesFree(store, compiled.manifest);
    const baseline = opts.switchBack
      ? await this.lanesNow(opts.switchBack.manifest, compiled.manifest_digest)
      : await this.observedBaseline(recipe, compiled);
    let plan: { manifest: Manifest; manifest_digest: string };
    if (opts.switchBack) {
      plan = this.switchBackOf(opts.switchBack, baseline, compiled.manifest.recipe_name);
    } else {
      await this.assertContractMayRun(compiled.manifest, baseline);
      const planRecipe =
        opts.restoreImage !== undefined
          ? { ...(recipe as Record<string, unknown>), previous_image: opts.restoreImage }
          : recipe;
      const compiledPlan =
        baseline || planRecipe !== recipe ? domain.compile(planRecipe, baseline?.lanes) : compiled;
      plan = opts.probeSteps ? probedPlan(compiledPlan.manifest) : compiledPlan;
    }
    const number = await store.nextReleaseNumber();
    const now = clock.now();
    const pending: Release = {
      ...domain.newRelease(`r${number}`, plan.manifest, plan.manifest_digest, now, randomHex(8)),
      admission: report,
      ...(baseline ? { baseline } : {}),
      ...(opts.lineage ? { lineage: opts.lineage } : {}),
      ...(opts.prerequisites ? { prerequisites: opts.prerequisites } : {}),
      ...(opts.exposure === "dark" ? { exposure: "dark" as const } : {}),
      ...(opts.source
        ? { source: { commit: opts.source.commit, committed_at: opts.source.committed_at } }
        : {}),
    };
    const history = creationHistory({
      release: pending,
      actor,
      recipe,
      admitted: compiled.manifest,
      plan: plan.manifest,
      admission: report,
      signer: report.signer ? describeSigner(report.signer) : null,
      ...(opts.hold ? { hold: true } : {}),
      ...(opts.exposure ? { exposure: opts.exposure } : {}),
      ...(opts.lineage ? { lineage: opts.lineage } : {}),
      ...(opts.bundle !== undefined ? { bundle: opts.bundle } : {}),
      ...(opts.attestations ? { attestations: opts.attestations } : {}),
      ...(opts.prerequisites ? { prerequisites: opts.prerequisites } : {}),
      baseline,
      now,
    });
    // Open incidents naming the model, written with the creation so its record names them.
    history.push(...(await this.deps.incidents.namedAtStart(pending.id, plan.manifest.model, now)));
    if (drill) {
      log.warn(`[engine] release ${pending.id} starts, but ${drill.message}`);
      history.push({
        release_id: pending.id,
        at: now,
        kind: "drill_warning",
        step_run_id: null,
        outcome: "accepted",
        message: `[engine] warning: ${drill.message}; fix: ${drill.fix}`,
        data: { drill_warning: { message: drill.message, fix: drill.fix } },
      });
    }
    const extras: CreateExtras = {
      ...(report.mode === "enforce" && report.issued_at !== null
        ? {
            admissionMark: {
              model: compiled.manifest.model,
              issued_at: report.issued_at,
              manifest_digest: compiled.manifest_digest,
              release_id: pending.id,
            },
          }
        : {}),
      // One owner per lane across engines (G9): the claim commits with the release or not at all.
      ...(this.deps.exclusiveLanes ? { claimLanes: compiled.manifest.lanes.map((l) => l.id) } : {}),
      // The mark moves with the release, and only from the commit judged above.
      ...(opts.source
        ? {
            sourceMark: {
              mark: {
                model,
                commit: opts.source.commit,
                committed_at: opts.source.committed_at,
                release_id: pending.id,
                at: now,
              },
              expect: mark?.commit ?? null,
            },
          }
        : {}),
    };
    const create = async (
      r: Release,
      h: HistoryEntry[],
      effects: OutboxEffect[],
      o: { started: boolean; wake: boolean },
    ) => {
      try {
        await kernel.create(r, h, effects, now, extras, o);
      } catch (err) {
        if (err instanceof LanesClaimed) throw await lanesClaimedError(store, err);
        if (err instanceof SourceMarkMoved && opts.source) {
          // Another engine started from a newer commit in between: judged again, it refuses.
          await this.judgeSource(model, opts.source);
          throw new BatonError(
            "superseded",
            `[engine] the source mark of model ${model} moved while release ${r.id} was being started; nothing was started. Run the recipe workflow again`,
          );
        }
        throw err;
      }
    };
    if (opts.hold) {
      await create(pending, history, [], { started: false, wake: false });
      return pending;
    }
    const started = domain.transition(pending, { type: "start" }, now);
    if (!started.ok) {
      throw new BatonError(
        "illegal_transition",
        `[engine] could not start release: ${started.reason}`,
      );
    }
    // A new release is stored once, already started: resource_version 1, its first effects.
    const release: Release = { ...started.release, resource_version: 1 };
    await create(
      release,
      [...history, ...started.history],
      [
        ...started.effects,
        ...changeDeploymentStatus(pending, release, { type: "start" }, now, this.deps.effects),
      ],
      { started: true, wake: started.effects.length > 0 },
    );
    return release;
  }

  /**
   * The model's source mark, once `claim` is judged against it (`sourceRefusal`).
   * @throws BatonError `superseded` (409) naming the release that stands for the newer commit
   *   (id, state, image) when the claim's commit is older, or was checked against another commit.
   */
  async judgeSource(model: string, claim: SourceClaim): Promise<SourceMark | null> {
    const { store } = this.deps.kernel;
    const mark = await store.getSourceMark(model);
    const why = sourceRefusal(mark, claim);
    if (why === null || mark === null) return mark;
    const r = await store.getRelease(mark.release_id);
    const words = sourceRefusalWords(
      why,
      claim,
      mark,
      r ? { id: r.id, state: r.state, image: r.manifest.image } : null,
    );
    this.deps.log.warn(words);
    throw new BatonError("superseded", words);
  }

  /**
   * The switch-back plan from `of` (domain/blue-green.ts `switchBackPlan`) against the lanes
   * read now (`lanes`), named after the recipe it is admitted with (`recipeName`), with its
   * digest.
   * @throws BatonError `conflict` (409) when the old environment cannot take the traffic
   *   (`switchBackRefusal`: a blue lane missing, excluded or on another image); nothing is
   *   written then.
   */
  private switchBackOf(
    of: Release,
    lanes: ObservedBaseline | null,
    recipeName: string,
  ): { manifest: Manifest; manifest_digest: string } {
    const why = switchBackRefusal(of.manifest, lanes);
    const manifest = why ? null : switchBackPlan(of.manifest, lanes, recipeName);
    if (!manifest) {
      const reason = why ?? `${of.id} is not a blue-green release with a traffic switch`;
      this.deps.log.warn(`[engine] switch back from ${of.id} refused: ${reason}`);
      throw new BatonError(
        "conflict",
        `[engine] rollback of ${of.id} refused: the switch back needs its old environment warm, and ${reason}; nothing was changed. Put the lane back (include it, or redeploy ${of.manifest.previous_image} on it), or roll forward with a fixed recipe (baton roll-forward)`,
      );
    }
    return { manifest, manifest_digest: manifestDigest(canonicalJson(manifest)) };
  }

  /**
   * The control plane's lanes of `m` as they are now (no check against a recipe), as an
   * observed baseline; null when no control plane port can list lanes.
   * @throws BatonError `unavailable` (503) when the control plane cannot be read.
   */
  private async lanesNow(m: Manifest, recipeDigest: string): Promise<ObservedBaseline | null> {
    const cp = this.deps.controlPlane;
    if (!cp?.lanes) return null;
    let read: LanesRead;
    try {
      read = await cp.lanes(m.model);
    } catch (err) {
      read = { ok: false, message: (err as Error).message };
    }
    if (!read.ok) {
      throw new BatonError(
        "unavailable",
        `[engine] could not read the control plane's lanes of model ${m.model}: ${read.message}; nothing was started — check the control plane (BATON_CONTROL_PLANE_URL) and try again`,
      );
    }
    const byId = new Map(read.lanes.map((l) => [l.id, l]));
    return {
      read_at: this.deps.kernel.clock.now(),
      lanes: m.lanes.flatMap((ml) => {
        const l = byId.get(ml.id);
        if (!l || l.model !== m.model) return [];
        return [
          {
            id: l.id,
            weight: l.weight,
            excluded: l.excluded,
            capabilities: [...l.capabilities].sort(),
            advertised: l.advertised,
            image: typeof l.image === "string" ? l.image : null,
          },
        ];
      }),
      recipe_manifest_digest: recipeDigest,
    };
  }

  /**
   * Reads the control plane's lanes and checks them against the recipe
   * (domain/baseline.ts). Null when no control plane port can list lanes.
   * @throws BatonError `contract_failed` (422) naming every lane that disagrees, with the fix.
   * @throws BatonError `unavailable` (503) when the control plane cannot be read.
   */
  private async observedBaseline(
    recipe: unknown,
    compiled: { manifest: Manifest; manifest_digest: string },
  ): Promise<ObservedBaseline | null> {
    const cp = this.deps.controlPlane;
    if (!cp?.lanes) return null;
    const { manifest } = compiled;
    let read: LanesRead;
    try {
      read = await cp.lanes();
    } catch (err) {
      read = { ok: false, message: (err as Error).message };
    }
    if (!read.ok) {
      throw new BatonError(
        "unavailable",
        `[engine] could not read the control plane to observe the baseline of model ${manifest.model}: ${read.message}; nothing was started — check the control plane (BATON_CONTROL_PLANE_URL) and start again`,
      );
    }
    // The recipe passed the contract check: its lanes are objects with an id.
    const stated = (recipe as { lanes: { id: string; weight?: number }[] }).lanes;
    const seen = observeBaseline(
      {
        model: manifest.model,
        image: manifest.image,
        previous_image: manifest.previous_image,
        lanes: manifest.lanes.map((l, i) => ({
          id: l.id,
          ...(typeof stated[i]?.weight === "number" ? { weight: stated[i].weight } : {}),
        })),
      },
      read.lanes,
    );
    if (!seen.ok) {
      const first = seen.problems[0];
      const more = seen.problems.length > 1 ? ` (and ${seen.problems.length - 1} more)` : "";
      throw new BatonError(
        "contract_failed",
        `[engine] the recipe and the control plane disagree about model ${manifest.model}: ${first?.message}; ${first?.fix}${more}`,
        seen.problems,
      );
    }
    return {
      read_at: this.deps.kernel.clock.now(),
      lanes: seen.baseline,
      recipe_manifest_digest: compiled.manifest_digest,
    };
  }
}
