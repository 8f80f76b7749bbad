/**
 * The release record's constants, apart from its zod schema (schema.ts) so that building a
 * record (build.ts) does not load the schema: the Workers bundle builds records and never
 * validates or publishes one. schema.ts re-exports both.
 */

/**
 * The record's shape version (docs/record.md "Versions"). A change of shape changes this, so a
 * digest an owner accepted is never recomputed from a different shape under the same number.
 * 1: the first record; 2: `ran.observed_lanes`, `lineage`, `recovery.traffic_restored_at` and
 * `recovery.restore` (a recoverable release's restore action and who confirmed it);
 * 3: `recovery_verification` (the latest recovery verification, lane by lane).
 */
export const RECORD_VERSION = 3 as const;

/** Where an observed lane state in the record comes from (`ran.observed_lanes[].source`). */
export const OBSERVED_SOURCES = [
  "control_plane_at_start",
  "traffic_assert",
  "target_report",
] as const;
