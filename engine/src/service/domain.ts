/**
 * The pure domain as the service uses it: the recipe contract check + compiler and the
 * transition function. Injectable so tests can wrap them (e.g. count transitions).
 */
import type { ObservedLane } from "../domain/compile.ts";
import { newRelease, transition } from "../domain/transition.ts";
import type { Manifest, Release, ReleaseEvent, TransitionResult } from "../domain/types.ts";
import { compileRecipeInput } from "../recipes/compile-text.ts";
import { withExpectedPayloadDigest } from "./payload-digest.ts";

export interface Domain {
  /**
   * Contract check and compile of an untrusted recipe value (already parsed), against the
   * observed baseline when given (its weights, markers and capabilities are what compensation
   * restores).
   * @throws BatonError `contract_failed` (422) listing every problem with path and fix.
   */
  compile(
    recipe: unknown,
    baseline?: readonly ObservedLane[],
  ): { manifest: Manifest; manifest_digest: string };
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
  compile(recipe, baseline) {
    const c = compileRecipeInput(recipe, baseline);
    return { manifest: c.manifest, manifest_digest: c.manifest_digest };
  },
  newRelease: (id, manifest, digest, now, uid) =>
    newRelease(id, Number(id.slice(1)), manifest, digest, now, uid),
  // The preflight check needs the engine's payload digest; the service computes it (sha256).
  transition: withExpectedPayloadDigest(transition),
};
