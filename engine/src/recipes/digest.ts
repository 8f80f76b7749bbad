import { createHash } from "node:crypto";

/**
 * `manifest_digest` (DESIGN.md §2): sha256 of the manifest's canonical JSON
 * (`domain/canonical-json.ts`) as UTF-8 bytes, 64 lowercase hex characters.
 */
export function manifestDigest(canonical: string): string {
  return createHash("sha256").update(canonical, "utf8").digest("hex");
}
