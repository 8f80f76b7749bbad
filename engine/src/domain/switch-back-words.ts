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
