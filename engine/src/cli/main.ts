/** Entry of the `baton` CLI (bin/baton.mjs, `npm run serve`, `npm run demo`). */
import { runCli } from "./program.ts";

/** How long a finished command may wait for what it left open to close by itself (ms). */
const LINGER_MS = 5_000;

const code = await runCli(process.argv.slice(2));
// A failed command exits now, whatever is still open (e.g. `serve` that could not listen or
// reach its database): a supervisor (`Restart=always`) then sees the failure and restarts it.
if (code !== 0) process.exit(code);
process.exitCode = code;
// A command that succeeded has finished its work (the demo has closed its parts; serve returns
// only once its server closed),
// so nothing may keep the process alive: if a handle is still open after LINGER_MS (seen in CI:
// the demo's successful run, after its record was written and its data dir removed, stayed up
// until killed), say which kinds and exit with the command's code. Unref'd: a clean process
// exits at once, without waiting for this.
setTimeout(() => {
  const open = process.getActiveResourcesInfo().filter((r) => r !== "Timeout");
  process.stderr.write(
    `[cli] the command ended but ${open.length} handle(s) stayed open (${[...new Set(open)].join(", ") || "timers"}); exiting with ${code}\n`,
  );
  process.exit(code);
}, LINGER_MS).unref();
