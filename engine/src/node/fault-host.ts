/** The Node process's `FaultHost` (faults.ts): `process.env`, an appended trace file, SIGKILL. */
import { appendFileSync } from "node:fs";
import type { FaultHost } from "../faults.ts";

export const nodeFaultHost: FaultHost = {
  env: (name) => process.env[name],
  appendTrace: (file, line) => appendFileSync(file, line),
  kill(point) {
    process.stderr.write(`[engine] fault point ${point} reached: killing process ${process.pid}\n`);
    process.kill(process.pid, "SIGKILL");
  },
};
