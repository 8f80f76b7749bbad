/**
 * Builds the release record (schema.ts) from what the engine keeps: the release, its history
 * and attempt results. Pure except for the digest (sha256 of canonical JSON).
 */
import { blueLanes } from "../domain/blue-green.ts";
import { conformanceEvidence } from "../domain/conformance.ts";
import type { GateEvidence } from "../domain/gate/evidence.ts";
import { gateSummaries } from "../domain/gate/summary.ts";
import { ACCEPT_KIND } from "../domain/release-history.ts";
import { reportedImages } from "../domain/result-evidence.ts";
import { rollbackWindowClosesAt } from "../domain/rollback-window.ts";
import { shadowPhaseEvidence } from "../domain/shadow-evidence.ts";
import { type StepRunState, TERMINAL_RELEASE_STATES } from "../domain/states.ts";
import type { StrategyName } from "../domain/strategy.ts";
import type { HistoryEntry, Release } from "../domain/types.ts";
import { suggestedCommand } from "../domain/verbs.ts";
import type { AttemptResult } from "../ports/store.ts";
import { canonicalJson } from "../protocol/canonical-json.ts";
import { sha256Hex } from "../protocol/sha256.ts";
import { OBSERVED_SOURCES, RECORD_VERSION } from "./constants.ts";
import { migrationRecord } from "./migration.ts";
import type { ReleaseRecordDocument } from "./schema.ts";

export { ACCEPT_KIND };

/**
 * History kinds that are decisions: operator verbs (their data names the actor), the engine's
 * own follow-on moves (`transition`: compensate, pause, succeed…), deadlines that turned a
 * step run `unknown`, refusals by GitHub, an operator's `promote` past an inconclusive gate,
 * and each gate's deciding evaluation (`gate`: pass, fail or inconclusive; its waits are not
 * decisions). Protocol traffic (preflight, callback, applied) is what ran, not a decision.
 */
const DECISION_KINDS = new Set([
  "created",
  "start",
  "abort",
  "resume",
  "retry",
  "resolve",
  "abandon",
  "transition",
  "deadline",
  "dispatch_failed",
  "promote",
  "pause",
  "release",
  "confirm_restore",
  "gate",
  "stop_check",
  "verify",
  "verified",
]);

/** Whether a `stop_check` history entry is a breach (`data.stop_check.breached`). */
function stopBreachOf(h: HistoryEntry): boolean {
  const d = h.data;
  if (!d || typeof d !== "object" || Array.isArray(d)) return false;
  const s = d.stop_check;
  return !!s && typeof s === "object" && !Array.isArray(s) && s.breached === true;
}

/** The decision a `gate` history entry carries (`data.gate.decision`), or null. */
function gateDecisionOf(h: HistoryEntry): string | null {
  const d = h.data;
  if (!d || typeof d !== "object" || Array.isArray(d)) return null;
  const g = d.gate;
  if (!g || typeof g !== "object" || Array.isArray(g)) return null;
  return typeof g.decision === "string" ? g.decision : null;
}

function runUrl(repository: string | undefined, runId: string, attempt: number): string | null {
  if (!repository || !/^[\w.-]+\/[\w.-]+$/.test(repository)) return null;
  return `https://github.com/${repository}/actions/runs/${encodeURIComponent(runId)}/attempts/${attempt}`;
}

/**
 * The operator who took the decision: the event's `actor`, at the top of the entry's data or
 * under `event` when the transition added data of its own (e.g. an abort past a roll-forward
 * point keeps `{event, roll_forward_hold}`); null for the engine's own decisions.
 */
function actorOf(h: HistoryEntry): string | null {
  const d = h.data;
  if (!d || typeof d !== "object" || Array.isArray(d)) return null;
  if (typeof d.actor === "string") return d.actor;
  const ev = d.event;
  if (ev && typeof ev === "object" && !Array.isArray(ev) && typeof ev.actor === "string")
    return ev.actor;
  return null;
}

/** The sha256 hex a closed record is fixed by (acceptance and refused_events excluded). */
export function recordDigest(
  r: Omit<ReleaseRecordDocument, "digest" | "acceptance" | "refused_events">,
): string {
  return sha256Hex(canonicalJson(r));
}

/** One ancestor of a release in its lineage chain (`lineage.chain`). */
export type LineageLink = ReleaseRecordDocument["lineage"] extends infer L
  ? L extends { chain: (infer C)[] }
    ? C
    : never
  : never;

/** Inputs of `buildRecord` besides the release and its history. */
export interface RecordInputs {
  /** owner/name of the repository the runs ran in: builds the run links. */
  repository?: string;
  /** The release's stored gate evaluations, any order (summarised per gate). */
  evidence?: readonly GateEvidence[];
  /** The release's stored attempt results: the images the target reported. */
  attemptResults?: readonly AttemptResult[];
  /** The releases `release.lineage.of` leads to, nearest first (see `lineageChain`). */
  chain?: readonly LineageLink[];
}

type ObservedLane = ReleaseRecordDocument["ran"]["observed_lanes"][number];

/**
 * The lane states the release observed, oldest first: the control plane's lanes at start (the
 * observed baseline), the weights each succeeded traffic assert saw (it succeeds only when the
 * control plane held exactly its weights), and the images the target reported running at the
 * end of each runner attempt (checks.json `image`).
 */
export function observedLanes(
  release: Release,
  results: readonly AttemptResult[] = [],
): ObservedLane[] {
  const out: ObservedLane[] = [];
  const b = release.baseline;
  if (b) {
    for (const l of b.lanes) {
      out.push({
        lane: l.id,
        at: b.read_at,
        source: "control_plane_at_start",
        step_run_id: null,
        observed: {
          weight: l.weight,
          excluded: l.excluded,
          capabilities: [...l.capabilities],
          advertised: l.advertised,
          image: l.image ?? null,
        },
      });
    }
  }
  for (const sr of release.step_runs) {
    if (sr.state !== "succeeded" || sr.resolved) continue;
    const step = release.manifest.steps[sr.step_index];
    const action = sr.direction === "fwd" ? step?.forward : step?.backward;
    if (action?.kind !== "control_plane" || action.request.op !== "assert_traffic") continue;
    for (const [lane, weight] of Object.entries(action.request.weights)) {
      out.push({
        lane,
        at: sr.finished_at,
        source: "traffic_assert",
        step_run_id: sr.id,
        observed: { weight, percent: action.request.percent },
      });
    }
  }
  const byId = new Map(release.step_runs.map((s) => [s.id, s]));
  for (const res of results) {
    const images = reportedImages(res.checks);
    const sr = byId.get(res.step_run_id);
    const lane = sr ? release.manifest.steps[sr.step_index]?.lane : null;
    if (images.length === 0 || !lane) continue;
    out.push({
      lane,
      at: res.received_at,
      source: "target_report",
      step_run_id: res.step_run_id,
      observed: { images, attempt: res.attempt, overall: res.overall },
    });
  }
  // Oldest first; at equal times in the order the step runs were created (then lane, attempt),
  // so the same release gives the same bytes from either store.
  const rank = (x: ObservedLane) => OBSERVED_SOURCES.indexOf(x.source);
  const order = new Map(release.step_runs.map((s, i) => [s.id, i]));
  const created = (x: ObservedLane) => (x.step_run_id ? (order.get(x.step_run_id) ?? -1) : -1);
  return out.sort(
    (a, b) =>
      (a.at ?? 0) - (b.at ?? 0) ||
      rank(a) - rank(b) ||
      created(a) - created(b) ||
      a.lane.localeCompare(b.lane) ||
      Number(a.observed.attempt ?? 0) - Number(b.observed.attempt ?? 0),
  );
}

/** Step-run states a step run ends in without succeeding: each is a deviation of the record. */
const ENDED_BADLY: ReadonlySet<StepRunState> = new Set<StepRunState>([
  "failed",
  "unknown",
  "dispatch_failed",
]);

/**
 * The record of `release` from its history and `o` (gate evaluations, attempt results,
 * lineage chain).
 */
export function buildRecord(
  release: Release,
  history: HistoryEntry[],
  o: RecordInputs = {},
): ReleaseRecordDocument {
  const m = release.manifest;
  const conformance = conformanceEvidence(release);
  const migration = migrationRecord(release, o.attemptResults ?? []);
  const gates = gateSummaries(o.evidence ?? []);
  const shadow = shadowPhaseEvidence(m, gates);
  const closed = TERMINAL_RELEASE_STATES.has(release.state);
  const stepName = (i: number) => m.steps[i]?.name ?? `step ${i + 1}`;
  const accepted = history.filter((h) => h.outcome === "accepted" && h.kind !== ACCEPT_KIND);
  const decisions = accepted
    .filter(
      (h) =>
        DECISION_KINDS.has(h.kind) &&
        (h.kind !== "gate" || ["pass", "fail", "inconclusive"].includes(gateDecisionOf(h) ?? "")) &&
        (h.kind !== "stop_check" || stopBreachOf(h)),
    )
    .map((h) => {
      const actor = actorOf(h);
      return {
        at: h.at,
        kind: h.kind,
        by: actor ?? "engine",
        automatic: actor === null,
        why: h.message,
      };
    });
  const backward = release.step_runs.filter((s) => s.direction === "bwd");
  const bStarts = backward.map((s) => s.started_at ?? s.created_at);
  const bEnds = backward.map((s) => s.finished_at).filter((x): x is number => x !== null);
  // recoverable: service is recovered once the restore action is confirmed, not before.
  const restore = release.restore ?? null;
  // A rollback of a recoverable release that waited for its restore action: its recovery
  // runs from the rollback's request (this release's creation) through its steps (traffic and
  // images back when the wait began) to the restore's confirmation.
  const rollbackRestore = restore !== null && release.lineage?.verb === "rollback";
  const recStart = rollbackRestore
    ? release.created_at
    : bStarts.length
      ? Math.min(...bStarts)
      : null;
  const trafficEnd = rollbackRestore
    ? restore.since
    : backward.length && bEnds.length === backward.length
      ? Math.max(...bEnds)
      : null;
  const recEnd = restore ? (restore.confirmed?.at ?? null) : trafficEnd;

  const deviations: ReleaseRecordDocument["deviations"] = [];
  for (const s of release.step_runs) {
    const label = `${s.id} (${stepName(s.step_index)} ${s.direction})`;
    if (s.retries_used > 0)
      deviations.push({
        at: s.finished_at,
        what: `${label} was retried ${s.retries_used} time(s)`,
      });
    if (s.attempts.length > 1)
      deviations.push({
        at: s.finished_at,
        what: `${label} ran ${s.attempts.length} attempts (re-runs)`,
      });
    // A step run still in flight in an open release has not ended: not a deviation yet. In a
    // closed release it ended so (never heard back), and is one.
    const closed = TERMINAL_RELEASE_STATES.has(release.state);
    if (ENDED_BADLY.has(s.state) || (closed && s.state !== "succeeded" && s.state !== "planned"))
      deviations.push({
        at: s.finished_at,
        what: `${label} ended ${s.state}${s.last_error ? `: ${s.last_error}` : ""}`,
      });
  }
  if (backward.length > 0)
    deviations.push({
      at: recStart,
      what: `compensation ran ${backward.length} backward step run(s)`,
    });
  if (release.admission?.rollback)
    deviations.push({
      at: release.admission.at,
      what: "admitted as an explicit rollback (manifest older than the last admitted one)",
    });

  const known_gaps: string[] = [];
  if (!release.admission) known_gaps.push("no admission evidence: the release predates admission");
  else if (release.admission.mode !== "enforce")
    known_gaps.push(
      `admission was ${release.admission.mode}: the manifest's signer and the image's provenance were not verified`,
    );
  const rc = m.recovery;
  if (!rc) known_gaps.push("recovery class: the recipe declares none; reversible assumed");
  if (restore && !restore.confirmed)
    known_gaps.push(
      `recovery class recoverable: ${rollbackRestore ? `the rollback of ${release.lineage?.of} put traffic and images back` : "traffic was rolled back"} but nobody confirmed the restore action${release.state === "abandoned" ? " before the release was abandoned" : " yet"}: ${restore.action}`,
    );
  if (restore?.confirmed)
    deviations.push({
      at: restore.confirmed.at,
      what: rollbackRestore
        ? `restore action run by ${restore.confirmed.actor} after the rollback of ${release.lineage?.of} (recoverable): ${restore.confirmed.reason}`
        : `restore action run by ${restore.confirmed.actor} after the traffic rollback (recoverable): ${restore.confirmed.reason}`,
    });
  if (release.roll_forward_hold)
    deviations.push({
      at: release.roll_forward_hold.at,
      what: `not compensated (roll_forward_only, past step ${release.roll_forward_hold.unsafe_after + 1}): ${release.roll_forward_hold.why}`,
    });
  const unsafeStep = rc?.unsafe_after !== undefined ? m.steps[rc.unsafe_after] : undefined;
  if (!release.baseline)
    known_gaps.push(
      "observed lane states: no observed baseline (the engine could not list the control plane's lanes at start)",
    );
  else if (release.baseline.lanes.some((l) => !l.image))
    known_gaps.push(
      `observed images: the control plane did not report the image of ${release.baseline.lanes
        .filter((l) => !l.image)
        .map((l) => l.id)
        .join(", ")}; compensation restores previous_image there`,
    );
  const v = release.verification;
  if (backward.length > 0 && !v)
    known_gaps.push(
      `recovery verification: none was made (the undo ended before Baton verified recoveries); ${suggestedCommand("verify", { target: release.id })} reads the lanes now`,
    );
  if (v && v.gaps.length > 0)
    known_gaps.push(`recovery verification ${v.seq} could not observe: ${v.gaps.join("; ")}`);
  if (v?.state === "failed")
    deviations.push({
      at: v.at,
      what: `verification ${v.seq} found lanes not as desired: ${v.summary ?? "(no summary)"}`,
    });
  const incidents = incidentsOf(history, closed ? release.updated_at : Number.POSITIVE_INFINITY);
  const labels = latestLabels(release.id, o.evidence ?? []);
  if (labels && !labels.agree)
    deviations.push({
      at: labels.at,
      what: `release labels disagree: the router forwarded ${labels.router} requests labelled ${labels.release}, the lanes counted ${labels.lanes} under it (a lane that drops or rewrites baton-release; its requests cannot be traced to this release)`,
    });
  if (!closed) known_gaps.push(`the release is ${release.state}: this record is not final`);

  const closesAt = m.strategy === "blue_green" ? rollbackWindowClosesAt(release) : null;
  const oldEnv =
    closesAt !== null
      ? { lanes: blueLanes(m), image: m.previous_image, warm_until: closesAt }
      : null;
  const body = {
    record_version: RECORD_VERSION,
    release: {
      id: release.id,
      uid: release.uid ?? null,
      state: release.state,
      generation: release.generation,
      created_at: release.created_at,
      updated_at: release.updated_at,
      closed,
    },
    intended: {
      manifest_digest: release.manifest_digest,
      model: m.model,
      recipe_name: m.recipe_name,
      image: m.image,
      previous_image: m.previous_image,
      strategy: (m.strategy ?? "canary") as StrategyName,
      signer: release.admission?.signer ?? null,
      recovery_class: rc?.class ?? "reversible",
      recovery_policy: {
        declared: rc !== undefined,
        unsafe_after: unsafeStep
          ? {
              index: unsafeStep.index,
              name: unsafeStep.name,
              lane: unsafeStep.lane,
              wave: unsafeStep.wave,
            }
          : null,
        restore: rc?.restore ?? null,
      },
      rollout_policy: {
        waves: m.waves.map((w) => ({
          lanes: [...w.lanes],
          traffic: w.traffic,
          ...(w.analysis ? { analysis: w.analysis as unknown as Record<string, unknown> } : {}),
          ...(w.max_unavailable !== undefined ? { max_unavailable: w.max_unavailable } : {}),
          ...(w.shadow ? { phase: "shadow" as const, shadow: { ...w.shadow } } : {}),
        })),
        steps: m.steps.map((s) => ({
          index: s.index,
          name: s.name,
          lane: s.lane,
          wave: s.wave,
          retries: s.retries,
          on_failure: s.on_failure,
        })),
      },
    },
    ran: {
      high_water_mark: release.high_water_mark,
      step_runs: release.step_runs.map((s) => ({
        id: s.id,
        step_index: s.step_index,
        name: stepName(s.step_index),
        direction: s.direction,
        state: s.state,
        operation_key: s.operation_key,
        dispatches: s.dispatch,
        started_at: s.started_at,
        finished_at: s.finished_at,
        last_error: s.last_error,
        attempts: s.attempts.map((a) => ({
          n: a.n,
          run_id: a.run_id,
          run_attempt: a.run_attempt,
          sha: a.sha,
          state: a.state,
          status: a.status,
          overall: a.overall,
          run_by: a.run_by ? { ...a.run_by } : null,
          run_url: runUrl(o.repository, a.run_id, a.run_attempt),
        })),
      })),
      observed_lanes: observedLanes(release, o.attemptResults),
    },
    evidence: {
      admission: release.admission
        ? {
            mode: release.admission.mode,
            ok: release.admission.ok,
            at: release.admission.at,
            checks: release.admission.checks,
            issued_at: release.admission.issued_at,
            expires_at: release.admission.expires_at,
            rollback: release.admission.rollback,
          }
        : null,
      gates: gates as unknown as Record<string, unknown>[],
      // Only when the metrics source counts labels: other records (and digests) are unchanged.
      ...(labels ? { release_labels: labels } : {}),
      // Only when the manifest has a shadow phase: other records (and digests) are unchanged.
      ...(shadow.length > 0 ? { shadow } : {}),
      // Only when the recipe lists conformance checks: other records (and digests) are unchanged.
      ...(conformance.length > 0 ? { conformance } : {}),
      // Only on a rollback: the records (and fixed digests) of other releases are unchanged.
      ...(release.prerequisites
        ? {
            prerequisites: {
              ok: release.prerequisites.ok,
              at: release.prerequisites.at,
              image: release.prerequisites.image,
              asked_by: release.prerequisites.asked_by ?? "engine",
              checks: release.prerequisites.checks.map((c) => ({ ...c })),
            },
          }
        : {}),
    },
    // Only when an incident named the model while the release was open: other records (and
    // digests) are unchanged.
    ...(incidents.length ? { incidents } : {}),
    // Only when the manifest declares a migration: other records (and digests) are unchanged.
    ...(migration ? { migration } : {}),
    // Only for a succeeded blue-green release: other records (and digests) are unchanged.
    ...(oldEnv ? { old_environment: oldEnv } : {}),
    lineage: release.lineage
      ? {
          verb: release.lineage.verb,
          of: release.lineage.of,
          manifest_of: release.lineage.manifest_of ?? null,
          ...(release.lineage.switch_back ? { switch_back: true as const } : {}),
          chain: [...(o.chain ?? [])],
        }
      : null,
    recovery_verification: release.verification
      ? {
          seq: release.verification.seq,
          trigger: release.verification.trigger,
          requested_by: release.verification.requested_by,
          requested_at: release.verification.requested_at,
          desired_from: release.verification.desired_from,
          state: release.verification.state,
          at: release.verification.at,
          by: release.verification.by,
          summary: release.verification.summary,
          gaps: [...release.verification.gaps],
          lanes: release.verification.lanes.map((l) => ({
            lane: l.lane,
            ok: l.ok,
            target_source: l.target_source,
            fields: l.fields.map((f) => ({ ...f })),
          })),
        }
      : null,
    decisions,
    deviations,
    known_gaps,
    recovery: {
      class: rc?.class ?? "reversible",
      exercised: backward.length > 0 || rollbackRestore,
      held_for_roll_forward: release.roll_forward_hold
        ? {
            at: release.roll_forward_hold.at,
            unsafe_after: release.roll_forward_hold.unsafe_after,
            why: release.roll_forward_hold.why,
          }
        : null,
      started_at: recStart,
      traffic_restored_at: trafficEnd,
      restore: restore
        ? {
            action: restore.action,
            waited_since: restore.since,
            confirmed: restore.confirmed
              ? {
                  by: restore.confirmed.actor,
                  at: restore.confirmed.at,
                  what: restore.confirmed.reason,
                }
              : null,
            ...(restore.runs
              ? {
                  runs: restore.runs.map((x) => ({
                    by: x.actor,
                    why: x.reason,
                    point: x.point,
                    at: x.at,
                    step_run_id: x.step_run_id,
                    state: x.state,
                    finished_at: x.finished_at,
                    error: x.error,
                    report: x.report ? { ...x.report } : null,
                  })),
                }
              : {}),
          }
        : null,
      finished_at: recEnd,
      rto_ms: recStart !== null && recEnd !== null ? recEnd - recStart : null,
    },
  };
  const digest = closed ? recordDigest(body) : null;
  const acc = [...history]
    .reverse()
    .find((h) => h.kind === ACCEPT_KIND && h.outcome === "accepted");
  const ad = (acc?.data ?? null) as {
    actor?: string;
    expires_at?: number | null;
    note?: string;
    record_digest?: string;
  } | null;
  return {
    ...body,
    refused_events: history.filter((h) => h.outcome === "refused").length,
    digest,
    acceptance:
      acc && ad
        ? {
            by: ad.actor ?? "operator",
            at: acc.at,
            expires_at: ad.expires_at ?? null,
            note: ad.note ?? "",
            record_digest: ad.record_digest ?? "",
          }
        : null,
  };
}

/**
 * The release-label check of the latest gate evaluation that has one (the counts are
 * cumulative, so the latest covers every earlier one), or null.
 */
function latestLabels(
  releaseId: string,
  evidence: readonly GateEvidence[],
): { release: string; router: number; lanes: number; agree: boolean; at: number } | null {
  let best: GateEvidence | null = null;
  for (const e of evidence)
    if (e.labels && e.labels.release === releaseId && (!best || e.at >= best.at)) best = e;
  const l = best?.labels;
  return best && l
    ? { release: l.release, router: l.router, lanes: l.lanes, agree: l.agree, at: best.at }
    : null;
}

/**
 * The incidents written to the release's history (use-cases/incidents.ts) up to `until` (epoch
 * ms: when a closed release last changed, so its record stays fixed), one per incident, in
 * order of declaration or first mention.
 */
function incidentsOf(
  history: readonly HistoryEntry[],
  until: number,
): {
  id: string;
  severity: string;
  summary: string;
  commander: string;
  declared_at: number | null;
  resolved_at: number | null;
  resolution: string | null;
}[] {
  const out = new Map<string, ReturnType<typeof incidentsOf>[number]>();
  for (const h of history) {
    if (h.at > until || (h.kind !== "incident_declared" && h.kind !== "incident_resolved"))
      continue;
    const i = (h.data as { incident?: Record<string, unknown> } | null)?.incident;
    if (!i || typeof i.id !== "string") continue;
    const cur = out.get(i.id) ?? {
      id: i.id,
      severity: String(i.severity ?? ""),
      summary: String(i.summary ?? ""),
      commander: String(i.commander ?? ""),
      declared_at: null,
      resolved_at: null,
      resolution: null,
    };
    if (h.kind === "incident_declared")
      cur.declared_at = typeof i.opened_at === "number" ? i.opened_at : h.at;
    else {
      cur.resolved_at = typeof i.resolved_at === "number" ? i.resolved_at : h.at;
      cur.resolution = typeof i.resolution === "string" ? i.resolution : null;
    }
    out.set(i.id, cur);
  }
  return [...out.values()];
}
