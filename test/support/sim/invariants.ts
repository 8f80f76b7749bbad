/**
 * End-of-run invariants over a simulated world
 * effects applied at most once per operation key, one workflow run per attempt, no forward
 * work after the release left running, compensation complete and in reverse order.
 */
import { guards } from "../../../engine/src/domain/transition/guards.ts";
import type { World } from "./world.ts";

/** Returns every broken invariant as a sentence (empty = all hold). */
export function finalViolations(w: World): string[] {
  const out = [...w.violations];
  const r = w.release;

  for (const [key, n] of [...w.cp.applications, ...w.target.applications]) {
    if (n > 1) out.push(`operation key ${key} applied ${n} times`);
  }
  if (w.refusedBody > 0)
    out.push(`${w.refusedBody} writes reused an operation key with another body`);
  for (const [attempt, runs] of w.executions) {
    if (runs.size > 1)
      out.push(
        `attempt ${attempt} executed by ${runs.size} workflow runs: ${[...runs].join(", ")}`,
      );
  }

  // A runner step run's success is its latest attempt's (rule 6: older attempts are fenced).
  for (const s of r.step_runs) {
    const last = s.attempts[s.attempts.length - 1];
    if (
      s.kind === "runner" &&
      s.state === "succeeded" &&
      (last?.state !== "succeeded" || last.dispatch !== s.dispatch)
    ) {
      out.push(`${s.id} succeeded but its latest attempt is ${last?.state ?? "missing"}`);
    }
  }

  // Receivers never see a forward write after compensation's first write.
  const firstBwd = w.log.find((a) => a.direction === "bwd");
  if (firstBwd) {
    const late = w.log.find((a) => a.direction === "fwd" && a.seq > firstBwd.seq);
    if (late)
      out.push(
        `forward write ${late.operation_key} applied after backward write ${firstBwd.operation_key}`,
      );
  }

  const bwdRuns = r.step_runs.filter((s) => s.direction === "bwd");
  if (r.state === "succeeded") {
    if (bwdRuns.length > 0) out.push("a succeeded release has backward step runs");
    if (r.step_runs.some((s) => s.state !== "succeeded"))
      out.push("a succeeded release has unfinished step runs");
  }
  if (r.state === "aborted" && w.log.length > 0) {
    out.push(`aborted with nothing to undo, yet ${w.log.length} writes were applied`);
  }
  if (r.state === "rolled_back") {
    const expected: number[] = [];
    for (let i = r.high_water_mark; i >= 0; i--) {
      const fwd = r.step_runs.find((s) => s.step_index === i && s.direction === "fwd");
      if (r.manifest.steps[i]?.backward && fwd && guards.mayHaveTakenEffect(fwd)) expected.push(i);
    }
    const actual = bwdRuns.map((s) => s.step_index);
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      out.push(
        `compensated steps ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)} (hwm ${r.high_water_mark})`,
      );
    }
    if (bwdRuns.some((s) => s.state !== "succeeded"))
      out.push("rolled back with an unfinished backward step run");
    // Rolled back only once a reading of the control plane found every lane as at start.
    if (r.verification?.state !== "passed")
      out.push(`rolled back without a passed verification (${r.verification?.state ?? "none"})`);
    for (const l of r.manifest.lanes) {
      const start = r.baseline?.lanes.find((b) => b.id === l.id);
      if (
        start &&
        ((w.cp.weights[l.id] ?? 0) !== start.weight ||
          w.cp.excluded.has(l.id) !== start.excluded ||
          w.cp.advertised.has(l.id) !== start.advertised)
      )
        out.push(`rolled back but lane ${l.id} is not as at start in the control plane`);
    }
    // Receiver truth: every forward write that reached a receiver is undone.
    for (const a of w.log) {
      if (
        a.direction === "fwd" &&
        r.manifest.steps[a.step_index]?.backward &&
        !expected.includes(a.step_index)
      ) {
        out.push(
          `forward write ${a.operation_key} reached its receiver but step ${a.step_index} was not compensated`,
        );
      }
    }
    // Backward writes land in reverse step order.
    const order = w.log.filter((a) => a.direction === "bwd").map((a) => a.step_index);
    if (order.some((v, i) => i > 0 && v >= order[i - 1]!))
      out.push(`backward writes out of order: ${order.join(",")}`);
    // Traffic ends where it was before the first traffic step that took effect (absolute).
    // (drain_wave and set_traffic are both absolute traffic writes.)
    const firstTraffic = w.log.find((a) => {
      const f = r.manifest.steps[a.step_index]?.forward;
      return a.direction === "fwd" && f?.kind === "control_plane" && f.request.op === "set_traffic";
    });
    const back = firstTraffic ? r.manifest.steps[firstTraffic.step_index]?.backward : null;
    if (
      back?.kind === "control_plane" &&
      back.request.op === "set_traffic" &&
      !w.cp.matches(back.request)
    ) {
      out.push(
        `rolled back but traffic is ${JSON.stringify(w.cp.weights)}, want ${JSON.stringify(back.request.weights)}`,
      );
    }
  }
  return out;
}
