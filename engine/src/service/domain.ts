/**
 * The pure domain as the service uses it: the recipe contract check + compiler and the
 * transition function. Injectable so tests can wrap them (e.g. count transitions).
 */
import { newRelease, transition } from "../domain/transition.ts";
import type { Manifest, Release, ReleaseEvent, TransitionResult } from "../domain/types.ts";
import { compileRecipeInput } from "../recipes/compile-text.ts";
import { withExpectedPayloadDigest } from "./payload-digest.ts";

export interface Domain {
  /**
   * Contract check and compile of an untrusted recipe value (already parsed).
   * @throws BatonError `contract_failed` (422) listing every problem with path and fix.
   */
  compile(recipe: unknown): { manifest: Manifest; manifest_digest: string };
  /** A `pending` release `id` (`r<N>`) of `manifest`, resource_version 1, identity `uid`. */
  newRelease(
    id: string,
    manifest: Manifest,
    manifestDigest: string,
    now: number,
    uid?: string,
  ): Release;
  transition(release: Release, event: ReleaseEvent, now: number): TransitionResult;
}

export const defaultDomain: Domain = {
  compile(recipe) {
    const c = compileRecipeInput(recipe);
    return { manifest: c.manifest, manifest_digest: c.manifest_digest };
  },
  newRelease: (id, manifest, digest, now, uid) =>
    newRelease(id, Number(id.slice(1)), manifest, digest, now, uid),
  // The preflight check needs the engine's payload digest; the service computes it (sha256).
  transition: withExpectedPayloadDigest(transition),
};
