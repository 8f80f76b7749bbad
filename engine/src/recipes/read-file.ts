/**
 * Reads a recipe file within the recipe size limit, whatever the file is: a regular file, a
 * FIFO or a device (`/dev/zero` never ends). Reads through a descriptor in a bounded loop and
 * stops after `RECIPE_LIMITS.bytes + 1` bytes, so memory stays bounded by the limit.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { BatonError } from "../domain/errors.ts";
import { RECIPE_LIMITS } from "../protocol/limits.ts";

/**
 * The text (UTF-8) of the recipe file at `file`.
 * @param limit largest size accepted, bytes (default `RECIPE_LIMITS.bytes`).
 * @throws BatonError `payload_too_large` (as the engine answers 413) naming the file and the
 *   limit when it holds more than `limit` bytes; the file system's error (with its `code`)
 *   when it cannot be opened or read.
 */
export function readRecipeFileText(file: string, limit: number = RECIPE_LIMITS.bytes): string {
  const fd = openSync(file, "r");
  try {
    const buf = Buffer.alloc(limit + 1);
    let got = 0;
    // Each pass reads at least one byte or ends the loop: at most limit + 1 passes.
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, null);
      if (n === 0) break;
      got += n;
    }
    if (got > limit) {
      throw new BatonError(
        "payload_too_large",
        `[recipe] ${file}: recipe is over the ${limit}-byte limit`,
        [
          {
            path: "",
            message: `is over ${limit} bytes`,
            fix: "Split the rollout into several recipes.",
          },
        ],
      );
    }
    return buf.subarray(0, got).toString("utf8");
  } finally {
    closeSync(fd);
  }
}
