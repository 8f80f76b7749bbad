/**
 * Tool `restore-queue-lane`: Puts the previous image back on a lane (backward step of attach_queue_lane).
 * Usage: restore-queue-lane --args <args.json> --key <ssh key> --result-dir <dir> --operation-key <key>
 *        [--release-id <id> --generation <n>]   (default: env BATON_RELEASE_ID, BATON_RELEASE_GENERATION)
 */
import { runDeployTool } from "../lib/deploy-tool.ts";

process.exitCode = await runDeployTool(
  {
    name: "restore-queue-lane",
    subcommand: "restore",
    phases: ["pull", "start", "health", "stop-old"],
  },
  process.argv.slice(2),
  process.env,
);
