/**
 * A lane already serving the candidate when the release starts (docs/state-machine.md "The
 * observed baseline"). The weight arithmetic (`groupWeights`) puts every lane not yet
 * redeployed in the baseline group, which carries `100 - percent` of the model's traffic: a
 * lane of that group that already runs the candidate would make the router serve the
 * candidate above the declared percent from the first request (and all of the model's
 * traffic once the other lanes are drained). So a start is refused when a lane that can take
 * traffic (not `excluded`) reports the candidate's digest. An excluded lane carries nothing
 * until its own wave redeploys and includes it, so it is allowed.
 *
 * A lane on a third image (neither the recipe's `previous_image` nor the candidate, e.g. a
 * hotfix) is no risk to exposure: it serves no candidate, and compensation restores its
 * observed image. A lane whose image the control plane does not report cannot be judged.
 * Pure.
 */
import type { Problem } from "./errors.ts";
import { digestOf } from "./result-evidence.ts";

/** A lane of the observed baseline as this rule needs it. */
export interface StartLane {
  id: string;
  weight: number;
  excluded: boolean;
  /** The image the lane reports (`name@sha256:…`), or null/absent when unknown. */
  image?: string | null;
}

/**
 * One problem (path `control_plane.lanes.<id>.image`, with the fix) per lane that is not
 * excluded and already runs `candidate` (same digest, whatever the name); empty when none.
 */
export function candidateAtStart(
  model: string,
  candidate: string,
  previousImage: string | undefined,
  lanes: readonly StartLane[],
): Problem[] {
  const want = digestOf(candidate);
  if (want === null) return [];
  const back = previousImage ?? "the image it ran before";
  return lanes
    .filter((l) => !l.excluded && l.image && digestOf(l.image) === want)
    .map((l) => ({
      path: `control_plane.lanes.${l.id}.image`,
      message: `lane ${l.id} already runs the candidate ${l.image} and carries ${l.weight}% of model ${model}: counted with the lanes not yet redeployed, it would let the router serve the candidate above the declared percent from the first request`,
      fix: `redeploy lane ${l.id} to ${back} and report it (PUT /v1/lanes/${l.id}/image), or take it out of service first (PUT /v1/lanes/${l.id}/markers/excluded {"present":true}): its wave redeploys and includes it`,
    }));
}
