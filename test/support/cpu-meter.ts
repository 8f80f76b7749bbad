/**
 * Per-file CPU meter for the test suite, on when BATON_TEST_CPU_LOG names a file (vitest.config
 * adds this setup file then). For each test file it appends one JSON line: the file, the CPU
 * milliseconds its worker process and the children it waited for spent from this file's setup
 * to its end (import of the file included), and the wall milliseconds. Linux only (/proc).
 * A figure for finding where the suite's time goes; no test reads it.
 */
import { appendFileSync, readFileSync } from "node:fs";
import { afterAll, expect } from "vitest";

const out = process.env.BATON_TEST_CPU_LOG;

/** CPU ms of this process plus its waited-for children (utime + stime + cutime + cstime). */
function cpuMs(): number {
  const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]?.split(" ") ?? [];
  const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i] ?? 0), 0);
  return ticks * 10;
}

if (out) {
  const cpu0 = cpuMs();
  const wall0 = Date.now();
  afterAll(() => {
    const line = {
      file: expect.getState().testPath,
      cpu_ms: cpuMs() - cpu0,
      wall_ms: Date.now() - wall0,
    };
    appendFileSync(out, `${JSON.stringify(line)}\n`);
  });
}
