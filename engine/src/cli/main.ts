/** Entry of the `baton` CLI (bin/baton.mjs, `npm run serve`, `npm run demo`). */
import { runCli } from "./program.ts";

const code = await runCli(process.argv.slice(2));
// A failed command exits now, whatever is still open (e.g. `serve` that could not listen or
// reach its database): a supervisor (`Restart=always`) then sees the failure and restarts it.
if (code !== 0) process.exit(code);
process.exitCode = code;
