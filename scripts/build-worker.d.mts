// Types of scripts/build-worker.mjs (a plain ES module run by node) for the tests and the bench.
import type { Metafile } from "esbuild";

/** The two Workers' entries (repository-relative): the engine and the dashboard. */
export declare const WORKER_ENTRIES: { engine: string; dashboard: string };

/** The most the engine Worker's modules may weigh together, bytes as uploaded. */
export declare const WORKER_BUNDLE_BUDGET_BYTES: number;

/** The most the dashboard Worker's modules may weigh together, bytes as uploaded. */
export declare const DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES: number;

/** What one build wrote: `bytes` of every module, their gzip size, and esbuild's metafile. */
export interface WorkerBuild {
  bytes: number;
  gzipBytes: number;
  metafile: Metafile;
}

/** Bundles the Workers entry (or `o.entry`) to `outfile`. */
export declare function buildWorker(
  outfile: string,
  o?: { entry?: string; alias?: Record<string, string>; minify?: boolean; sourcemap?: boolean },
): Promise<WorkerBuild>;

/** Output bytes per npm package and per engine folder, largest first. */
export declare function breakdown(
  metafile: Metafile,
  depth?: number,
): { name: string; bytes: number }[];
