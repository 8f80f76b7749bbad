/**
 * Recovery verification as data (docs/lifecycle.md "Recovery verification"), pure: what each
 * lane should be once an undo ended (the observed baseline) or once a release succeeded (the
 * manifest's declared end state), and the judgement of what the control plane and the targets
 * show against it, field by field: image (as the target reports it), weight, the `excluded`
 * marker, capabilities, and the lane's health check. The reading is the reconciler's
 * (service/perform/verify.ts); the transition only compares (transition/verify.ts).
 */
import { isSwitchBackCheck } from "./blue-green.ts";
import { withoutWithdrawn } from "./kill-switch.ts";
import { isProbeStep } from "./prerequisites.ts";
import { digestOf } from "./result-evidence.ts";
import type { Release } from "./types.ts";
import type {
  FieldVerdict,
  LaneDesired,
  LaneReading,
  LaneVerdict,
  TargetAnswer,
  VerificationReading,
} from "./verification-shapes.ts";

export type {
  ControlPlaneObservation,
  FieldVerdict,
  LaneDesired,
  LaneReading,
  LaneVerdict,
  RecoveryVerification,
  TargetAnswer,
  TargetObservation,
  VerificationReading,
  VerifyField,
} from "./verification-shapes.ts";
export { VERIFY_FIELDS } from "./verification-shapes.ts";

/** Attempts of one verification's reads before it fails for want of a reading (read errors). */
export const VERIFY_TRIES_MAX = 5;

/**
 * Reads what `deploy.sh smoke --image IMAGE` printed (one JSON line per phase: `running`, with
 * the container's `image` as the runtime reports it, then `health`) into an answer (pure). A
 * `running` phase that failed means the container of `image` is not running (image null); no
 * `running` line at all is an answer that proves nothing, said in the message.
 */
export function answerFromSmoke(stdout: string, deployScript: string): TargetAnswer {
  const lines = new Map<string, { status: string; message?: string; image?: string }>();
  for (const raw of stdout.split("\n")) {
    try {
      const l = JSON.parse(raw) as { phase?: unknown; status?: unknown };
      if (l && typeof l.phase === "string" && typeof l.status === "string")
        lines.set(l.phase, l as { status: string });
    } catch {
      // not a result line
    }
  }
  const running = lines.get("running");
  const health = lines.get("health");
  if (!running) {
    const args = lines.get("args");
    return {
      reached: true,
      running: null,
      image: null,
      health: null,
      message: `${deployScript} smoke printed no running line: ${args?.message ?? (stdout.trim().slice(-200) || "no output")}`,
    };
  }
  const ok = running.status === "ok";
  const words = [running.message, health?.message].filter(Boolean).join("; ");
  return {
    reached: true,
    running: ok,
    image: ok ? (running.image ?? null) : null,
    health:
      health?.status === "ok" ? "pass" : health?.status === "failed" ? "fail" : ok ? "fail" : null,
    message: words || `running ${running.status}, health ${health?.status ?? "not reported"}`,
  };
}

function sorted(caps: readonly string[]): string[] {
  return [...new Set(caps)].sort();
}

function restoreImageOf(r: Release, lane: string): string {
  const b = r.baseline?.lanes.find((l) => l.id === lane);
  return b?.image ?? r.manifest.previous_image;
}

/**
 * Lanes a runner step of `r` may have changed on the machine: a runner step run (not a probe,
 * not a switch back's health check) of the lane (either direction) that opened an attempt not
 * proven to have run nothing.
 */
export function touchedLanes(r: Release): Set<string> {
  const out = new Set<string>();
  for (const sr of r.step_runs) {
    if (sr.kind !== "runner") continue;
    const step = r.manifest.steps[sr.step_index];
    // A probe and a switch back's health check only read the lane.
    if (!step?.lane || isProbeStep(step) || isSwitchBackCheck(step)) continue;
    if (sr.attempts.length > 0 && !sr.attempts.every((a) => a.nothing_ran === true)) {
      out.add(step.lane);
    }
  }
  return out;
}

/**
 * The lanes at start: the observed baseline, else what the plan was compiled against (the
 * recipe's weights, not excluded, its capabilities not advertised).
 */
function startOf(r: Release): Map<string, Omit<LaneDesired, "target" | "image">> {
  const out = new Map<string, Omit<LaneDesired, "target" | "image">>();
  for (const l of r.manifest.lanes) {
    const b = r.baseline?.lanes.find((x) => x.id === l.id);
    out.set(
      l.id,
      b
        ? {
            id: l.id,
            weight: b.weight,
            excluded: b.excluded,
            capabilities: sorted(b.capabilities),
            advertised: b.advertised,
          }
        : // What the plan was compiled against without an observed baseline (compile.ts).
          {
            id: l.id,
            weight: l.baseline_weight,
            excluded: false,
            capabilities: sorted(l.capabilities),
            advertised: false,
          },
    );
  }
  return out;
}

/**
 * After an undo: every lane as it was at start (the observed baseline, which compensation
 * restores; rule 9). The image is the one the lane ran at start, else the recipe's
 * `previous_image` where a restore deployed it; unknown (not compared) on a lane no step
 * deployed whose image the baseline could not tell.
 */
export function desiredAfterUndo(r: Release): LaneDesired[] {
  const touched = touchedLanes(r);
  return [...startOf(r).values()].map((l) => {
    const known = r.baseline?.lanes.find((b) => b.id === l.id)?.image ?? null;
    return {
      ...l,
      image: known ?? (touched.has(l.id) ? restoreImageOf(r, l.id) : null),
      target: touched.has(l.id),
    };
  });
}

/**
 * After a release succeeded: the manifest's declared end state, its forward actions replayed
 * over the lanes at start (traffic weights, markers, capabilities in step order; the image of
 * each lane's deploy). Every lane a deploy step names is asked at its machine, and so is every
 * old-environment lane a switch back moved the traffic to (its health check names the image
 * it runs): the lanes serving now, as after a rollback that redeployed them.
 */
export function desiredAfterSuccess(r: Release): LaneDesired[] {
  const lanes = startOf(r);
  const images = new Map<string, string>();
  for (const step of r.manifest.steps) {
    const a = step.forward;
    if (a.kind === "runner") {
      const image = a.args.image;
      // A deploy puts its image on the lane; a switch back's health check names the image of
      // the old-environment lane it moves the traffic to, which serves it from then on.
      const sets = step.name === "attach_queue_lane" || isSwitchBackCheck(step);
      if (step.lane && sets && typeof image === "string") images.set(step.lane, image);
      continue;
    }
    const req = a.request;
    if (req.op === "set_traffic") {
      for (const [id, l] of lanes) l.weight = Object.hasOwn(req.weights, id) ? req.weights[id]! : 0;
    } else if (req.op === "set_marker") {
      const l = lanes.get(req.lane);
      if (l) l.excluded = req.present;
    } else if (req.op === "set_capabilities") {
      const l = lanes.get(req.lane);
      if (l) {
        l.capabilities = sorted(req.capabilities);
        l.advertised = req.advertised;
      }
    }
  }
  return [...lanes.values()].map((l) => ({
    ...l,
    image: images.get(l.id) ?? r.baseline?.lanes.find((b) => b.id === l.id)?.image ?? null,
    target: images.has(l.id),
  }));
}

function sameImage(a: string, b: string): boolean {
  const da = digestOf(a);
  return da !== null ? da === digestOf(b) : a === b;
}

/** One lane's verdict from its desired state and its reading (pure). */
export function judgeLane(want: LaneDesired, got: LaneReading | undefined): LaneVerdict {
  const fields: FieldVerdict[] = [];
  const cp = got?.control_plane ?? null;
  const unlisted = "the control plane does not list the lane";
  fields.push(
    cp
      ? {
          field: "weight",
          desired: want.weight,
          observed: cp.weight,
          ok: cp.weight === want.weight,
          note:
            cp.weight === want.weight
              ? null
              : `weight desired ${want.weight}% observed ${cp.weight}%`,
        }
      : { field: "weight", desired: want.weight, observed: null, ok: false, note: unlisted },
  );
  fields.push(
    cp
      ? {
          field: "excluded",
          desired: want.excluded,
          observed: cp.excluded,
          ok: cp.excluded === want.excluded,
          note:
            cp.excluded === want.excluded
              ? null
              : `excluded marker desired ${want.excluded} observed ${cp.excluded}`,
        }
      : { field: "excluded", desired: want.excluded, observed: null, ok: false, note: unlisted },
  );
  const wantCaps = { capabilities: want.capabilities, advertised: want.advertised };
  if (cp) {
    const caps = sorted(cp.capabilities);
    const same =
      cp.advertised === want.advertised &&
      caps.length === want.capabilities.length &&
      caps.every((c, i) => c === want.capabilities[i]);
    fields.push({
      field: "capabilities",
      desired: wantCaps,
      observed: { capabilities: caps, advertised: cp.advertised },
      ok: same,
      note: same
        ? null
        : `capabilities desired ${JSON.stringify(want.capabilities)} (advertised ${want.advertised}) observed ${JSON.stringify(caps)} (advertised ${cp.advertised})`,
    });
  } else {
    fields.push({
      field: "capabilities",
      desired: wantCaps,
      observed: null,
      ok: false,
      note: unlisted,
    });
  }
  const t = got?.target ?? null;
  if (!want.target || !t) {
    const why = !want.target
      ? "not asked: no runner step of the release took effect on the lane's machine, so it was left as it was"
      : `not observed: ${got?.target_gap ?? "no reading of the lane's machine"}`;
    fields.push({ field: "image", desired: want.image, observed: null, ok: null, note: why });
    fields.push({ field: "health", desired: "pass", observed: null, ok: null, note: why });
  } else if (!t.reached) {
    const why = `could not ask the lane's machine: ${t.message}`;
    fields.push({ field: "image", desired: want.image, observed: null, ok: false, note: why });
    fields.push({ field: "health", desired: "pass", observed: null, ok: false, note: why });
  } else {
    if (want.image === null) {
      fields.push({
        field: "image",
        desired: null,
        observed: t.image,
        ok: null,
        note: "not compared: the lane's image at start is unknown (the control plane did not report it)",
      });
    } else if (t.running === false) {
      fields.push({
        field: "image",
        desired: want.image,
        observed: null,
        ok: false,
        note: `image desired ${want.image} is not running (${t.message})`,
      });
    } else if (t.image === null) {
      fields.push({
        field: "image",
        desired: want.image,
        observed: null,
        ok: null,
        note: `not observed: the target's answer names no running image (${t.message})`,
      });
    } else {
      const ok = sameImage(t.image, want.image);
      fields.push({
        field: "image",
        desired: want.image,
        observed: t.image,
        ok,
        note: ok ? null : `image desired ${want.image} observed ${t.image}`,
      });
    }
    fields.push(
      t.health === null
        ? {
            field: "health",
            desired: "pass",
            observed: null,
            ok: null,
            note: `not observed: ${t.message}`,
          }
        : {
            field: "health",
            desired: "pass",
            observed: t.health,
            ok: t.health === "pass",
            note: t.health === "pass" ? null : `health check failed: ${t.message}`,
          },
    );
  }
  return {
    lane: want.id,
    ok: fields.every((f) => f.ok !== false),
    fields,
    target_source: want.target && t ? t.source : null,
  };
}

/** The verdicts of every desired lane, the gaps, and whether all passed (pure). */
export function judgeVerification(
  desired: readonly LaneDesired[],
  reading: VerificationReading,
): { passed: boolean; lanes: LaneVerdict[]; gaps: string[]; summary: string } {
  const byId = new Map(reading.lanes.map((l) => [l.id, l]));
  const withdrawn = reading.withdrawn ?? [];
  const lanes = desired.map((want) =>
    judgeLane(
      withdrawn.length
        ? { ...want, capabilities: withoutWithdrawn(want.capabilities, withdrawn) }
        : want,
      byId.get(want.id),
    ),
  );
  const gaps = lanes.flatMap((l) =>
    l.fields
      .filter((f) => f.ok === null && f.field !== "health")
      .map((f) => `lane ${l.lane} ${f.field} ${f.note}`),
  );
  const failed = lanes.filter((l) => !l.ok);
  const passed = failed.length === 0;
  return { passed, lanes, gaps, summary: verdictWords(lanes) };
}

/** `passed on lanes a, b` or `lane-b image desired … observed …; lane-c weight …` (pure). */
export function verdictWords(lanes: readonly LaneVerdict[]): string {
  const failed = lanes.filter((l) => !l.ok);
  if (failed.length === 0) {
    return `every lane is as desired (${lanes.map((l) => l.lane).join(", ") || "no lanes"})`;
  }
  return failed
    .map(
      (l) =>
        `lane ${l.lane}: ${l.fields
          .filter((f) => f.ok === false)
          .map((f) => f.note ?? f.field)
          .join("; ")}`,
    )
    .join("; ");
}
