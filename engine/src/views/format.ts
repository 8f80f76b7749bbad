/**
 * Small formatting helpers for the dashboard: times (UTC, to the second), durations,
 * GitHub run links and check ordering. Pure; no I/O.
 */
import type { Json, Release } from "../domain/types.ts";

/** Epoch ms -> `2026-11-29 02:00:00Z` (UTC, so every reader sees the same clock). */
export function time(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")}Z`;
}

/** A duration in ms -> `850 ms`, `42 s`, `3 m 05 s`, `2 h 04 m`. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} m`;
}

/** Duration from `start` to `end` (or to `now` while still running), in words. */
export function span(start: number | null, end: number | null, now: number): string {
  if (start === null) return "—";
  return duration((end ?? now) - start);
}

/**
 * Link to one attempt of a GitHub Actions run:
 * `https://github.com/<owner/repo>/actions/runs/<run_id>/attempts/<run_attempt>`;
 * null when the repository is unknown (no link can be built).
 */
export function runLink(
  repository: string | undefined,
  runId: string,
  runAttempt: number,
): string | null {
  return runLinks(repository)?.(runId, runAttempt) ?? null;
}

/**
 * `runLink` for many attempts of one repository (a page's step table): the repository is
 * checked once; null when no link can be built for it.
 */
export function runLinks(
  repository: string | undefined,
): ((runId: string, runAttempt: number) => string) | null {
  if (!repository || !/^[\w.-]+\/[\w.-]+$/.test(repository)) return null;
  return (runId, runAttempt) =>
    `https://github.com/${repository}/actions/runs/${encodeURIComponent(runId)}/attempts/${runAttempt}`;
}

/** A check record as the dashboard reads it from `checks.json` (any JSON is accepted). */
export interface CheckRow {
  name: string;
  status: string;
  exit_code: string;
  signal: string;
  duration: string;
  message: string;
  failing: boolean;
}

const PASSING = new Set(["pass", "passed", "ok", "success", "succeeded", "skipped"]);

/**
 * `checks.json` -> rows, failing checks first (stable otherwise). A check is failing unless
 * its status is one of pass/passed/ok/success/succeeded/skipped; `not_run` counts as failing
 * because nothing proved it. Returns null when `checks` is not an array.
 */
export function checkRows(checks: Json): CheckRow[] | null {
  if (!Array.isArray(checks)) return null;
  const rows = checks.map((c): CheckRow => {
    const o = c !== null && typeof c === "object" && !Array.isArray(c) ? c : {};
    const str = (v: Json | undefined) =>
      v === undefined || v === null ? "—" : typeof v === "string" ? v : JSON.stringify(v);
    const status = typeof o.status === "string" ? o.status : "unknown";
    return {
      name: str(o.name),
      status,
      exit_code: str(o.exit_code),
      signal: str(o.signal),
      duration: typeof o.duration_ms === "number" ? duration(o.duration_ms) : "—",
      message: typeof o.message === "string" ? o.message : "",
      failing: !PASSING.has(status.toLowerCase()),
    };
  });
  return [...rows.filter((r) => r.failing), ...rows.filter((r) => !r.failing)];
}

/** The last `lines` lines of a log. */
export function tail(log: string, lines: number): { text: string; cut: number } {
  const all = log.split("\n");
  if (all.at(-1) === "") all.pop();
  if (all.length <= lines) return { text: all.join("\n"), cut: 0 };
  return { text: all.slice(-lines).join("\n"), cut: all.length - lines };
}

/** JSON for people: pretty-printed when `raw` parses, the raw text otherwise. */
export function prettyJson(raw: string): string {
  try {
    return JSON.stringify(JSON.parse(raw), null, 2);
  } catch {
    return raw;
  }
}

/** `sr_17_6_f` -> `r17`; null when the id does not have that shape. */
export function releaseOfStepRun(stepRunId: string): string | null {
  const m = /^sr_([0-9]{1,12})_[0-9]{1,4}_[fb]$/.exec(stepRunId);
  return m ? `r${m[1]}` : null;
}

/**
 * An image for people, short enough for a phone: `ghcr.io/acme/ranker:v3.1@sha256:2a1b…` ->
 * `ranker:v3.1@sha256:2a1b3c4d5e6f…` (the last path segment with its tag, the digest's first
 * 12 hex). A reference without a digest is kept (cut at 60 characters).
 */
export function shortImage(ref: string): string {
  const at = ref.indexOf("@sha256:");
  if (at < 0) return ref.length > 60 ? `${ref.slice(0, 57)}…` : ref;
  const name = ref.slice(0, at).split("/").at(-1) ?? "";
  return `${name}@sha256:${ref.slice(at + 8, at + 20)}…`;
}

/**
 * Which image a lane runs, for people: the release's candidate, or the baseline it replaces; of
 * a switch back (a rollback of a blue-green release), `restored` (the old environment it moved
 * every request back to) or `switched away` (the lanes it moved them off, still on the image it
 * undid).
 */
export type ImageRole = "candidate" | "baseline" | "restored" | "switched away";

/**
 * The role of a lane of `r` running its image (`new`, the manifest's `image`) or the one it
 * replaces (`previous`); `imageLabel` and `trafficOn` word it. One rule for the CLI, the lanes
 * view and the dashboard.
 */
export function imageRole(r: Pick<Release, "lineage">, image: "new" | "previous"): ImageRole {
  if (r.lineage?.switch_back === true) return image === "new" ? "restored" : "switched away";
  return image === "new" ? "candidate" : "baseline";
}

/**
 * What `r`'s traffic is on, for people, before its image: `the candidate`, or for a switch back
 * `the restored old environment` (the image that serves after it).
 */
export function trafficOn(r: Pick<Release, "lineage">): string {
  return imageRole(r, "new") === "restored" ? "the restored old environment" : "the candidate";
}

/** `ranker:v3.1@sha256:2a1b3c4d5e6f… (candidate)`. */
export function imageLabel(ref: string, role: ImageRole): string {
  return `${shortImage(ref)} (${role})`;
}

/** `1,240`: a count for people (thousands separated by commas, whatever the locale). */
export function count(n: number): string {
  return Math.round(n)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}
