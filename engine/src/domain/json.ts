/** A JSON value: what a store column, a request body or an evidence field holds once parsed. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** `v` as a plain object (not null, not an array), else undefined: for reading raw input. */
export function asObject(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === "object" && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

/** `v` if it is an array, else an empty one: for reading raw input. */
export function asArray(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}
