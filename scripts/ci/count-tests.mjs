#!/usr/bin/env node
// Prints "N passed, N failed, N skipped" summed over vitest JSON reports (--reporter=json), one
// line, plain integers: what CI counts. Usage: node scripts/ci/count-tests.mjs REPORT.json…
// A report that is missing or unreadable counts as one failed test (a run that wrote no report
// did not pass), says which on stderr and makes the exit code 1.
import { readFileSync } from "node:fs";

let passed = 0;
let failed = 0;
let skipped = 0;
let missing = false;
for (const file of process.argv.slice(2)) {
  try {
    const r = JSON.parse(readFileSync(file, "utf8"));
    passed += r.numPassedTests ?? 0;
    failed += r.numFailedTests ?? 0;
    skipped += (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  } catch (e) {
    process.stderr.write(
      `[ci] no test report in ${file} (${e.code ?? e.message}); counted as 1 failed\n`,
    );
    failed += 1;
    missing = true;
  }
}
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exitCode = missing ? 1 : 0;
