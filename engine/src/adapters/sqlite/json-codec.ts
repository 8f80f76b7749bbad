/**
 * SQLite's JSON codec: JSON columns come back as text. A value compacted by retention (the
 * manifest of a finished release) is stored deflated as `z:<base64 of raw deflate>`; JSON text
 * never starts with `z`, so the two cannot be confused.
 */
import { deflateRawSync, inflateRawSync } from "node:zlib";
import type { JsonCodec } from "../kysely/tables.ts";

const PREFIX = "z:";

/** True for a value written by `deflateJson`. */
export function isDeflated(text: string): boolean {
  return text.startsWith(PREFIX);
}

/** JSON text -> `z:` + base64 of its raw deflate (level 9). */
export function deflateJson(text: string): string {
  return PREFIX + deflateRawSync(Buffer.from(text, "utf8"), { level: 9 }).toString("base64");
}

/** Parses a JSON column, inflating a deflated one. */
export const sqliteJson: JsonCodec = {
  read(v) {
    const text = v as string;
    if (isDeflated(text)) {
      return JSON.parse(
        inflateRawSync(Buffer.from(text.slice(PREFIX.length), "base64")).toString("utf8"),
      );
    }
    return JSON.parse(text);
  },
};
