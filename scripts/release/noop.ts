/**
 * Tool `noop`: touches nothing and passes (benchmarks and tests of the action's own overhead).
 * Test-only: not in the production allowlist; tests name it in test/support/tools-allowlist.json.
 * Usage: noop --args <args.json> --key <ssh key> --result-dir <dir> --operation-key <key>
 */
import { writeChecks, writeOutcome } from "../lib/result.ts";
import { parseToolCli } from "../lib/tool-args.ts";

const cli = parseToolCli(process.argv.slice(2));
writeChecks(cli.resultDir, [{ name: "noop", status: "ok", exit_code: 0, duration_ms: 0 }]);
writeOutcome(cli.resultDir, "succeeded", "pass");
