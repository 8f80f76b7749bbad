/** Entry of the `baton` CLI (bin/baton.mjs, `npm run serve`, `npm run demo`). */
import { runCli } from "./program.ts";

const code = await runCli(process.argv.slice(2));
process.exitCode = code;
