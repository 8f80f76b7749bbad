/**
 * Reads a recipe file within the recipe size limit. Only a regular file is read: a FIFO, a
 * socket, a device or a folder is refused before any read (a FIFO with no writer would block
 * for ever; `/dev/zero` never ends). Opened non-blocking, so opening a FIFO returns at once.
 * Reads through a descriptor in a bounded loop and stops after `RECIPE_LIMITS.bytes + 1`
 * bytes, so memory stays bounded by the limit.
 */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";
import { BatonError } from "../domain/errors.ts";
import { RECIPE_LIMITS } from "../protocol/limits.ts";

/**
 * The text (UTF-8) of the recipe file at `file`.
 * @param limit largest size accepted, bytes (default `RECIPE_LIMITS.bytes`).
 * @throws BatonError `payload_too_large` (as the engine answers 413) naming the file and the
 *   limit when it holds more than `limit` bytes; the file system's error (with its `code`)
 *   when it cannot be opened or read; an Error with `code` `EFTYPE` and the message "a FIFO,
 *   not a regular file" (or a socket, a device, a folder) when it is not a regular file.
 */
export function readRecipeFileText(file: string, limit: number = RECIPE_LIMITS.bytes): string {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) {
      throw Object.assign(new Error(`${kindOf(stat)}, not a regular file`), { code: "EFTYPE" });
    }
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

/** What a non-regular file is, for a message: "a FIFO", "a folder"… */
function kindOf(s: Stats): string {
  if (s.isFIFO()) return "a FIFO";
  if (s.isDirectory()) return "a folder";
  if (s.isSocket()) return "a socket";
  if (s.isCharacterDevice() || s.isBlockDevice()) return "a device";
  return "not a file";
}
