/**
 * The operator verbs, each declared once: its name, the HTTP route and body schema, who may
 * call it, what it answers, its CLI command (help and every flag) and its dashboard
 * confirmation. The API routes (http/routes/verbs.ts), the `baton` commands (cli/program.ts)
 * and the dashboard's confirmation pages (http/dashboard/) are built from `VERBS`, and every
 * command line Baton suggests for a verb comes from `suggestedCommand`. Pure data and zod.
 *
 * A command is run by the CLI's one generic `verb()` (one POST, then the verb's `accepted`
 * lines), unless its declaration says `cli: "own"`: then cli/program.ts attaches that verb's
 * own action to the command built here (same help, flags and route). `verify` is the one such
 * verb: it posts like the others, then waits for the verdict (`--timeout`) and prints it lane by
 * lane. A flag with `body: null` is such a command's own setting (`--timeout`), never sent.
 */

import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";
import { switchBackWords } from "./switch-back-words.ts";
import type { Json, Release } from "./types.ts";
import { HIDDEN_EXCEPT_NUL, unstorableText } from "./visible-text.ts";

/** The pattern an actor name must match (`ActorField`); the CLI drops a $USER that does not. */
export const ACTOR_PATTERN = /^[A-Za-z0-9._@ -]{1,64}$/;

/** Who took an operator action, as the caller names themselves (kept in history). */
export const ActorField = lazySchema(() =>
  z
    .string()
    .regex(ACTOR_PATTERN, "must be 1–64 letters, digits, '.', '_', '@', '-' or spaces")
    .optional()
    .describe("Who takes the action (e.g. your login); recorded in history after `operator:`."),
);

/**
 * Invisible characters (visible-text.ts; NUL and lone surrogates are refused by
 * `unstorableText`, before these): shown on the dashboard or in a terminal, they make a reason read other than it
 * was written ("Trojan Source", CVE-2021-42574).
 */
const HIDDEN = HIDDEN_EXCEPT_NUL;

/** Refuses NUL and lone surrogates in a free-text field (`unstorableText`), naming the position. */
function refuseUnstorable(s: string, ctx: z.RefinementCtx): void {
  const bad = unstorableText(s);
  if (bad) ctx.addIssue({ code: "custom", message: bad });
}

/** Why an operator took an action (kept in history and the record): ≤ 1000 characters. */
export const ReasonField = lazySchema(() =>
  z
    .string()
    .max(1000, "must be at most 1000 characters")
    .superRefine((s, ctx) => {
      const bad = unstorableText(s);
      if (bad) {
        ctx.addIssue({ code: "custom", message: bad });
        return;
      }
      const m = HIDDEN.exec(s);
      if (m)
        ctx.addIssue({
          code: "custom",
          message: `holds the invisible character U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")} at position ${m.index + 1}; write the reason in plain text (control and bidirectional-formatting characters can make it read other than written)`,
        });
    }),
);

/** `{reason, actor}`: the body of most verbs. The service refuses an empty reason where it is required. */
const ReasonBody = lazySchema(() =>
  z.object({ reason: ReasonField.default(""), actor: ActorField }).strict(),
);

/** `restore_state`: why, who, and the restore point (default: the recipe's, else `latest`). */
const RestoreStateBody = lazySchema(() =>
  z
    .object({
      reason: ReasonField.default(""),
      actor: ActorField,
      point: z
        .string()
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/,
          "must be a restore point: 1-128 letters, digits, '.', '_', ':' or '-' (e.g. latest, snap-2041)",
        )
        .optional(),
    })
    .strict(),
);

const AbandonBody = lazySchema(() =>
  z
    .object({
      reason: ReasonField.default(""),
      actor: ActorField,
      lanes: z
        .record(z.string().max(64), z.string().max(512, "must be at most 512 characters"), {
          error: 'must be an object {"<lane id>": "<image it runs now, or none>"}',
        })
        .default({}),
    })
    .strict(),
);

const AcceptBody = lazySchema(() =>
  z
    .object({
      by: z
        .string({ error: "must name the owner accepting, e.g. an email or GitHub login" })
        .trim()
        .min(1, "must not be empty")
        .max(200, "must be at most 200 characters")
        .superRefine(refuseUnstorable),
      expires_at: z.iso
        .datetime({
          offset: true,
          error:
            "must be a date and a time of day with its offset (Z or ±hh:mm), e.g. 2027-01-31T00:00:00Z; a date alone such as 2027-01-31 is not enough",
        })
        .optional(),
      note: z
        .string()
        .max(2000, "must be at most 2000 characters")
        .superRefine(refuseUnstorable)
        .optional(),
      // The bare hex is kept and compared; the `sha256:` prefix the CLI prints is dropped.
      record_digest: z
        .string()
        .transform((d) => (d.startsWith("sha256:") ? d.slice("sha256:".length) : d))
        .pipe(
          z
            .string()
            .regex(
              /^[a-f0-9]{64}$/,
              "must be the record's sha256 (64 hex, sha256: prefix optional), as GET …/record shows it",
            ),
        )
        .optional(),
    })
    .strict(),
);

/** The verbs, as the API's `available_actions`, the history and the dashboard name them. */
export const VERB_NAMES = [
  "abort",
  "resume",
  "pause",
  "release",
  "promote",
  "retry",
  "resolve",
  "abandon",
  "confirm_restore",
  "restore_state",
  "verify",
  "rollback",
  "roll_forward",
  "accept",
] as const;
export type VerbName = (typeof VERB_NAMES)[number];

/**
 * One flag of a verb's command. `body` is the request field it fills: `reason`, `actor`
 * (defaults to $USER), `lanes` (repeated `<lane>=<image>`), a plain field, or a file the CLI
 * reads as JSON (`bundle`, `attestations`); null for a setting of a command with its own
 * action (`cli: "own"`), which is never sent (verify's `--timeout`).
 */
export interface VerbFlag {
  /** `--reason`. */
  flag: string;
  /** The value's name in help, e.g. `<text>`. */
  value: string;
  help: string;
  /**
   * Required: the engine refuses the verb without it, so every suggestion carries it. The CLI
   * enforces it too, except for a repeatable flag (`--lane`: the engine's refusal names every
   * lane not confirmed, which says more than "option missing").
   */
  required: boolean;
  /** May be given more than once (`--lane`, `--attestation`). */
  repeatable?: boolean;
  /** The placeholder a suggestion shows for it, e.g. `"<why>"` (already quoted if it must be). */
  placeholder?: string;
  body: string | null;
  /** The value commander gives a `body: null` flag when it is not given (help shows it). */
  default?: string;
  /** How the CLI turns the flag into the body field. Default: the text as given. */
  reads?: "actor" | "lanes" | "json-file" | "json-files";
}

/** What the dashboard's confirmation page of a verb asks and shows. */
export interface VerbDashboard {
  /** The question above the plan, e.g. `Abort release r17? …`. */
  confirm: (target: string) => string;
  /**
   * The reason field of the form: its label and whether the browser requires it; null: none.
   */
  reason: { label: string; required: boolean } | null;
  /** Whether the form asks what every lane runs now (abandon). */
  lanes: boolean;
  /** The confirm button is styled as dangerous. */
  danger: boolean;
  /** The button: `Yes, <button> <target>`. */
  button: string;
  /** False: the page shows the CLI command instead of a form (roll forward needs a recipe). */
  form: boolean;
}

/** One operator verb (see the module comment). */
export interface Verb {
  name: VerbName;
  /** The CLI command and the route's last path segment, e.g. `confirm-restore`. */
  command: string;
  /** What the id names: a release (`r17`) or a step run (`sr_17_6_f`). */
  on: "release" | "step_run";
  /**
   * The request body: a zod object schema (an empty body is `{}`), `none` (no body is read),
   * or `recipe` (a recipe, or a signed start `{recipe, bundle, attestations}`, as POST /v1/releases).
   */
  body: z.ZodObject | "none" | "recipe";
  /** Who may call it: the operator token. */
  role: "operator";
  /**
   * Its status when accepted: 200; 201 for a verb that starts a new release; 202 for a verb
   * whose work goes on after the answer (verify: the lanes are being read).
   */
  status: 200 | 201 | 202;
  /**
   * What it answers when accepted: `id` is the route's id; `release` the release after it
   * (the new release for a 201); `reply` what the service added.
   */
  answer: (id: string, release: Release, reply: Record<string, Json>) => Record<string, unknown>;
  /** CLI: one line of help. */
  summary: string;
  /** CLI: the positional arguments after the id, e.g. the fixed recipe of roll-forward. */
  args: { name: string; help: string; placeholder: string; body: string }[];
  /** CLI: the id argument's help. */
  idHelp: string;
  /** CLI flags (besides `--json`), in help order. */
  flags: VerbFlag[];
  /**
   * CLI: `own` when the command's action is not the generic `verb()` but the verb's own, which
   * cli/program.ts attaches (it must, or building the CLI throws). Absent: generic.
   */
  cli?: "own";
  /** An example body for the 400 that refuses a bad one (default: the schema's fields). */
  bodyExample?: string;
  /**
   * CLI: the lines printed when accepted (without --json), from the id, the answer, the
   * engine's URL and the body that was sent.
   */
  accepted: (
    target: string,
    answer: Record<string, unknown>,
    engine: string,
    sent: Record<string, unknown>,
  ) => string[];
  /** The dashboard's confirmation page; null when the dashboard does not offer the verb. */
  dashboard: VerbDashboard | null;
}

const actorFlag: VerbFlag = {
  flag: "--actor",
  value: "<name>",
  help: "who you are (kept in the history; default $USER)",
  required: false,
  body: "actor",
  reads: "actor",
};

const reasonFlag = (required: boolean, help: string, placeholder = '"<why>"'): VerbFlag => ({
  flag: "--reason",
  value: "<text>",
  help,
  required,
  placeholder,
  body: "reason",
});

/** An optional `--reason` that suggestions leave out (the verb needs none to be taken). */
const whyFlag = (help: string): VerbFlag => ({
  flag: "--reason",
  value: "<text>",
  help,
  required: false,
  body: "reason",
});

const generation = (id: string, release: Release) => ({
  id,
  state: release.state,
  generation: release.generation,
});

/** The release a step run belongs to, from its id (`sr_17_6_f` -> `r17`). */
const releaseOf = (stepRunId: string) => `r${stepRunId.split("_")[1]}`;

const str = (v: unknown) => (typeof v === "string" ? v : String(v ?? "?"));

/** What a verb that starts a new release answers: the new release, as POST /v1/releases does. */
function newRelease(_id: string, release: Release, reply: Record<string, Json>) {
  return {
    id: release.id,
    manifest_digest: release.manifest_digest,
    state: release.state,
    step_count: release.manifest.steps.length,
    admission: release.admission ?? null,
    lineage: release.lineage ?? null,
    prerequisites: release.prerequisites ?? null,
    ...reply,
  };
}

/** `step runs in flight settle, …`: what follows an accepted hold verb, for the CLI line. */
const holdAccepted =
  (name: string, then: (id: string, state: string) => string) =>
  (id: string, a: Record<string, unknown>) => [
    `${name} accepted: ${id} is now ${str(a.state)}; ${then(id, str(a.state))}`,
  ];

/** The verbs. Keyed by name; `VERB_NAMES` gives the order. */
export const VERBS: { readonly [K in VerbName]: Verb & { name: K } } = {
  abort: {
    name: "abort",
    command: "abort",
    on: "release",
    body: ReasonBody,
    role: "operator",
    status: 200,
    answer: generation,
    summary: "abort a release (compensates whatever may have taken effect)",
    idHelp: "release id",
    args: [],
    flags: [reasonFlag(true, "why (kept in the history and the release record)"), actorFlag],
    accepted: (id, a) => [
      `abort accepted: ${id} is now ${str(a.state)}${a.generation !== undefined ? ` (generation ${str(a.generation)})` : ""}`,
    ],
    dashboard: {
      confirm: (t) =>
        `Abort release ${t}? If any forward step may have taken effect, the engine compensates: it runs the backward steps from the high-water mark down to step 1. This cannot be undone; a finished release needs a new release.`,
      reason: {
        label: "Reason (required: say why you abort it; kept in the history with who did it)",
        required: true,
      },
      lanes: false,
      danger: true,
      button: "abort",
      form: true,
    },
  },
  resume: {
    name: "resume",
    command: "resume",
    on: "release",
    body: ReasonBody,
    role: "operator",
    status: 200,
    answer: (id, release) => ({ id, state: release.state }),
    summary: "resume a release paused by an operator or on a failure (or held pending)",
    idHelp: "release id",
    args: [],
    flags: [whyFlag("why it may go on (kept in the history)"), actorFlag],
    accepted: (id, a) => [`resume accepted: ${id} is now ${str(a.state)}`],
    dashboard: {
      confirm: (t) =>
        `Resume release ${t}? It goes on from where it waits: a step run it is paused on is dispatched again, or the next step begins.`,
      reason: { label: "Reason (kept in the history with who did it)", required: false },
      lanes: false,
      danger: false,
      button: "resume",
      form: true,
    },
  },
  pause: {
    name: "pause",
    command: "pause",
    on: "release",
    body: ReasonBody,
    role: "operator",
    status: 200,
    answer: (id, release) => ({ id, state: release.state, reason: release.reason }),
    summary:
      "pause a running release: nothing new starts, step runs in flight settle; `baton resume` continues",
    idHelp: "release id",
    args: [],
    flags: [reasonFlag(true, "why (kept in the history and shown on the release)"), actorFlag],
    accepted: holdAccepted(
      "pause",
      (id) =>
        `step runs in flight settle, then nothing new starts until ${suggestedCommand("resume", { target: id })}`,
    ),
    dashboard: {
      confirm: (t) =>
        `Pause release ${t}? Nothing new starts (no next step, lane or wave). Step runs already in flight settle first, a gate under way keeps deciding, and a failure still follows the step's policy. It waits paused, with your name and reason, until resume.`,
      reason: {
        label: "Reason (required; kept in the history and shown on the release)",
        required: true,
      },
      lanes: false,
      danger: false,
      button: "pause",
      form: true,
    },
  },
  release: {
    name: "release",
    command: "release",
    on: "release",
    body: ReasonBody,
    role: "operator",
    status: 200,
    answer: generation,
    summary:
      "a release deployed dark waits at 0% exposure: expose it to its first wave; the rollout goes on",
    idHelp: "release id",
    args: [],
    flags: [
      reasonFlag(false, "why it is ready (kept in the history)", '"<why it is ready>"'),
      actorFlag,
    ],
    accepted: holdAccepted(
      "release",
      () => "the candidate gets its first exposure; the rollout goes on",
    ),
    dashboard: {
      confirm: (t) =>
        `Release ${t}? The candidate, deployed at 0% exposure, gets its first traffic: the first wave's traffic is set, then the rollout goes on wave by wave.`,
      reason: { label: "Reason (kept in the history)", required: false },
      lanes: false,
      danger: false,
      button: "release",
      form: true,
    },
  },
  promote: {
    name: "promote",
    command: "promote",
    on: "release",
    body: ReasonBody,
    role: "operator",
    status: 200,
    answer: generation,
    summary:
      "widen to the next wave: past a manual promotion (recipe `promotion: manual`), or accepting the risk of an inconclusive gate (docs/gate.md)",
    idHelp: "release id",
    args: [],
    flags: [
      reasonFlag(false, "why the risk is acceptable (kept in the history)", '"<why>"'),
      actorFlag,
    ],
    accepted: holdAccepted("promote", () => "the next wave begins"),
    dashboard: {
      confirm: (t) =>
        `Promote release ${t}? It widens exposure to the next wave (past a manual promotion, or accepting the risk of an inconclusive gate).`,
      reason: { label: "Reason (kept in the history)", required: false },
      lanes: false,
      danger: false,
      button: "promote",
      form: true,
    },
  },
  retry: {
    name: "retry",
    command: "retry",
    on: "step_run",
    body: ReasonBody,
    role: "operator",
    status: 200,
    answer: (id, release) => ({ step_run_id: id, release_state: release.state }),
    summary: "retry the step run a paused release waits on",
    idHelp: "step run id, e.g. sr_17_6_f",
    args: [],
    flags: [whyFlag("why another try may succeed (kept in the history)"), actorFlag],
    accepted: (id, a) => [`retry accepted: ${releaseOf(id)} is now ${str(a.release_state)}`],
    dashboard: {
      confirm: (t) =>
        `Retry step run ${t}? It is dispatched again under a new dispatch number; older attempts are fenced out.`,
      reason: { label: "Reason (kept in the history with who did it)", required: false },
      lanes: false,
      danger: false,
      button: "retry",
      form: true,
    },
  },
  resolve: {
    name: "resolve",
    command: "resolve",
    on: "step_run",
    body: ReasonBody,
    role: "operator",
    status: 200,
    answer: (id, release) => ({ step_run_id: id, release_state: release.state }),
    summary:
      "needs_operator: record that you did the waited-on backward step run's effect by hand; compensation continues",
    idHelp: "the backward step run the release waits on, e.g. sr_17_3_b",
    args: [],
    flags: [
      reasonFlag(true, "what you did, by hand, and why (kept in the history)", '"<what you did>"'),
      actorFlag,
    ],
    accepted: (id, a) => [
      `resolve accepted: ${id} counts as done; ${releaseOf(id)} is now ${str(a.release_state)}`,
    ],
    dashboard: {
      confirm: (t) =>
        `Resolve step run ${t}? Say what you did by hand: the engine records it as done (with your reason) and compensation continues with the steps below it.`,
      reason: { label: "Reason (required; kept in the history with who did it)", required: true },
      lanes: false,
      danger: false,
      button: "resolve",
      form: true,
    },
  },
  abandon: {
    name: "abandon",
    command: "abandon",
    on: "release",
    body: AbandonBody,
    role: "operator",
    status: 200,
    answer: (id, release) => ({
      ...generation(id, release),
      lanes: release.abandoned?.lanes ?? {},
    }),
    summary:
      "needs_operator: end the release as abandoned, confirming what every lane runs now; its lanes become free",
    idHelp: "release id",
    args: [],
    flags: [
      reasonFlag(true, "why (kept in the history)"),
      {
        flag: "--lane",
        value: "<lane=image>",
        help: "what a lane runs now: <lane id>=<image@sha256:…> or <lane id>=none; once per lane of the release",
        required: true,
        repeatable: true,
        placeholder: "<lane>=<image|none>",
        body: "lanes",
        reads: "lanes",
      },
      actorFlag,
    ],
    accepted: (id, a) => [
      `abandon accepted: ${id} is now ${str(a.state)} (generation ${str(a.generation)}); its lanes are free`,
      ...Object.entries((a.lanes ?? {}) as Record<string, string>).map(
        ([l, img]) => `  ${l} runs ${img} (as you confirmed)`,
      ),
    ],
    dashboard: {
      confirm: (t) =>
        `Abandon release ${t}? It ends abandoned without further compensation. Confirm, for every lane, the image it runs now (name@sha256:…, or none); the lanes are then free for a new release.`,
      reason: { label: "Reason (required; kept in the history with who did it)", required: true },
      lanes: true,
      danger: true,
      button: "abandon",
      form: true,
    },
  },
  confirm_restore: {
    name: "confirm_restore",
    command: "confirm-restore",
    on: "release",
    body: ReasonBody,
    role: "operator",
    status: 200,
    answer: (id, release) => ({
      id,
      state: release.state,
      reason: release.reason,
      restore: release.restore ?? null,
    }),
    summary:
      "a recoverable release waits after its traffic rollback: confirm you ran its restore action; it ends rolled_back",
    idHelp: "release id",
    args: [],
    flags: [
      reasonFlag(
        true,
        "what you ran and what it showed (kept in the record)",
        '"<what you ran and what it showed>"',
      ),
      actorFlag,
    ],
    accepted: holdAccepted(
      "confirm-restore",
      (id, state) =>
        `the restore action is recorded with your name; ${id} is ${state === "succeeded" ? "a finished rollback" : "rolled back"} and its lanes are free`,
    ),
    dashboard: {
      confirm: (t) =>
        `Confirm the restore action of release ${t}? Its traffic was rolled back, but its recipe's recovery class is recoverable: the restore action must have been run. Say what you ran and what it showed; the engine records it with your name, ends the release rolled back, and frees its lanes.`,
      reason: { label: "Reason (required; kept in the history with who did it)", required: true },
      lanes: false,
      danger: false,
      button: "confirm the restore of",
      form: true,
    },
  },
  restore_state: {
    name: "restore_state",
    command: "restore-state",
    on: "release",
    body: RestoreStateBody,
    role: "operator",
    status: 202,
    answer: (id, release) => ({
      id,
      state: release.state,
      reason: release.reason,
      restore: release.restore ?? null,
    }),
    summary:
      "a recoverable release waits after its traffic rollback: run its recipe's restore tool to a named point (it reports the data lost; the lanes are verified again)",
    idHelp: "release id",
    args: [],
    flags: [
      {
        flag: "--point",
        value: "<point>",
        help: "the restore point to restore to (default: the recipe's restore_state.point, else latest)",
        required: false,
        body: "point",
      },
      reasonFlag(true, "why you restore, and to what (kept in the record)", '"<why>"'),
      actorFlag,
    ],
    accepted: holdAccepted(
      "restore-state",
      (id) =>
        `the restore tool runs as a runner step; ${id} ends rolled_back once the restore is read back and the lanes verified again (baton watch ${id})`,
    ),
    dashboard: {
      confirm: (t) =>
        `Run the restore tool of release ${t}? Its traffic was rolled back; the recipe's restore tool restores its state to the point you name (rows written after it are lost, and counted), then the lanes are verified again.`,
      reason: { label: "Reason (required; kept in the history with who did it)", required: true },
      lanes: false,
      danger: true,
      button: "run the restore of",
      form: true,
    },
  },
  verify: {
    name: "verify",
    command: "verify",
    on: "release",
    body: ReasonBody,
    role: "operator",
    status: 202,
    answer: (id, release) => ({
      id,
      state: release.state,
      verification: release.verification ?? null,
    }),
    summary:
      "read every lane of a release again (control plane, and the lanes' machines) and compare it with what it should be; exit 0 when it passed",
    idHelp: "release id (succeeded, rolled_back, or needs_operator after a failed verification)",
    args: [],
    flags: [
      whyFlag("why you verify (kept in the history)"),
      actorFlag,
      {
        flag: "--interval",
        value: "<ms>",
        help: "poll interval in ms while the engine reads",
        required: false,
        body: null,
        default: "1000",
      },
      {
        flag: "--timeout",
        value: "<s>",
        help: "give up waiting for the verdict after this many seconds",
        required: false,
        body: null,
        default: "120",
      },
    ],
    cli: "own",
    accepted: (id, a) => [
      `verify accepted: ${id} reads its lanes (verification ${str((a.verification as { seq?: number } | null)?.seq)}); the verdict follows`,
    ],
    dashboard: {
      confirm: (t) =>
        `Verify release ${t}? The engine reads every lane now: weight, excluded marker and capabilities from the control plane, and the image and health check of the lanes a runner step touched at their machines, and compares them with what they should be (the observed baseline after an undo, the manifest's end state after a success). Nothing is written to the fleet; the result is recorded on the release.`,
      reason: { label: "Reason (kept in the history with who did it)", required: false },
      lanes: false,
      danger: false,
      button: "verify",
      form: true,
    },
  },
  rollback: {
    name: "rollback",
    command: "rollback",
    on: "release",
    body: ReasonBody,
    role: "operator",
    status: 201,
    answer: newRelease,
    summary:
      "succeeded: start a new release that runs the previous admitted manifest of the model again; of a blue-green release, one traffic write back to its warm old environment (docs/lifecycle.md)",
    idHelp: "the succeeded release to roll back",
    args: [],
    flags: [reasonFlag(false, "why (kept in the history)"), actorFlag],
    accepted: (id, a, engine) => [
      (a.lineage as { switch_back?: boolean } | null)?.switch_back
        ? `rollback accepted: ${str(a.id)} is ${switchBackWords(id)} (${str(a.step_count)} steps, state ${str(a.state)}); ${id} stays as it ended`
        : `rollback accepted: ${str(a.id)} runs ${str((a.lineage as { manifest_of?: string } | null)?.manifest_of)}'s admitted manifest again (${str(a.step_count)} steps, state ${str(a.state)}); ${id} stays as it ended`,
      `  follow it: baton watch ${str(a.id)}   dashboard: ${engine}/releases/${str(a.id)}`,
    ],
    dashboard: {
      confirm: (t) =>
        `Roll back release ${t}? ${t} stays succeeded (a closed release never changes): a NEW release runs the previous admitted manifest of its model again, admitted as an explicit rollback, after the engine asks each lane's machine that the previous image is still present and loadable with room to run. Its own undo would restore ${t}'s image. (Of a blue-green release inside its rollback window, the new release is instead one traffic write back to the old environment, still warm on the previous image: nothing is redeployed.)`,
      reason: { label: "Reason (kept in the history)", required: false },
      lanes: false,
      danger: true,
      button: "roll back",
      form: true,
    },
  },
  roll_forward: {
    name: "roll_forward",
    command: "roll-forward",
    on: "release",
    body: "recipe",
    role: "operator",
    status: 201,
    answer: newRelease,
    summary:
      "rolled_back, aborted or abandoned: start a fixed recipe of the same model in its place (docs/lifecycle.md)",
    idHelp: "the release to roll forward from",
    args: [
      {
        name: "<recipe>",
        help: "the fixed recipe YAML (or .json) file",
        placeholder: "<fixed-recipe.yaml>",
        body: "recipe",
      },
    ],
    flags: [
      {
        flag: "--bundle",
        value: "<file>",
        help: "the fixed manifest's Sigstore bundle (baton sign)",
        // Not required by the engine when admission is off; suggested so a signed start works.
        required: false,
        placeholder: "<bundle.json>",
        body: "bundle",
        reads: "json-file",
      },
      {
        flag: "--attestation",
        value: "<file>",
        help: "an image attestation bundle (provenance, SBOM); repeatable",
        required: false,
        repeatable: true,
        body: "attestations",
        reads: "json-files",
      },
    ],
    accepted: (id, a, engine) => [
      `roll forward accepted: ${str(a.id)} replaces ${id} (${str(a.step_count)} steps, state ${str(a.state)}, manifest ${str(a.manifest_digest)})`,
      `  follow it: baton watch ${str(a.id)}   dashboard: ${engine}/releases/${str(a.id)}`,
    ],
    dashboard: {
      confirm: (t) =>
        `Roll forward past release ${t}? A NEW release of a fixed recipe of the same model replaces it without going back. The dashboard cannot take a recipe: run the command below with the fixed recipe (and its signature bundle when admission requires one).`,
      reason: null,
      lanes: false,
      danger: false,
      button: "roll forward",
      form: false,
    },
  },
  accept: {
    name: "accept",
    command: "accept",
    on: "release",
    body: AcceptBody,
    role: "operator",
    status: 200,
    answer: (id, release, reply) => ({ id, state: release.state, ...reply }),
    summary: "accept a closed release's final state as its owner",
    idHelp: "release id",
    args: [],
    flags: [
      {
        flag: "--by",
        value: "<owner>",
        help: "who accepts (e.g. email or GitHub login)",
        required: true,
        placeholder: '"<owner>"',
        body: "by",
      },
      {
        flag: "--expires",
        value: "<time>",
        help: "acceptance valid until (ISO 8601)",
        required: false,
        body: "expires_at",
      },
      {
        flag: "--note",
        value: "<text>",
        help: "why, kept in the record",
        required: false,
        body: "note",
      },
      {
        flag: "--digest",
        value: "<sha256>",
        help: "the record digest you reviewed (refused if it changed)",
        required: false,
        body: "record_digest",
      },
    ],
    bodyExample: '{"by": "owner@example.com", "expires_at": "2027-01-31T00:00:00Z"}',
    accepted: (id, a, _engine, sent) => [
      `accepted ${id} by ${str(sent.by)}: record sha256:${str(a.record_digest)}`,
    ],
    dashboard: null,
  },
};

/** The verb called `name`, or undefined. */
export function verbNamed(name: string): Verb | undefined {
  return (VERB_NAMES as readonly string[]).includes(name) ? VERBS[name as VerbName] : undefined;
}

/** `POST /v1/releases/:id/confirm-restore`, `POST /v1/releases/step-runs/:id/retry`. */
export function verbRoute(verb: VerbName): string {
  const v = VERBS[verb];
  return `POST /v1/releases/${v.on === "step_run" ? "step-runs/" : ""}:id/${v.command}`;
}

/** The dashboard's confirmation page of `verb` on `target`: `/releases/r17/abort`. */
export function dashboardPath(verb: VerbName, target: string): string {
  const v = VERBS[verb];
  return `/${v.on === "step_run" ? "step-runs" : "releases"}/${target}/${v.command}`;
}

/** What `suggestedCommand` fills in; anything not given is a marked placeholder. */
export interface SuggestedArgs {
  /** The release or step run id. */
  target: string;
  /**
   * Values (or more specific placeholders) per flag, e.g. `{"--reason": '"<why the wave is
   * good>"'}`; a value is printed as given (quote it when it holds spaces).
   */
  flags?: Readonly<Record<string, string>>;
  /** The release's lane ids: a repeatable required flag such as `--lane` is given once per lane. */
  lanes?: readonly string[];
}

/**
 * The command line that takes `verb`, with every required flag: `baton abort r17 --reason
 * "<why>"`. Placeholders are in angle brackets (`<why>`, `<fixed-recipe.yaml>`,
 * `lane-a=<image|none>`): the user replaces them. Optional flags with a placeholder (roll
 * forward's `--bundle`, release's `--reason`) are shown too, so the suggestion runs when
 * admission or the history wants them; `--actor` and `--json` never are.
 */
export function suggestedCommand(verb: VerbName, args: SuggestedArgs): string {
  const v: Verb = VERBS[verb];
  const parts = ["baton", v.command, args.target, ...v.args.map((a) => a.placeholder)];
  for (const f of v.flags) {
    const given = args.flags?.[f.flag];
    if (!f.required && given === undefined && f.placeholder === undefined) continue;
    if (f.reads === "lanes") {
      for (const lane of args.lanes ?? ["<lane>"]) {
        parts.push(f.flag, given ?? `${lane}=<image|none>`);
      }
      continue;
    }
    parts.push(f.flag, given ?? f.placeholder ?? `<${f.value.replace(/[<>]/g, "")}>`);
  }
  return parts.join(" ");
}
