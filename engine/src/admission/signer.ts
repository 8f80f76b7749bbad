/** How a signer is named in messages (pure: no verifier needed). */
import type { SignerIdentity } from "../domain/admission.ts";

/** `key <id>` for a key signer, `<san> (issuer <iss>)` for a keyless one. */
export function describeSigner(s: SignerIdentity): string {
  return s.kind === "key" ? `key ${s.key_id}` : `${s.san} (issuer ${s.issuer})`;
}
