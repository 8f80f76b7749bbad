/**
 * Cuts a callback's log to its last `CALLBACK_LOG_MAX_BYTES` bytes of UTF-8 with the marker
 * in front (docs/engine.md: the log tail is size-capped). The tail is what matters when a step
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
  // Every UTF-16 code unit is at most 3 bytes of UTF-8: most logs fit without being encoded.
  if (log.length * 3 <= maxBytes || Buffer.byteLength(log, "utf8") <= maxBytes) {
    return { log, cut: false };
  }
  const bytes = Buffer.from(log, "utf8");
  const marker = Buffer.from(LOG_TRUNCATED_MARKER, "utf8");
  let start = bytes.length - (maxBytes - marker.length);
  // Skip UTF-8 continuation bytes (10xxxxxx) so the tail starts on a character boundary.
  while (start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start++;
  return { log: LOG_TRUNCATED_MARKER + bytes.subarray(start).toString("utf8"), cut: true };
}
