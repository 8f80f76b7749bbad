/** The embedded SSH target of the demo and the e2e tests. */
export { generateEd25519, parsePublicKey, type SshKeyPair, sha256Fingerprint } from "./keys.ts";
export { type EmbeddedTarget, type EmbeddedTargetOptions, startEmbeddedTarget } from "./server.ts";
