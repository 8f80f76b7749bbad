import { sha256Hex } from "../protocol/sha256.ts";

/**
 * `manifest_digest`: sha256 of the manifest's canonical JSON (`protocol/canonical-json.ts`) as
 * UTF-8 bytes, 64 lowercase hex characters (docs/glossary.md "release record").
 */
export function manifestDigest(canonical: string): string {
  return sha256Hex(canonical);
}
