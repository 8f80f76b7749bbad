/**
 * Input schemas of the control-plane contract (zod 4; the schema is the type) and the mapping of
 * zod issues to `Problem`s naming the field. Used by the HTTP app and by the core, so the test
 * double refuses exactly what the server refuses.
 */
import * as z from "zod";
import type { Problem } from "../domain/errors.ts";
import {
  imageRef,
  ModelName as ModelNameField,
  CONTROL_PLANE_NAME_PATTERN as NAME,
  CONTROL_PLANE_NAME_FIX as NAME_FIX,
} from "../protocol/fields.ts";
import { CpError } from "./errors.ts";

/**
 * A lane name the control plane keeps: its own name rule (protocol/fields.ts), a superset of
 * Baton's lane ids (uppercase and `:` allowed), so any lane a recipe names is accepted here.
 */
/** A digest-pinned image reference (the recipe's rule). */
export { imageRef };

export const LaneId = z.string().regex(NAME, { message: `lane id is invalid; ${NAME_FIX}` });
/** A model name: the one schema the contract check also applies to a recipe's `model`. */
export const ModelName = ModelNameField;
export const Weight = z
  .number({ message: "weight must be a number" })
  .int({ message: "weight must be an integer percent" })
  .min(0, { message: "weight must be >= 0" })
  .max(100, { message: "weight must be <= 100" });

/** A full weights map: lane id -> integer %, at least one lane, summing to exactly 100. */
export const Weights = z
  .record(LaneId, Weight, { message: "weights must be an object mapping lane id to percent" })
  .refine((w) => Object.keys(w).length > 0, { message: "weights must name at least one lane" })
  .refine((w) => Object.values(w).reduce((a, b) => a + b, 0) === 100, {
    message: "weights must sum to 100",
  });

export const Capabilities = z
  .array(z.string().min(1, { message: "capability must not be empty" }).max(128), {
    message: "capabilities must be an array of strings",
  })
  .max(64, { message: "at most 64 capabilities" });

export const SetTrafficBody = z.strictObject({ weights: Weights });
export const SetWeightBody = z.strictObject({ weight: Weight });
export const SetMarkerBody = z.strictObject({
  present: z.boolean({ message: "present must be true or false" }),
});
export const SetCapabilitiesBody = z.strictObject({
  capabilities: Capabilities,
  advertised: z.boolean({ message: "advertised must be true or false" }),
});
/**
 * A lane's declaration: the model it serves and, optionally, the image it runs now
 * (`name@sha256:…`, what the lane's registration reports; kept as `LaneState.image`).
 */
export const DeclareLaneBody = z.strictObject({
  model: ModelName,
  image: imageRef("image").optional(),
});
/** A lane's report of the image it runs now (`PUT /v1/lanes/:lane/image`). */
export const LaneImageBody = z.strictObject({ image: imageRef("image") });
export const RouteBody = z.strictObject({
  requests: z
    .number({ message: "requests must be a number" })
    .int({ message: "requests must be an integer" })
    .min(0, { message: "requests must be >= 0" })
    .max(1_000_000_000, { message: "requests must be <= 1000000000" }),
  model: ModelName.optional(),
});
export const Marker = z.enum(["excluded"], { message: "marker must be one of: excluded" });

/** Write identity headers, parsed from strings. */
export const Identity = z.object({
  operation_key: z
    .string({ message: "header Idempotency-Key is required" })
    .min(1, { message: "header Idempotency-Key must not be empty" })
    .max(256, { message: "header Idempotency-Key must be at most 256 characters" }),
  release_id: z
    .string({ message: "header Baton-Release-Id is required" })
    .min(1, { message: "header Baton-Release-Id must not be empty" })
    .max(128, { message: "header Baton-Release-Id must be at most 128 characters" }),
  generation: z
    .string({ message: "header Baton-Generation is required" })
    .regex(/^(0|[1-9][0-9]{0,14})$/, {
      message: "header Baton-Generation must be a non-negative integer",
    })
    .transform(Number),
  /** Optional (older clients send none): then a repeated key is matched on the body alone. */
  release_uid: z
    .string({ message: "header Baton-Release-Uid must be a string" })
    .regex(/^[0-9A-Za-z_-]{1,64}$/, {
      message: "header Baton-Release-Uid must be 1–64 letters, digits, _ or -",
    })
    .optional(),
});

const FIX: Record<string, string> = {
  weights: 'send {"weights": {"<lane>": <integer %>, …}} summing to 100',
  weight: "send an integer percent 0–100",
  present: "send true or false",
  advertised: "send true or false",
  capabilities: "send an array of capability names",
  model: NAME_FIX,
  requests: "send a non-negative integer",
  operation_key: "send the operation key in the Idempotency-Key header",
  release_uid:
    "send the release's uid (e.g. 16 hex digits) in Baton-Release-Uid, or omit the header",
  release_id: "send the release id in the Baton-Release-Id header",
  generation: "send the release generation in the Baton-Generation header",
};

/** zod issues -> problems with dotted paths, prefixed by `prefix` (e.g. `body`). */
export function toProblems(error: z.ZodError, prefix: string): Problem[] {
  return error.issues.map((issue) => {
    const path = [prefix, ...issue.path.map(String)].filter(Boolean).join(".");
    const head = String(issue.path[0] ?? "");
    const message =
      issue.code === "unrecognized_keys"
        ? `unknown field(s): ${issue.keys.join(", ")}`
        : issue.message;
    return { path, message, fix: FIX[head] ?? "see docs/control-plane.openapi.yaml" };
  });
}

/** Parses or throws a 400 `CpError` naming every bad field. */
export function parseOrThrow<T extends z.ZodType>(
  schema: T,
  input: unknown,
  prefix: string,
): z.output<T> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = toProblems(parsed.error, prefix);
  const list = problems.map((p) => `${p.path}: ${p.message}`).join("; ");
  throw new CpError("bad_request", `[control-plane] bad request: ${list}`, problems);
}
