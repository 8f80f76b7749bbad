/**
 * The dashboard's forms (`/login` and every action) read within `OTHER_BODY_LIMITS`: a body the
 * form parser cannot read is an answer for the caller (400, or the form again with the error),
 * never an exception. Hono's `parseBody` threw on a multipart body with a bad boundary, which
 * every form answered 500.
 */
import type { Context } from "hono";
import { OTHER_BODY_LIMITS } from "../../protocol/limits.ts";

/** A form's text fields (file parts are dropped), or why it could not be read. */
export type FormRead =
  | { ok: true; fields: Readonly<Record<string, string>> }
  | { ok: false; reason: string };

const SEND = "post the page's own form (application/x-www-form-urlencoded or multipart/form-data)";

/** Occurrences of `needle` in `text`, counting at most `max + 1`. */
function countUpTo(text: string, needle: string, max: number): number {
  let n = 0;
  for (let i = text.indexOf(needle); i !== -1 && n <= max; i = text.indexOf(needle, i + 1)) n++;
  return n;
}

/**
 * Reads the request's form: urlencoded or multipart/form-data (with a boundary), at most
 * `OTHER_BODY_LIMITS.entries` fields, counted before parsing; no body at all is an empty form.
 * Never throws for what the client sent.
 */
export async function readForm(c: Context): Promise<FormRead> {
  const type = c.req.header("content-type") ?? "";
  const media = type.split(";")[0]?.trim().toLowerCase() ?? "";
  const max = OTHER_BODY_LIMITS.entries;
  const tooMany = { ok: false as const, reason: `the form has more than ${max} fields; ${SEND}` };
  let bytes: ArrayBuffer;
  try {
    bytes = await c.req.arrayBuffer();
  } catch {
    return { ok: false, reason: `the form's body could not be read; ${SEND}` };
  }
  if (bytes.byteLength === 0 && media !== "multipart/form-data") return { ok: true, fields: {} };
  if (media === "application/x-www-form-urlencoded") {
    const text = new TextDecoder().decode(bytes);
    if (countUpTo(text, "&", max) >= max) return tooMany;
    const fields: Record<string, string> = {};
    for (const [k, v] of new URLSearchParams(text)) if (!(k in fields)) fields[k] = v;
    return { ok: true, fields };
  }
  if (media === "multipart/form-data") {
    const boundary = /;\s*boundary=("?)([^";]{1,70})\1\s*(?:;|$)/i.exec(type)?.[2];
    if (!boundary) {
      return { ok: false, reason: `the multipart form names no boundary; ${SEND}` };
    }
    const text = new TextDecoder().decode(bytes);
    if (countUpTo(text, `--${boundary}`, max + 1) > max + 1) return tooMany;
    try {
      const form = await new Response(bytes, { headers: { "content-type": type } }).formData();
      const fields: Record<string, string> = {};
      form.forEach((v, k) => {
        if (typeof v === "string" && !(k in fields)) fields[k] = v;
      });
      return { ok: true, fields };
    } catch {
      return {
        ok: false,
        reason: `the multipart form could not be read (bad boundary or parts); ${SEND}`,
      };
    }
  }
  return {
    ok: false,
    reason: `a form is application/x-www-form-urlencoded or multipart/form-data, not ${media || "a body with no content-type"}; ${SEND}`,
  };
}
