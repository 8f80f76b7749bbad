/**
 * The switch back of a blue-green release in words (domain/blue-green.ts `switchBackPlan`):
 * one wording for every place that describes it. Pure; imports nothing.
 */
/**
 * What a switch back from release `id` does, in words (the one wording the lifecycle offer, the
 * dashboard's rollback page, the CLI's accepted line, refusals and the history use), `env`
 * naming its old environment's lanes and image when known: `switchBackPlan` in a sentence.
 */
export function switchBackWords(
  id: string,
  env?: { lanes: readonly string[]; image: string } | null,
): string {
  const where = env ? ` (${env.lanes.join(", ")} on ${env.image})` : "";
  return `a switch back to ${id}'s old environment${where}: the runner's health check of each of its lanes, then one control-plane write moves every request back to it, read back; nothing is redeployed, and if a lane fails its check no traffic moves`;
}

/**
 * The release before a rollback's target whose kept recipe deploys another image than the one
 * it put on the lanes: a switch back admitted with the recipe of the release it undid (no earlier
 * release kept a recipe of the image it returned to). `id` that release, `of` the release it
 * switched back from (null: not a switch back), `image` what it put back (what served), `recipe`
 * the image its kept recipe deploys.
 */
export interface RecipelessPredecessor {
  id: string;
  of: string | null;
  image: string;
  recipe: string | null;
}

/**
 * Why succeeded release `id` of `model` cannot be rolled back when the release before it is
 * `p` (`RecipelessPredecessor`): what happened, why running `p`'s recipe again would be wrong,
 * and what to do, naming the recipe field (`image`). One wording for the 422, the record's
 * `lifecycle_note`, `baton status` and the dashboard.
 */
export function recipelessPredecessorWords(
  id: string,
  model: string,
  p: RecipelessPredecessor,
): string {
  const what = p.of
    ? `is a switch back of ${p.of} that put ${p.image} back on the lanes without a recipe of its own (no earlier release of ${model} kept a recipe deploying ${p.image}, so it was admitted with ${p.of}'s recipe${p.recipe ? `, which deploys ${p.recipe}` : ""})`
    : `ran ${p.image} but kept a recipe deploying ${p.recipe ?? "another image"}`;
  return `${id} cannot be rolled back: ${p.id}, the release before it, ${what}; a rollback runs the previous release's recipe again, and ${p.id}'s would deploy ${p.recipe ?? "another image"}, not ${p.image}. To put ${p.image} back, roll forward: write a recipe of ${model} whose \`image\` is ${p.image}, sign it and start it (\`baton sign <recipe.yaml>\`, then \`baton start <recipe.yaml> --bundle <bundle.json>\`; where the trust policy asks for image provenance, also \`baton attest <recipe.yaml>\` and \`--attestation <provenance.json>\`)`;
}

/** The bad field of such a rollback (`image`) with its fix, for the 422's `problems`. */
export function recipelessPredecessorProblem(
  model: string,
  p: RecipelessPredecessor,
): { path: string; message: string; fix: string } {
  return {
    path: "image",
    message: `no kept recipe of ${model} deploys ${p.image}, the image ${p.id} put back on the lanes`,
    fix: `start a recipe of ${model} with image: ${p.image} (baton sign <recipe.yaml>, then baton start <recipe.yaml> --bundle <bundle.json>; where the trust policy asks for image provenance, also baton attest <recipe.yaml> and --attestation <provenance.json>)`,
  };
}
