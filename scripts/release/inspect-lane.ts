/**
 * Tool `inspect-lane`: the read-only probe of a rollback (docs/lifecycle.md "Rollback
 * prerequisites"): asks the lane's machine, with `deploy.sh inspect`, whether the rollback's
 * image is present and loadable, the deploy user can work, and there is room. Changes nothing.
 * Usage: inspect-lane --args <args.json> --key <ssh key> --result-dir <dir> --operation-key <key>
 */
import { runDeployTool } from "../lib/deploy-tool.ts";

process.exitCode = await runDeployTool(
  { name: "inspect-lane", subcommand: "inspect", phases: ["access", "image", "capacity"] },
  process.argv.slice(2),
  process.env,
);
