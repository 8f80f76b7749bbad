/**
 * The published release record schema (engine/schema/release-record.schema.json), compiled by
 * Ajv's draft 2020-12 build: tests check records against the file users get, not against the
 * engine's own type.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { Ajv as AjvType } from "ajv";
import { REPO_ROOT } from "../../engine/src/demo/fleet.ts";

const require = createRequire(import.meta.url);
// Ajv's draft 2020-12 build (the published schema's dialect); CommonJS, loaded with require.
const Ajv2020 = (require("ajv/dist/2020") as { Ajv2020: typeof AjvType }).Ajv2020;

const validate = new Ajv2020({ allErrors: true, strict: false }).compile(
  JSON.parse(readFileSync(join(REPO_ROOT, "engine/schema/release-record.schema.json"), "utf8")),
);

/** Ajv's errors for `doc` against the published record schema (JSON), or null when it is valid. */
export function recordSchemaErrors(doc: unknown): string | null {
  return validate(doc) ? null : JSON.stringify(validate.errors);
}
