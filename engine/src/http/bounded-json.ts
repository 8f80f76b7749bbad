/**
 * JSON bodies checked against their limits (protocol/limits.ts) before `JSON.parse` builds
 * anything: one pass over the text that tracks only strings, the open objects and arrays, and
 * (when asked) each open object's keys, and stops at the first limit passed. Linear in the
 * text's length; JSON.parse then runs once on text known to be within the limits.
 */
import { BatonError } from "../domain/errors.ts";
import type { BodyLimits } from "../protocol/limits.ts";

/** Where a body's refusal points: `[component] where:line:col`, problem path `path`. */
export interface JsonBoundsWhere {
  /** `[recipe]` or `[engine]`. */
  component: string;
  /** What the text is, e.g. `request body`, `callback body`. */
  where: string;
  /** The problem's path, e.g. `body`, `body.recipe`. */
  path: string;
}

/** 1-based line and column of `offset` in `text` (only computed for a refusal). */
export function lineColumn(text: string, offset: number): { line: number; col: number } {
  let line = 1;
  let start = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 0x0a) {
      line++;
      start = i + 1;
    }
  }
  return { line, col: offset - start + 1 };
}

/**
 * The "too complex to read" refusal shared by every body and recipe: 400 `bad_request` whose
 * message names the limit passed and the line and column where, with one problem at `w.path`.
 */
export function tooComplex(
  w: JsonBoundsWhere,
  pos: { line: number; col: number },
  what: string,
  fix: string,
): BatonError {
  const message = `${w.component} ${w.where}:${pos.line}:${pos.col}: too complex to read: ${what} (line ${pos.line}, column ${pos.col})`;
  return new BatonError("bad_request", message, [{ path: w.path, message, fix }]);
}

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);

interface Frame {
  object: boolean;
  /** No entry seen yet. */
  empty: boolean;
  /** The next string in this object is a key. */
  expectKey: boolean;
  keys: Set<string> | null;
}

/**
 * Refuses JSON `text` that nests more than `limits.depth` objects and arrays at once or holds
 * more than `limits.entries` entries (object members plus array items), and, with
 * `onDuplicate`, an object that names a key twice (JSON.parse would keep the last silently).
 * Text that is not JSON is left for JSON.parse to refuse.
 * @throws BatonError 400 (`tooComplex`), or what `onDuplicate` returns.
 */
export function assertJsonBounds(
  text: string,
  limits: Pick<BodyLimits, "depth" | "entries">,
  w: JsonBoundsWhere,
  onDuplicate?: (key: string, pos: { line: number; col: number }) => Error,
): void {
  const frames: Frame[] = [];
  let entries = 0;
  const entry = (at: number) => {
    if (++entries > limits.entries) {
      throw tooComplex(
        w,
        lineColumn(text, at),
        `the text holds more than ${limits.entries} entries (object members and array items)`,
        `send at most ${limits.entries} entries; this body takes far fewer`,
      );
    }
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (WS.has(c)) continue;
    const top = frames[frames.length - 1];
    if (top?.empty && c !== 0x5d && c !== 0x7d) {
      top.empty = false;
      entry(i);
    }
    if (c === 0x22) {
      let j = i + 1;
      let escaped = false;
      while (j < text.length) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) {
          escaped = true;
          j += 2;
        } else if (d === 0x22) break;
        else j++;
      }
      if (top?.object && top.expectKey) {
        top.expectKey = false;
        if (top.keys) {
          let key = text.slice(i + 1, j);
          if (escaped) {
            try {
              key = JSON.parse(`"${key}"`) as string;
            } catch {
              // Not a JSON string: JSON.parse of the whole body refuses it.
            }
          }
          if (top.keys.has(key) && onDuplicate) throw onDuplicate(key, lineColumn(text, i));
          top.keys.add(key);
        }
      }
      i = j;
    } else if (c === 0x7b || c === 0x5b) {
      if (frames.length >= limits.depth) {
        throw tooComplex(
          w,
          lineColumn(text, i),
          `the text is nested deeper than ${limits.depth} levels (objects and arrays open at once)`,
          `nest less: at most ${limits.depth} objects and arrays inside one another`,
        );
      }
      const object = c === 0x7b;
      frames.push({
        object,
        empty: true,
        expectKey: object,
        keys: object && onDuplicate ? new Set() : null,
      });
    } else if (c === 0x7d || c === 0x5d) {
      frames.pop();
    } else if (c === 0x2c && top) {
      entry(i);
      if (top.object) top.expectKey = true;
    }
  }
}
