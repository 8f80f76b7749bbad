/**
 * The history entries the engine writes beside the transition's own: what a release's creation
 * records (created, admission, rollback prerequisites, observed baseline), an owner's
 * acceptance, and the request count a bounded refusal row carries. Pure text and data; the
 * service stores them.
 */

import type { AdmissionReport } from "./admission.ts";
import { PROBE_TOOL, type PrerequisiteReport, prerequisitesSummary } from "./prerequisites.ts";
import { switchBackWords } from "./switch-back-words.ts";
import type { HistoryEntry, Json, Lineage, Manifest, ObservedBaseline, Release } from "./types.ts";

/** History kind of an owner's acceptance of a closed release (docs/record.md "Acceptance"). */
export const ACCEPT_KIND = "accepted_by_owner";

/** What a new release's history records, and how it was asked for. */
export interface CreationFacts {
  /** The release as created (`pending`): id and manifest digest. */
  release: Pick<Release, "id" | "manifest_digest">;
  actor: string;
  /** The recipe as admitted, kept for a later rollback to this manifest. */
  recipe: unknown;
  /** The recipe's own compiled manifest (what admission checked): name and step count. */
  admitted: Pick<Manifest, "recipe_name">;
  /**
   * The plan that runs (against the observed baseline, with probe steps; a switch back's own
   * plan): model, images, and its steps, counted in the `created` message.
   */
  plan: Pick<Manifest, "model" | "image" | "previous_image" | "steps">;
  admission: AdmissionReport;
  /** How the admission's signer is named (`describeSigner`), null when none signed. */
  signer: string | null;
  hold?: boolean;
  exposure?: "dark";
  lineage?: Lineage;
  bundle?: unknown;
  attestations?: unknown[];
  prerequisites?: PrerequisiteReport;
  baseline?: ObservedBaseline | null;
  /** Epoch ms. */
  now: number;
}

/** One accepted engine entry of release `id` (no step run). */
function note(id: string, at: number, kind: string, message: string, data: Json): HistoryEntry {
  return { release_id: id, at, kind, step_run_id: null, outcome: "accepted", message, data };
}

/**
 * The entries a release is created with, in order: `created` (with the recipe and bundles as
 * admitted: what a later rollback to this manifest sends again), `admission`, and when present
 * `prerequisites` and `baseline`.
 */
export function creationHistory(f: CreationFacts): HistoryEntry[] {
  const id = f.release.id;
  const dark = f.exposure === "dark";
  const created = note(
    id,
    f.now,
    "created",
    `[engine] release ${id} created by ${f.actor} from recipe ${f.admitted.recipe_name} (${f.plan.steps.length} steps)${lineageMessage(f.lineage, f.plan)}${f.hold ? "; held pending until resumed" : ""}${dark ? "; deployed dark: it waits at 0% exposure before its first traffic write until released" : ""}`,
    // History rows are written once, never rewritten.
    {
      actor: f.actor,
      manifest_digest: f.release.manifest_digest,
      hold: f.hold === true,
      ...(dark ? { exposure: "dark" } : {}),
      ...(f.lineage ? { lineage: f.lineage as unknown as Json } : {}),
      recipe: f.recipe as Json,
      ...(f.bundle !== undefined ? { bundle: f.bundle as Json } : {}),
      ...(f.attestations?.length ? { attestations: f.attestations as Json } : {}),
    },
  );
  const out = [
    created,
    note(
      id,
      f.now,
      "admission",
      admissionMessage(f.admission, f.signer),
      f.admission as unknown as Json,
    ),
  ];
  const p = f.prerequisites;
  if (p) {
    out.push(
      note(
        id,
        f.now,
        "prerequisites",
        p.asked_by === "runner"
          ? `[engine] rollback prerequisites: each lane's machine is asked by a read-only runner step (${PROBE_TOOL}) before anything of the rollback is applied: ${prerequisitesSummary(p)}`
          : `[engine] rollback prerequisites asked of the lanes' machines: ${prerequisitesSummary(p)}`,
        p as unknown as Json,
      ),
    );
  }
  const b = f.baseline;
  if (b) {
    const lanes = b.lanes
      .map(
        (l) =>
          `${l.id} ${l.weight}%${l.excluded ? " excluded" : ""}${l.advertised ? ` advertising ${l.capabilities.join(",") || "nothing"}` : ""} running ${l.image ?? "an image the control plane does not report"}`,
      )
      .join(", ");
    out.push(
      note(
        id,
        f.now,
        "baseline",
        `[engine] observed baseline of model ${f.plan.model} at the control plane: ${lanes}; compensation restores exactly this (a lane whose image is unknown gets ${f.plan.previous_image})`,
        b as unknown as Json,
      ),
    );
  }
  return out;
}

/** The admission entry's message: off, or the checks passed and who signed. */
export function admissionMessage(r: AdmissionReport, signer: string | null): string {
  if (r.mode === "off") return "[admission] off (BATON_ADMISSION=off): no check ran";
  return `[admission] passed ${r.checks.filter((c) => c.outcome === "pass").length} checks (${r.checks.map((c) => `${c.check} ${c.outcome}`).join(", ")}); signed by ${signer ?? "nobody"}${r.rollback ? "; explicit rollback" : ""}`;
}

/** The `created` message's lineage clause (rollback or roll forward), "" for a plain start. */
export function lineageMessage(
  l: Lineage | undefined,
  m: Pick<Manifest, "image" | "previous_image">,
): string {
  if (!l) return "";
  if (l.verb === "rollback" && l.switch_back)
    return `; a rollback of ${l.of} by ${switchBackWords(l.of)}; its old environment is still warm on ${m.image}, and its undo switches to ${m.previous_image} again`;
  return l.verb === "rollback"
    ? `; an explicit rollback of ${l.of}: ${l.manifest_of}'s admitted manifest runs again (image ${m.image}), its undo restores ${m.previous_image}`
    : `; a roll forward past ${l.of} (image ${m.image}, no going back to ${l.of}'s manifest)`;
}

/**
 * The entry of an owner's acceptance of closed release `release` (record digest `digest`), at
 * `now`, until `expires_at` (epoch ms; null: no expiry), with an optional note.
 */
export function acceptanceEntry(
  release: Pick<Release, "id" | "state">,
  o: { by: string; digest: string; expires_at: number | null; note: string; now: number },
): HistoryEntry {
  const until = o.expires_at !== null ? ` until ${new Date(o.expires_at).toISOString()}` : "";
  return note(
    release.id,
    o.now,
    ACCEPT_KIND,
    `[engine] ${o.by} accepted the final state of ${release.id} (${release.state}, record sha256:${o.digest.slice(0, 12)}…)${until}${o.note ? `: ${o.note}` : ""}`,
    { actor: o.by, expires_at: o.expires_at, note: o.note, record_digest: o.digest },
  );
}

/** `h` with `requests` (how many refusals the row stands for) in its data. */
export function withRequests(h: HistoryEntry, requests: number): HistoryEntry {
  const base =
    h.data !== null && typeof h.data === "object" && !Array.isArray(h.data)
      ? h.data
      : { value: h.data };
  return { ...h, data: { ...base, requests } };
}
