/**
 * Cuts a callback's log to its last `CALLBACK_LOG_MAX_BYTES` bytes of UTF-8 with the marker
 * in front (DESIGN.md §4: the log tail is size-capped). The tail is what matters when a step
 * fails, so the start is dropped.
 */
import { CALLBACK_LOG_MAX_BYTES, LOG_TRUNCATED_MARKER } from "../protocol/messages.ts";

/**
 * Returns the log as stored and whether it was cut here. The result is at most
 * `maxBytes` bytes of UTF-8 including the marker; a character split by the cut is dropped.
 */
export function capLogTail(
  log: string,
  maxBytes: number = CALLBACK_LOG_MAX_BYTES,
): { log: string; cut: boolean } {
  const bytes = Buffer.from(log, "utf8");
  if (bytes.length <= maxBytes) return { log, cut: false };
  const marker = Buffer.from(LOG_TRUNCATED_MARKER, "utf8");
  let start = bytes.length - (maxBytes - marker.length);
  // Skip UTF-8 continuation bytes (10xxxxxx) so the tail starts on a character boundary.
  while (start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start++;
  return { log: LOG_TRUNCATED_MARKER + bytes.subarray(start).toString("utf8"), cut: true };
}
