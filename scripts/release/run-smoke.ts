/**
 * Tool `run-smoke`: Smoke check of a lane: its container runs and its health URL answers (assert_smoke_passed).
 * Usage: run-smoke --args <args.json> --key <ssh key> --result-dir <dir> --operation-key <key>
 */
import { runDeployTool } from "../lib/deploy-tool.ts";

process.exitCode = await runDeployTool(
  { name: "run-smoke", subcommand: "smoke", phases: ["running", "health"] },
  process.argv.slice(2),
  process.env,
);
