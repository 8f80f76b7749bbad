/**
 * One schema per field that crosses a boundary: the contract check (recipe), the engine, the
 * release tools (scripts/lib/tool-args.ts), deploy.sh on the target and the reference control
 * plane all take the field's rule from here, so a recipe the contract check passes is never
 * refused later by a tool or the control plane (a refusal there strands the release with a lane
 * excluded). deploy.sh cannot import: its patterns are these sources verbatim, and
 * test/unit/field-schemas.test.ts fails when they drift.
 *
 * The patterns deploy.sh checks (lane id, image, health URL) are written in the common subset
 * of JavaScript and POSIX extended regular expressions (no `\w`, no `(?:`), so the same source
 * works in `grep -E`.
 *
 * Each field has: the pattern, a length limit (characters), a zod schema whose messages name the
 * field, and a fix (`FIELD_FIXES`, keyed by the field's name) that the contract check shows.
 */
import * as z from "zod";
import { lazySchema } from "./lazy-schema.ts";

/**
 * Names the control plane keeps (model names, and the control plane's lane names): 1–64
 * characters, letters, digits, `.`, `_`, `:`, `-`, starting with a letter or digit.
 */
export const CONTROL_PLANE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** Fix shown for a name the control plane refuses. */
export const CONTROL_PLANE_NAME_FIX =
  "use 1–64 characters: letters, digits, '.', '_', ':', '-' (starting with a letter or digit)";

/**
 * A Baton lane id: 1–64 lowercase letters, digits, `.`, `_`, `-`. A subset of the control
 * plane's names (no uppercase: deploy.sh builds container names from it; no `:`, `=` or
 * spaces: it appears in operation keys as `lane=<id>:…`).
 */
export const LANE_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/**
 * A digest-pinned image reference: `name[:tag]@sha256:<64 lowercase hex>`. The name (registry,
 * optional port, path) is lowercase as registries require, at most 255 characters; a tag may
 * hold uppercase (`:V7`), at most 128 characters; pulls use the digest and ignore the tag.
 */
export const IMAGE_PATTERN =
  /^[a-z0-9][a-z0-9._/:-]{0,254}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[a-f0-9]{64}$/;

/**
 * The characters a health URL may hold after `http://` or `https://`: the unreserved and the
 * few reserved characters a path and query need. No brackets (deploy.sh hands the URL to curl,
 * which reads `[…]` as a glob, and splits host and port at the first `:`), no comma, no spaces
 * or quotes. Percent-encode anything else.
 */
export const HEALTH_URL_PATTERN = /^https?:\/\/[A-Za-z0-9._~:/?&=%+-]{1,400}$/;

/** An SSH host: a DNS name or an IP address (IPv6 without brackets). */
export const SSH_HOST_PATTERN = /^[A-Za-z0-9.:-]{1,253}$/;

/** A POSIX login name (what the runner logs in as). */
export const SSH_USER_PATTERN = /^[a-z_][a-z0-9_.-]{0,31}$/;

/**
 * OpenSSH fingerprint as `ssh-keygen -l -E sha256` prints it (43 base64 chars, no padding),
 * optionally prefixed by the key type (`ssh-rsa SHA256:…`), which lets the runner ask the host
 * for exactly that key type (a bare fingerprint is tried against each type the host offers).
 */
export const HOST_KEY_FINGERPRINT_PATTERN =
  /^(?:(?:ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(?:256|384|521)) )?SHA256:[A-Za-z0-9+/]{43}$/;
/** A known_hosts line (`[hosts] <type> <base64> [comment]`), hosts optional; no markers. */
export const HOST_KEY_LINE_PATTERN =
  /^(?:[^\s@#][^\s]*\s+)?(?:ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(?:256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)\s+AAAA[A-Za-z0-9+/]+={0,3}(?:\s+\S.*)?$/;
/** Either form of host key pin, as one pattern (for the JSON Schema). */
export const HOST_KEY_PATTERN = new RegExp(
  `${HOST_KEY_FINGERPRINT_PATTERN.source}|${HOST_KEY_LINE_PATTERN.source}`,
);

/** Length limits (characters) of the fields above. */
export const FIELD_LIMITS = {
  model: 64,
  lane_id: 64,
  image: 255 + 129 + 72,
  health_url: 400,
  host: 253,
  user: 32,
  queue: 128,
  host_key: 16_384,
  capability: 64,
} as const;

const DIGEST_FIX =
  "Pin the image by digest: look it up with `docker buildx imagetools inspect <name>:<tag>` " +
  "(or `crane digest <name>:<tag>`) and write `<name>@sha256:<64 hex>` (the name lowercase; " +
  "a `:tag` before `@` may keep its case); a tag can move, a digest cannot.";

/** The fix for each field, by field name (the last key of its path). */
export const FIELD_FIXES = {
  image: DIGEST_FIX,
  previous_image: DIGEST_FIX,
  model:
    "Name the model as the control plane does: 1–64 letters, digits, '.', '_', ':' or '-', starting with a letter or digit (e.g. `summarizer-v7`); no spaces.",
  health_url:
    "Write an http(s) URL of at most 400 characters the smoke check can reach, e.g. `http://10.0.0.5:8080/healthz`: a DNS name or IPv4 address (not an IPv6 literal in brackets), letters, digits and `._~:/?&=%+-` only (percent-encode others, e.g. `,` as `%2C`).",
  id: "Use 1–64 lowercase letters, digits, '.', '_' or '-', e.g. `lane-a`.",
  host: "Use the machine's DNS name or IP address, without user or port.",
  user: "Use the POSIX user name the runner logs in as, e.g. `deploy`.",
  queue: "Name the queue the lane serves in 1–128 characters.",
  capabilities:
    "Write each capability in 1–64 ASCII letters, digits, '.', '_', ':' or '-', starting with a letter or digit, e.g. `summarize-long`; retype look-alike letters (a Cyrillic `ѕ` for `s`) in ASCII.",
} as const;

/** Model name as the control plane keeps it (`manifest.model`, traffic writes, routing). */
export const ModelName = lazySchema(() =>
  z
    .string()
    .min(1, { message: "model must not be empty", abort: true })
    .max(FIELD_LIMITS.model, {
      message: `model must be at most ${FIELD_LIMITS.model} characters (the control plane's limit)`,
      abort: true,
    })
    .regex(CONTROL_PLANE_NAME_PATTERN, {
      message: `model must be a control-plane name: ${CONTROL_PLANE_NAME_FIX}`,
    }),
);

/** A Baton lane id. */
export const LaneId = lazySchema(() =>
  z
    .string()
    .max(FIELD_LIMITS.lane_id, {
      message: `lane id must be at most ${FIELD_LIMITS.lane_id} characters`,
      abort: true,
    })
    .regex(LANE_ID_PATTERN, {
      error: (issue) => laneIdProblem(String(issue.input)),
    }),
);

const LANE_ID_RULE =
  "lane id must be lowercase letters, digits, '.', '_' or '-' (starting with a letter or digit)";

/**
 * Names of the non-ASCII letters that look like the Latin ones a lane id is written with
 * (Unicode confusables of a–z), for messages; others are named by code point only.
 */
const LOOK_ALIKES: Readonly<Record<string, string>> = {
  "\u0430": "CYRILLIC SMALL LETTER A",
  "\u0435": "CYRILLIC SMALL LETTER IE",
  "\u043e": "CYRILLIC SMALL LETTER O",
  "\u0440": "CYRILLIC SMALL LETTER ER",
  "\u0441": "CYRILLIC SMALL LETTER ES",
  "\u0443": "CYRILLIC SMALL LETTER U",
  "\u0445": "CYRILLIC SMALL LETTER HA",
  "\u0456": "CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I",
  "\u0458": "CYRILLIC SMALL LETTER JE",
  "\u0455": "CYRILLIC SMALL LETTER DZE",
  "\u04bb": "CYRILLIC SMALL LETTER SHHA",
  "\u03bf": "GREEK SMALL LETTER OMICRON",
  "\u03b1": "GREEK SMALL LETTER ALPHA",
  "\u03bd": "GREEK SMALL LETTER NU",
  "\u0131": "LATIN SMALL LETTER DOTLESS I",
  "\u2010": "HYPHEN",
  "\u2011": "NON-BREAKING HYPHEN",
  "\u2012": "FIGURE DASH",
  "\u2013": "EN DASH",
  "\u2212": "MINUS SIGN",
  "\u00a0": "NO-BREAK SPACE",
  "\u200b": "ZERO WIDTH SPACE",
};

/**
 * Names the first character of `value` that is not allowed (`first` for the first character,
 * `rest` for the others) and its position (1-based, in characters):
 * `<label> "<value>" has U+0430 CYRILLIC SMALL LETTER A, not an ASCII character, at position 2`
 * (a look-alike reads like a good name), or `has " " (U+0020) at position 10`; null when every
 * character is allowed.
 */
export function badCharacterProblem(
  label: string,
  value: string,
  first: RegExp,
  rest: RegExp,
): string | null {
  const chars = [...value];
  const at = chars.findIndex((ch, i) => !(i === 0 ? first : rest).test(ch));
  const ch = chars[at];
  if (at < 0 || ch === undefined) return null;
  const shown = JSON.stringify(value).replace(
    /\p{C}/gu,
    (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`,
  );
  const cp = `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
  const what =
    ch.codePointAt(0)! > 0x7e
      ? `${cp}${LOOK_ALIKES[ch] ? ` ${LOOK_ALIKES[ch]}` : ""}, not an ASCII character,`
      : `${JSON.stringify(ch)} (${cp})`;
  return `${label} ${shown} has ${what} at position ${at + 1}`;
}

/**
 * Why `id` is not a lane id, naming the first character that is not allowed and its position
 * (1-based, in characters): a look-alike (`lаne-a` with U+0430) reads like a good id.
 */
export function laneIdProblem(id: string): string {
  const bad = badCharacterProblem("lane id", id, /[a-z0-9]/, /[a-z0-9._-]/);
  if (bad === null) return LANE_ID_RULE;
  return `${bad}; ${LANE_ID_RULE.replace("lane id must be", "lane ids must be ASCII:")}`;
}

/**
 * A capability a lane advertises (recipe `lanes[].capabilities`, the control plane's
 * `PUT /v1/lanes/{lane}/capabilities`): a control-plane name, ASCII letters, digits, `.`, `_`,
 * `:`, `-`, starting with a letter or digit, 1–64 characters. Routing matches capabilities
 * byte for byte, so a look-alike (`ѕummarize` with U+0455) would advertise a capability
 * nothing asks for.
 */
export const CAPABILITY_PATTERN = CONTROL_PLANE_NAME_PATTERN;

const CAPABILITY_RULE =
  "capabilities must be ASCII: letters, digits, '.', '_', ':' or '-' (starting with a letter or digit)";

/** Why `name` is not a capability, naming the first character that is not allowed. */
export function capabilityProblem(name: string): string {
  const bad = badCharacterProblem("capability", name, /[A-Za-z0-9]/, /[A-Za-z0-9._:-]/);
  return `${bad ?? `capability ${JSON.stringify(name)} is not allowed`}; ${CAPABILITY_RULE}`;
}

/** A capability a lane advertises (`CAPABILITY_PATTERN`). */
export const Capability = lazySchema(() =>
  z
    .string()
    .min(1, { message: "a capability must not be empty", abort: true })
    .max(FIELD_LIMITS.capability, {
      message: `a capability must be at most ${FIELD_LIMITS.capability} characters`,
      abort: true,
    })
    .regex(CAPABILITY_PATTERN, {
      error: (issue) => capabilityProblem(String(issue.input)),
    }),
);

/** A digest-pinned image reference; `label` names the field in messages (image, previous_image). */
export function imageRef(label: string) {
  return z
    .string()
    .max(FIELD_LIMITS.image, {
      message: `${label} must be at most ${FIELD_LIMITS.image} characters`,
      abort: true,
    })
    .refine(
      (s) => !/[A-Z]/.test(s.split("@")[0]?.replace(/:[A-Za-z0-9_][A-Za-z0-9_.-]*$/, "") ?? ""),
      {
        message: `${label} has uppercase letters in its name; registries take lowercase names (only a :tag may hold uppercase)`,
        abort: true,
      },
    )
    .regex(IMAGE_PATTERN, {
      message: `${label} must be pinned by digest: name[:tag]@sha256:<64 lowercase hex>`,
    });
}

/** Why `s` is not a health URL, or null when it is one (the specific case first). */
export function healthUrlProblem(s: string): string | null {
  if (s.length > FIELD_LIMITS.health_url)
    return `health_url must be at most ${FIELD_LIMITS.health_url} characters (it is ${s.length})`;
  if (!/^https?:\/\//.test(s)) return "health_url must be an http(s) URL";
  if (s.includes("[") || s.includes("]"))
    return "health_url must not hold an IPv6 literal or brackets; deploy.sh's probe cannot reach `[…]` hosts: use a DNS name or an IPv4 address";
  if (s.includes(",")) return "health_url must not hold ','; percent-encode it as %2C";
  if (!HEALTH_URL_PATTERN.test(s))
    return "health_url may hold only letters, digits and ._~:/?&=%+- after the scheme (percent-encode others)";
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    return "health_url must be an http(s) URL";
  }
  if (!url.hostname) return "health_url must name a host";
  return null;
}

/** The URL the smoke check and deploy.sh probe on a lane. */
export const HealthUrl = lazySchema(() =>
  z
    .string()
    .max(FIELD_LIMITS.health_url, {
      message: `health_url must be at most ${FIELD_LIMITS.health_url} characters`,
      abort: true,
    })
    .superRefine((s, ctx) => {
      const problem = healthUrlProblem(s);
      if (problem) ctx.addIssue({ code: "custom", message: problem, input: s, continue: false });
    })
    .regex(HEALTH_URL_PATTERN, { message: "health_url must be an http(s) URL" }),
);

/** An SSH host (a lane's or a bastion's). */
export const SshHost = lazySchema(() =>
  z
    .string()
    .min(1, { message: "host must not be empty", abort: true })
    .max(FIELD_LIMITS.host, {
      message: `host must be at most ${FIELD_LIMITS.host} characters`,
      abort: true,
    })
    .regex(SSH_HOST_PATTERN, "host must be a DNS name or an IP address (IPv6 without brackets)"),
);

/** An SSH login name. */
export const SshUser = lazySchema(() =>
  z
    .string()
    .max(FIELD_LIMITS.user, {
      message: `user must be at most ${FIELD_LIMITS.user} characters`,
      abort: true,
    })
    .regex(
      SSH_USER_PATTERN,
      "user must be a POSIX user name (lowercase letters, digits, '_', '.', '-')",
    ),
);

/** A pinned host key (a lane's or a bastion's): a fingerprint, typed or bare, or a known_hosts line. */
export const HostKeyPin = lazySchema(() =>
  z
    .string()
    .max(FIELD_LIMITS.host_key, {
      message: `host_key must be at most ${FIELD_LIMITS.host_key} characters`,
      abort: true,
    })
    .regex(
      HOST_KEY_PATTERN,
      "host_key must be an OpenSSH SHA256:… fingerprint or a known_hosts line (a fingerprint may follow its key type: ssh-rsa SHA256:…)",
    ),
);

/** An SSH port. */
export const SshPort = lazySchema(() =>
  z
    .number()
    .int("port must be a whole number")
    .min(1, "port must be 1..65535")
    .max(65535, "port must be 1..65535"),
);

/** The queue a lane serves. */
export const QueueName = lazySchema(() =>
  z
    .string()
    .min(1, "queue must not be empty")
    .max(FIELD_LIMITS.queue, `queue must be at most ${FIELD_LIMITS.queue} characters`),
);
