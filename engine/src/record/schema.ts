/**
 * The deployment release record (docs/record.md): one JSON document per release: what was
 * intended, what ran, the evidence, every decision, deviations and known gaps, recovery
 * time, and the owner's acceptance. The schema is the type; its JSON Schema is published at
 * engine/schema/release-record.schema.json (`npm run schema`; a test keeps it current).
 */

import * as z from "zod";
import { RELEASE_STATES } from "../domain/states.ts";
import { STRATEGIES } from "../domain/strategy.ts";
import { OBSERVED_SOURCES, RECORD_VERSION } from "./constants.ts";
import { MigrationRecord } from "./migration.ts";

export { OBSERVED_SOURCES, RECORD_VERSION };

/** Where the generated JSON Schema of the record lives, relative to the repository root. */
export const RECORD_SCHEMA_PATH = "engine/schema/release-record.schema.json";

const Ms = z.number().int().describe("epoch milliseconds");
const Signer = z.union([
  z.object({ kind: z.literal("key"), key_id: z.string() }),
  z.object({ kind: z.literal("keyless"), san: z.string(), issuer: z.string() }),
]);
const FieldVerdict = z.object({
  field: z.enum(["image", "weight", "excluded", "capabilities", "health"]),
  desired: z
    .unknown()
    .describe(
      'what the lane should be (image ref, %, boolean, {capabilities, advertised}, or "pass")',
    ),
  observed: z.unknown().describe("what was read; null when not observed"),
  ok: z.boolean().nullable().describe("null: not observed (see note)"),
  note: z.string().nullable().describe("the difference in words, or why it was not observed"),
});

const RecoveryVerification = z
  .object({
    seq: z.number().int().describe("1 for the release's first verification, +1 for each later one"),
    trigger: z
      .enum(["compensation", "operator"])
      .describe("compensation: the undo ended; operator: baton verify"),
    requested_by: z.string().describe("`engine` after an undo, else the operator"),
    requested_at: Ms,
    desired_from: z
      .enum(["baseline", "manifest"])
      .describe(
        "baseline: the lanes as observed at start (an undo); manifest: its declared end state (a succeeded release)",
      ),
    state: z.enum(["verifying", "passed", "failed"]),
    at: Ms.nullable().describe("when the deciding reading was made; null while verifying"),
    by: z
      .string()
      .nullable()
      .describe(
        "what read the lanes (the control plane; a target probe or the lanes' last runner reports)",
      ),
    summary: z.string().nullable(),
    gaps: z.array(z.string()).describe("fields that could not be observed, lane by lane"),
    lanes: z.array(
      z.object({
        lane: z.string(),
        ok: z.boolean(),
        target_source: z
          .enum(["target_probe", "runner_report"])
          .nullable()
          .describe(
            "where the image and health came from; null when the lane's machine was not asked",
          ),
        fields: z.array(FieldVerdict),
      }),
    ),
  })
  .nullable();

const LineageLink = z.object({
  id: z.string(),
  verb: z.enum(["rollback", "roll_forward"]).nullable().describe("null: started with start"),
  of: z.string().nullable(),
  manifest_of: z.string().nullable(),
});

const Check = z.object({
  check: z.string(),
  outcome: z.enum(["pass", "fail", "skipped"]),
  message: z.string(),
  fix: z.string().nullable(),
});

export const ReleaseRecordDocument = z
  .object({
    record_version: z
      .literal(RECORD_VERSION)
      .describe(
        "the record's shape version: 3 (2 had no recovery_verification; 1 had no observed_lanes, lineage, traffic_restored_at or restore; docs/record.md)",
      ),
    release: z.object({
      id: z.string(),
      uid: z.string().nullable(),
      state: z.enum(RELEASE_STATES),
      generation: z.number().int(),
      created_at: Ms,
      updated_at: Ms,
      closed: z.boolean().describe("true once the release is terminal: the digest is then fixed"),
    }),
    intended: z.object({
      manifest_digest: z.string(),
      model: z.string(),
      recipe_name: z.string(),
      image: z.string(),
      previous_image: z.string(),
      strategy: z
        .enum(STRATEGIES)
        .describe(
          'how the waves exposed the candidate (docs/recipes.md "Strategies"); canary when the manifest names none',
        ),
      signer: Signer.nullable().describe("who signed the manifest (null: admission off)"),
      recovery_class: z
        .enum(["reversible", "recoverable", "roll_forward_only"])
        .describe("the recipe's recovery class; reversible when it declares none"),
      recovery_policy: z.object({
        declared: z.boolean().describe("false: the recipe declares no class (reversible assumed)"),
        unsafe_after: z
          .object({
            index: z.number().int(),
            name: z.string(),
            lane: z.string().nullable(),
            wave: z.number().int(),
          })
          .nullable()
          .describe("roll_forward_only: the step after which rollback is unsafe"),
        restore: z
          .string()
          .nullable()
          .describe("recoverable: the action that must follow a traffic rollback"),
      }),
      rollout_policy: z.object({
        waves: z.array(
          z.object({
            lanes: z.array(z.string()),
            traffic: z.number(),
            analysis: z
              .record(z.string(), z.unknown())
              .optional()
              .describe("the wave's gate, defaults filled (docs/gate.md); absent: no gate"),
            max_unavailable: z
              .number()
              .int()
              .optional()
              .describe("lanes of the wave out of service at once, when above 1"),
            phase: z
              .literal("shadow")
              .optional()
              .describe('a shadow phase (docs/recipes.md "Shadow phase"); absent: a wave'),
            shadow: z
              .object({ share: z.number(), rate_per_s: z.number() })
              .optional()
              .describe("the shadow phase's caps: percent of requests mirrored, per second"),
          }),
        ),
        steps: z.array(
          z.object({
            index: z.number().int(),
            name: z.string(),
            lane: z.string().nullable(),
            wave: z.number().int(),
            retries: z.number().int(),
            on_failure: z.string(),
          }),
        ),
      }),
    }),
    ran: z.object({
      high_water_mark: z.number().int(),
      step_runs: z.array(
        z.object({
          id: z.string(),
          step_index: z.number().int(),
          name: z.string(),
          direction: z.enum(["fwd", "bwd"]),
          state: z.string(),
          operation_key: z.string(),
          dispatches: z.number().int(),
          started_at: Ms.nullable(),
          finished_at: Ms.nullable(),
          last_error: z.string().nullable(),
          attempts: z.array(
            z.object({
              n: z.number().int(),
              run_id: z.string(),
              run_attempt: z.number().int(),
              sha: z.string(),
              state: z.string(),
              status: z.string().nullable(),
              overall: z.enum(["pass", "fail"]).nullable(),
              run_by: z
                .object({ actor: z.string().optional(), triggering_actor: z.string().optional() })
                .nullable()
                .optional()
                .describe(
                  "who ran it, from the callback: actor started the workflow run (github.actor), triggering_actor this run attempt (github.triggering_actor: who re-ran the job); null when the runner did not say",
                ),
              run_url: z
                .string()
                .nullable()
                .describe("the GitHub Actions run attempt, when the repository is known"),
            }),
          ),
        }),
      ),
      observed_lanes: z
        .array(
          z.object({
            lane: z.string(),
            at: Ms.nullable().describe("when it was observed"),
            source: z
              .enum(OBSERVED_SOURCES)
              .describe(
                "control_plane_at_start: the observed baseline read before step 1; traffic_assert: the control plane held these weights when an assert_traffic_observed step run succeeded; target_report: the image the target reported running at the end of a runner step run's attempt",
              ),
            step_run_id: z
              .string()
              .nullable()
              .describe("the step run that observed it (null for the baseline)"),
            observed: z.record(z.string(), z.unknown()),
          }),
        )
        .describe(
          "lane states the engine observed while the release ran, oldest first: the control plane's lanes at start (with the image each ran, null when not reported), the weights each traffic assert saw, the images the target reported",
        ),
    }),
    evidence: z.object({
      admission: z
        .object({
          mode: z.enum(["enforce", "off", "unconfigured"]),
          ok: z.boolean(),
          at: Ms,
          checks: z.array(Check),
          issued_at: Ms.nullable(),
          expires_at: Ms.nullable(),
          rollback: z.boolean(),
        })
        .nullable(),
      gates: z
        .array(z.record(z.string(), z.unknown()))
        .describe("gate evaluations, when the release has any"),
      release_labels: z
        .object({
          release: z.string(),
          router: z
            .number()
            .int()
            .describe("requests the router forwarded labelled baton-release=<release>"),
          lanes: z
            .number()
            .int()
            .describe("requests the lanes counted under that label in their metrics"),
          agree: z.boolean().describe("router = lanes: every labelled request arrived labelled"),
          at: Ms.describe("when the two counts were read (the latest gate evaluation)"),
        })
        .optional()
        .describe(
          'how the release labels were checked (docs/record.md "Release labels"): requests counted per release at the router and at the lanes; absent when the metrics source cannot count labels',
        ),
      prerequisites: z
        .object({
          ok: z.boolean().describe("no check failed"),
          at: Ms,
          image: z.string().describe("the image the rollback deploys"),
          asked_by: z
            .enum(["engine", "runner"])
            .describe(
              "engine: over SSH before the release existed; runner: the rollback's read-only probe steps",
            ),
          checks: z.array(
            z.object({
              check: z.enum([
                "recovery_class",
                "lane_credentials",
                "image_present",
                "lane_capacity",
              ]),
              lane: z.string().nullable(),
              outcome: z.enum(["pass", "fail", "skipped"]),
              message: z.string(),
              fix: z.string().nullable(),
            }),
          ),
        })
        .optional()
        .describe(
          'a rollback\'s prerequisites (docs/lifecycle.md "Rollback prerequisites"); absent on other releases',
        ),
      shadow: z
        .array(
          z.object({
            phase: z.literal("shadow"),
            wave: z.number().int().describe("0-based wave index of the shadow phase"),
            lanes: z
              .array(z.string())
              .describe("the shadow-safe lanes that took mirrored requests"),
            share: z.number().describe("percent of the model's requests mirrored at most"),
            rate_per_s: z.number().describe("mirrored requests per second at most"),
            mirrored: z
              .number()
              .int()
              .nullable()
              .describe(
                "mirrored requests the candidate answered (its answers discarded), as the shadow gate last counted them; null: never evaluated",
              ),
            baseline: z
              .number()
              .int()
              .nullable()
              .describe("the same requests as the baseline answered them (the users' answers)"),
            decision: z.string().nullable().describe("the shadow gate's latest decision"),
          }),
        )
        .optional()
        .describe(
          'each shadow phase and what was mirrored (docs/recipes.md "Shadow phase"); absent when the release has none',
        ),
      conformance: z
        .array(
          z.object({
            name: z.string(),
            reader: z.enum(["old", "new"]),
            writer: z.enum(["old", "new"]),
            tool: z.string(),
            step_index: z.number().int().describe("0-based index of its step in the table"),
            step_run_id: z.string().nullable().describe("its forward step run; null: never began"),
            outcome: z
              .enum(["pass", "fail", "not_run"])
              .describe("pass: its step run succeeded; fail: failed or unknown; not_run: not yet"),
            message: z.string().nullable().describe("why it failed, in words"),
          }),
        )
        .optional()
        .describe(
          'the recipe\'s mixed-version conformance checks, run before any exposure (docs/recipes.md "Conformance checks"); absent when it lists none',
        ),
    }),
    incidents: z
      .array(
        z.object({
          id: z.string(),
          severity: z.string(),
          summary: z.string(),
          commander: z.string(),
          declared_at: Ms.nullable().describe("when it was declared; null: declared before"),
          resolved_at: Ms.nullable().describe("when it was resolved; null: still open then"),
          resolution: z.string().nullable(),
        }),
      )
      .optional()
      .describe(
        "incidents declared or resolved on the release's model while it was open (docs/incidents.md); absent when none",
      ),
    migration: MigrationRecord.optional(),
    old_environment: z
      .object({
        lanes: z.array(z.string()).describe("the blue lanes: in no wave, never redeployed"),
        image: z.string().describe("the image they keep running: the manifest's previous_image"),
        warm_until: Ms.describe(
          "when the rollback window closes: until then they stay in service at weight 0 and `baton rollback` switches the traffic back to them; from then on they are retired",
        ),
      })
      .optional()
      .describe(
        'a succeeded blue-green release\'s old environment (docs/recipes.md "Strategies"); absent for every other release',
      ),
    lineage: z
      .object({
        verb: z.enum(["rollback", "roll_forward"]),
        of: z.string().describe("the release rolled back (succeeded) or rolled forward from"),
        manifest_of: z
          .string()
          .nullable()
          .describe("rollback: the earlier succeeded release whose admitted manifest ran again"),
        switch_back: z
          .literal(true)
          .optional()
          .describe(
            "rollback of a blue-green release: a health check of its warm old environment's lanes, then one traffic write back to it, nothing redeployed (absent otherwise)",
          ),
        chain: z
          .array(LineageLink)
          .describe(
            "the releases this one descends from, nearest first, following `of` (at most 20)",
          ),
      })
      .nullable()
      .describe("which lifecycle verb started this release, and from which release (null: start)"),
    recovery_verification: RecoveryVerification.describe(
      "the latest recovery verification (docs/lifecycle.md): per lane, desired against observed image, weight, excluded marker, capabilities and health; null when none was made",
    ),
    decisions: z.array(
      z.object({
        at: Ms,
        kind: z.string(),
        by: z.string().describe("`engine` for automatic decisions, else the operator"),
        automatic: z.boolean(),
        why: z.string(),
      }),
    ),
    deviations: z.array(z.object({ at: Ms.nullable(), what: z.string() })),
    known_gaps: z.array(z.string()),
    recovery: z.object({
      class: z.enum(["reversible", "recoverable", "roll_forward_only"]),
      exercised: z
        .boolean()
        .describe(
          "whether the recovery path ran: any backward (compensating) step ran (for a recoverable release the restore action follows; see restore), or this is the rollback of a recoverable release that waited for its restore action",
        ),
      held_for_roll_forward: z
        .object({ at: Ms, unsafe_after: z.number().int(), why: z.string() })
        .nullable()
        .describe(
          "roll_forward_only: the release was past its unsafe_after step when it failed or was aborted, so nothing was compensated; roll forward is its recovery path",
        ),
      started_at: Ms.nullable().describe(
        "the first backward step run started (the rollback of a recoverable release: the rollback was requested)",
      ),
      traffic_restored_at: Ms.nullable().describe(
        "the last backward step run finished: traffic rolled back (null while compensating; the rollback of a recoverable release: its last step finished)",
      ),
      restore: z
        .object({
          action: z.string().describe("the recipe's restore action"),
          waited_since: Ms.describe("traffic was rolled back and the release began to wait"),
          confirmed: z
            .object({
              by: z.string().describe("the operator who ran it"),
              at: Ms,
              what: z.string().describe("what they ran and what it showed"),
            })
            .nullable()
            .describe("null: nobody confirmed it (the release waits, or was abandoned)"),
          runs: z
            .array(
              z.object({
                by: z.string().describe("`engine` (after the rollback) or the operator who asked"),
                why: z.string(),
                point: z.string().describe("the restore point asked for"),
                at: Ms,
                step_run_id: z.string(),
                state: z.enum(["running", "succeeded", "failed"]),
                finished_at: Ms.nullable(),
                error: z.string().nullable(),
                report: z
                  .object({
                    point: z.string().describe("the point restored to"),
                    point_at: Ms.describe("when that point was taken"),
                    rows_lost: z.number().describe("rows written after the point, dropped"),
                    rpo_ms: z.number().describe("ms from the point to the last lost write"),
                    rows_restored: z.number(),
                    verified: z.boolean().describe("the tool read the state back equal"),
                  })
                  .nullable(),
              }),
            )
            .optional()
            .describe(
              "runs of the recipe's restore tool (restore_state), oldest first; absent when the recipe declares none",
            ),
        })
        .nullable()
        .describe(
          "recoverable, once compensation undid what took effect: the restore action the release waited for after its traffic rollback (or, on the rollback of a recoverable release, the rolled-back recipe's restore action it waited for after its steps); null otherwise",
        ),
      finished_at: Ms.nullable().describe(
        "recovery ended: traffic_restored_at, or for a recoverable release the restore's confirmation",
      ),
      rto_ms: z
        .number()
        .int()
        .nullable()
        .describe(
          "measured recovery time in ms: started_at to finished_at (a recoverable release's includes its restore action; null until recovered)",
        ),
    }),
    refused_events: z
      .number()
      .int()
      .describe("refused messages in history (late, duplicate, forged…); not digested"),
    digest: z
      .string()
      .nullable()
      .describe(
        "sha256 hex of the canonical JSON of the record without digest, acceptance and refused_events; null while open",
      ),
    acceptance: z
      .object({
        by: z.string(),
        at: Ms,
        expires_at: Ms.nullable(),
        note: z.string(),
        record_digest: z.string().describe("the digest the owner accepted"),
      })
      .nullable(),
  })
  .describe("A Baton deployment release record.");
export type ReleaseRecordDocument = z.infer<typeof ReleaseRecordDocument>;

/** The JSON Schema text committed at `RECORD_SCHEMA_PATH`. */
export function recordJsonSchemaText(): string {
  const schema = z.toJSONSchema(ReleaseRecordDocument, { target: "draft-2020-12" });
  return `${JSON.stringify({ $schema: schema.$schema, title: "Baton release record", ...schema }, null, 2)}\n`;
}
