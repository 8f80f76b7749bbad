/**
 * Fault-injection points for crash tests (docs/faults.md).
 *
 * `faultPoint(name, detail)` does nothing unless the environment variable `BATON_FAULT` names
 * this point: `name` matches every call of it, `name@key=value,key2=value2` only calls whose
 * `detail` has those values. A matching point SIGKILLs its own process, so nothing after it
 * runs: no `finally`, no flush, exactly like a power cut.
 *
 * In-process tests cannot survive a SIGKILL, so they may call `setFaultAction("throw")`: the
 * point then throws `FaultCrash`, which the reconciler lets propagate (it never treats a
 * simulated crash as an ordinary failure of the effect).
 *
 * With `BATON_FAULT_TRACE=<file>`, every call appends `{"name","detail"}` as one JSON line to
 * that file (test/chaos enumerates the kill points from an uninjected run this way).
 *
 * Portable: the environment, the trace file and the kill come from a `FaultHost` the Node entry
 * installs (node/fault-host.ts); on a runtime without one, only `setFault` + `throw` act.
 */

/** What a fault point needs from its process: the environment, a trace file, a hard kill. */
export interface FaultHost {
  env(name: string): string | undefined;
  appendTrace(file: string, line: string): void;
  /** Ends the process at once (SIGKILL), after saying so on stderr. */
  kill(point: string): void;
}

let host: FaultHost | null = null;

/** Installs the process's fault host (the Node entry does; nothing else needs to). */
export function installFaultHost(h: FaultHost | null): void {
  host = h;
}

/** The points the engine calls, in the order a callback-driven step passes them. */
export const FAULT_POINTS = [
  "after_commit_before_effect",
  "after_effect_before_outcome",
  "in_callback_before_commit",
  "after_callback_commit",
] as const;
export type FaultPointName = (typeof FAULT_POINTS)[number];

/** Thrown by a matching fault point when the action is `throw` (in-process tests only). */
export class FaultCrash extends Error {
  constructor(readonly point: string) {
    super(`[engine] simulated crash at fault point ${point}`);
    this.name = "FaultCrash";
  }
}

let action: "kill" | "throw" = "kill";
let override: string | null | undefined;

/** Chooses what a matching point does: SIGKILL the process (default) or throw `FaultCrash`. */
export function setFaultAction(a: "kill" | "throw"): void {
  action = a;
}

/** Sets the fault spec in-process instead of `BATON_FAULT` (`undefined` reads the env again). */
export function setFault(spec: string | null | undefined): void {
  override = spec;
}

/** Parses `name` or `name@k=v,k2=v2`. Returns null for an empty spec. */
export function parseFaultSpec(
  spec: string | null | undefined,
): { name: string; match: Record<string, string> } | null {
  if (!spec) return null;
  const at = spec.indexOf("@");
  const name = (at < 0 ? spec : spec.slice(0, at)).trim();
  const match: Record<string, string> = {};
  if (at >= 0) {
    for (const pair of spec.slice(at + 1).split(",")) {
      const eq = pair.indexOf("=");
      if (eq > 0) match[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
    }
  }
  return name ? { name, match } : null;
}

/**
 * Crashes here when `BATON_FAULT` (or `setFault`) names this point and its details match.
 * @param detail values a spec may match on, e.g. `{ step_run_id: "sr_1_0_f" }`.
 */
export function faultPoint(
  name: FaultPointName,
  detail: Record<string, string | number> = {},
): void {
  // Crash harness (test/chaos): a dry run records every call so the kill points can be enumerated.
  const trace = host?.env("BATON_FAULT_TRACE");
  if (trace) host?.appendTrace(trace, `${JSON.stringify({ name, detail })}\n`);
  const spec = parseFaultSpec(override === undefined ? host?.env("BATON_FAULT") : override);
  if (!spec || spec.name !== name) return;
  for (const [k, v] of Object.entries(spec.match)) {
    if (String(detail[k]) !== v) return;
  }
  if (action === "throw" || !host) throw new FaultCrash(name);
  host.kill(name);
}
