/**
 * Setup file of the test projects whose files share one module graph per worker
 * (vitest.config.ts, `isolate: false`): what a test file sets in `process.env` (at its top or in
 * its hooks) is undone after the file, so the next file in the worker starts from the same
 * environment as in a worker of its own.
 */
import { afterAll } from "vitest";

const before = { ...process.env };

afterAll(() => {
  for (const k of Object.keys(process.env)) if (!(k in before)) delete process.env[k];
  Object.assign(process.env, before);
});
