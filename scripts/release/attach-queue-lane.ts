/**
 * Tool `attach-queue-lane`: Deploys the step's image to a lane (forward step of attach_queue_lane).
 * Usage: attach-queue-lane --args <args.json> --key <ssh key> --result-dir <dir> --operation-key <key>
 *        [--release-id <id> --generation <n>]   (default: env BATON_RELEASE_ID, BATON_RELEASE_GENERATION)
 */
import { runDeployTool } from "../lib/deploy-tool.ts";

process.exitCode = await runDeployTool(
  {
    name: "attach-queue-lane",
    subcommand: "deploy",
    phases: ["pull", "start", "health", "stop-old"],
  },
  process.argv.slice(2),
  process.env,
);
