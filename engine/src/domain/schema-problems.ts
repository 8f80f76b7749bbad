/**
 * Turns zod issues into `Problem`s a recipe author can act on: a dotted path, a message and
 * a fix. Fixes for well-known fields (image digests, host key pins…) come from `FIELD_FIXES`;
 * the rest are derived from the issue code and the schema's own descriptions.
 */
import * as z from "zod";
import { FIELD_FIXES as SHARED_FIELD_FIXES } from "../protocol/fields.ts";
import type { Problem } from "./errors.ts";

type Path = readonly PropertyKey[];

const HOST_KEY_FIX =
  "Pin the lane's host key: on a trusted network run `ssh-keyscan -p <port> <host> | ssh-keygen -lf - -E sha256` " +
  "and paste the `SHA256:…` fingerprint (43 characters after `SHA256:`), or paste the known_hosts line.";

/**
 * The fix for a jump host's (bastion's) pin at `path` (`lanes.N.jump.host_key`): the bastion's
 * own key, scanned from its host and port as the recipe gives them.
 */
function jumpHostKeyFix(path: Path, input: unknown): string {
  const jump = dotted(path.slice(0, -1));
  const host = valueAt(input, [...path.slice(0, -1), "host"]);
  const port = valueAt(input, [...path.slice(0, -1), "port"]) ?? 22;
  const h = typeof host === "string" && host !== "" ? host : "<jump host>";
  return (
    `Pin the jump host's (bastion's) own key in \`${jump}.host_key\`: on a trusted network run ` +
    `\`ssh-keyscan -p ${String(port)} ${h} | ssh-keygen -lf - -E sha256\` and paste the \`SHA256:…\` ` +
    "fingerprint (43 characters after `SHA256:`), or paste the known_hosts line. It is the bastion's key, not the lane's (the lane's `host_key` pins the machine behind it)."
  );
}

/** True for `lanes.N.jump.host_key`. */
const isJumpPin = (path: Path) => path.length >= 2 && path[path.length - 2] === "jump";

/** What to name in a message about `lanes.N.jump…`: `jump host (bastion) H of lane L`. */
function jumpHostName(path: Path, input: unknown): string {
  const host = valueAt(input, [...path.slice(0, -1), "host"]);
  const laneId = valueAt(input, [...path.slice(0, -2), "id"]);
  return `jump host (bastion)${typeof host === "string" && host ? ` ${host}` : ""}${typeof laneId === "string" && laneId ? ` of lane ${laneId}` : ""}`;
}

/**
 * Fixes by field name (the last key of the path), for format and range problems. Fields the
 * tools and the control plane also check take theirs from protocol/fields.ts.
 */
const FIELD_FIXES: Record<string, string> = {
  ...SHARED_FIELD_FIXES,
  host_key: HOST_KEY_FIX,
  traffic: "Use an absolute percent from 0 to 100 (e.g. 10, then 50, then 100).",
  max_unavailable:
    "Write how many of the wave's lanes may redeploy at once: a whole number from 1 (e.g. 4) or a percent of the wave's lanes from 1% to 100% (e.g. \"25%\", rounded down, at least 1 lane); remove it for one lane at a time.",
  min_serving:
    "Write how many of the model's lanes stay in service at every instant: a whole number from 0 (e.g. 12) or a percent of the recipe's lanes from 0% to 100% (e.g. \"60%\", rounded up); remove it for no floor.",
  failure_domain:
    "Name the rack, zone or region with 1–64 letters, digits, `.`, `_`, `:` or `-`, starting with a letter or digit (e.g. `rack-3`, `eu-west-1a`); remove it for a domain of its own.",
  weight: "Use a whole percent from 0 to 100; the lanes' weights must add up to 100.",
  tool_revision:
    "Write the full commit sha (40 hex, or 64 in a SHA-256 repository) (`git rev-parse HEAD`), or remove the field.",
  environment:
    "Use the name of an environment of the repository (Settings → Environments), e.g. `production`, or remove the field.",
  name: "Use lowercase letters, digits, '.', '_' or '-', e.g. `summarizer-v7-rollout`.",
  port: "Use the SSH port number, 1 to 65535 (default 22).",
  retries: "Use a whole number from 0 to 10.",
  start_ms: "Use milliseconds from 10000 (10 s) to 86400000 (24 h); default 600000 (10 min).",
  callback_ms: "Use milliseconds from 10000 (10 s) to 86400000 (24 h); default 1800000 (30 min).",
  rerun_window_minutes:
    "Use a whole number of minutes from 0 (compensate at once) to 1440 (24 h), e.g. `rerun_window_minutes: 30` (the default).",
};

/**
 * Where a fix of `FIELD_FIXES` applies when its field name is common: `id` is a lane's id and
 * `name` the recipe's own (a migration's `id` or a dependency's `name` follow rules of their own,
 * told by their messages).
 */
const FIELD_SCOPE: Record<string, (path: Path) => boolean> = {
  id: (p) => p.length === 3 && p[0] === "lanes",
  name: (p) => p.length === 1,
};

/** The fix for `field` at `path`: a jump host's pin gets the bastion's, others `FIELD_FIXES`. */
function fieldFix(field: string | undefined, path: Path, input: unknown): string | undefined {
  if (field === "host_key" && isJumpPin(path)) return jumpHostKeyFix(path, input);
  if (!field || FIELD_SCOPE[field]?.(path) === false) return undefined;
  return FIELD_FIXES[field];
}

/**
 * The fix for a broken rule with no fix of its own: for a range, the value to write; else a
 * pointer to the rule, with what the field is for when the schema describes it.
 */
function ruleFix(issue: z.core.$ZodIssue, label: string, description?: string): string {
  const about = description ? ` (${label}: ${description})` : "";
  if (issue.code === "too_small" || issue.code === "too_big") {
    const small = issue.code === "too_small";
    const bound = String(small ? issue.minimum : issue.maximum);
    const inclusive = issue.inclusive !== false;
    if (issue.origin === "number" || issue.origin === "bigint" || issue.origin === "int")
      return `Set ${label} to ${inclusive ? `${bound} or ${small ? "more" : "less"}` : `${small ? "more" : "less"} than ${bound}`}${about}.`;
    const unit = `${issue.origin === "string" ? "character" : "entr"}${bound === "1" ? (issue.origin === "string" ? "" : "y") : issue.origin === "string" ? "s" : "ies"}`;
    return small
      ? `Give ${label} at least ${bound} ${unit}${about}.`
      : `Shorten ${label} to at most ${bound} ${unit}${about}.`;
  }
  return `Change ${label} to meet the rule the problem states${about}; docs/recipes.md describes every field.`;
}

/**
 * ` from MIN to MAX` (or ` of at least MIN`, ` of at most MAX`) for a number schema with
 * bounds of its own; empty for another node or a number bounded only by the safe integers.
 */
function numberRange(node: z.ZodType | undefined): string {
  if (!(node instanceof z.ZodNumber)) return "";
  const bound = (v: number | null) =>
    v !== null && Number.isFinite(v) && Math.abs(v) < Number.MAX_SAFE_INTEGER ? v : undefined;
  const min = bound(node.minValue);
  const max = bound(node.maxValue);
  if (min !== undefined && max !== undefined) return ` from ${min} to ${max}`;
  if (min !== undefined) return ` of at least ${min}`;
  if (max !== undefined) return ` of at most ${max}`;
  return "";
}

/** The fix a refinement gave its issue (`params.fix`), if any. */
function customFix(issue: z.core.$ZodIssue): string | undefined {
  const fix = issue.code === "custom" ? issue.params?.fix : undefined;
  return typeof fix === "string" ? fix : undefined;
}

/** Renders a path as `lanes.1.host_key` (empty string for the root). */
export function dotted(path: Path): string {
  return path.map(String).join(".");
}

function valueAt(input: unknown, path: Path): unknown {
  let cur: unknown = input;
  for (const k of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[k];
  }
  return cur;
}

/** The schema node at `path`, unwrapping optional/default; undefined when not found. */
function schemaAt(
  root: z.ZodType,
  path: Path,
): { node: z.ZodType; description?: string } | undefined {
  let node: z.ZodType = root;
  let description = node.description;
  const unwrap = () => {
    for (let i = 0; i < 8; i++) {
      description = node.description ?? description;
      if (node instanceof z.ZodOptional || node instanceof z.ZodDefault) {
        node = node.unwrap() as z.ZodType;
      } else break;
    }
    description = node.description ?? description;
  };
  unwrap();
  for (const k of path) {
    description = undefined;
    if (node instanceof z.ZodObject && typeof k === "string" && k in node.shape) {
      node = node.shape[k] as z.ZodType;
    } else if (node instanceof z.ZodArray && typeof k === "number") {
      node = node.element as z.ZodType;
    } else return undefined;
    unwrap();
  }
  return { node, ...(description ? { description } : {}) };
}

/**
 * Fixes for a list with too many entries, by field name: what to do about the count (the
 * field's own fix in `FIELD_FIXES` says how to write one entry).
 */
const COUNT_FIXES: Record<string, (max: number) => string> = {
  capabilities: (max) =>
    `Keep at most ${max} capabilities on the lane: list only the ones requests are routed by, and group related ones under one name (e.g. \`summarize\` rather than one capability per document size).`,
  lanes: (max) =>
    `Keep at most ${max} entries here; roll a larger fleet out as several recipes (one per group of lanes).`,
};

/** The field names a YAML merge key (`<<: {…}` or `<<: [{…}, …]`) at `path` would have merged. */
function mergedFields(input: unknown, path: Path): string[] {
  const v = valueAt(input, [...path, "<<"]);
  const maps = Array.isArray(v) ? v : [v];
  return [
    ...new Set(
      maps.flatMap((m) =>
        m !== null && typeof m === "object" && !Array.isArray(m) ? Object.keys(m) : [],
      ),
    ),
  ];
}

/** Unknown keys of one mapping told one by one; the rest are counted in one problem. */
export const UNKNOWN_KEYS_TOLD = 20;

/** Edit distance, for "did you mean" on unknown keys (short strings only). */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0] ?? 0;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j] ?? 0;
      row[j] = Math.min(
        (row[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        prev + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      prev = tmp;
    }
  }
  return row[b.length] ?? 0;
}

/**
 * Maps zod issues of `schema` over `input` to problems, one per issue (one per unknown key).
 * `input` is read to tell a missing field from a wrongly typed one.
 */
export function schemaProblems(
  schema: z.ZodType,
  issues: readonly z.core.$ZodIssue[],
  input: unknown,
): Problem[] {
  const out: Problem[] = [];
  // One problem per field: a value breaking several rules of one field (1e39 for a port is
  // neither a safe whole number nor 1..65535) is told the last rule (the range), not each.
  const lastAt = new Map<string, number>();
  issues.forEach((issue, n) => {
    if (issue.code !== "unrecognized_keys") lastAt.set(dotted(issue.path), n);
  });
  for (const [n, issue] of issues.entries()) {
    if (issue.code !== "unrecognized_keys" && lastAt.get(dotted(issue.path)) !== n) continue;
    const path = issue.path;
    const field = [...path].reverse().find((k) => typeof k === "string") as string | undefined;
    const at = dotted(path);
    const label = at === "" ? "the recipe" : `\`${at}\``;
    switch (issue.code) {
      case "unrecognized_keys": {
        const allowed = (() => {
          const s = schemaAt(schema, path);
          return s && s.node instanceof z.ZodObject ? Object.keys(s.node.shape) : [];
        })();
        // Each unknown key is told by name up to a point; past it, one problem counts the
        // rest (a hostile recipe may carry thousands: the answer stays small, its cost linear).
        const told = issue.keys.slice(0, UNKNOWN_KEYS_TOLD);
        if (issue.keys.length > told.length) {
          out.push({
            path: at,
            message: `${issue.keys.length - told.length} more unknown fields in ${label} (${issue.keys.length} in all; the first ${told.length} are listed)`,
            fix: `Remove the unknown fields of ${label}${allowed.length ? `; allowed fields here: ${allowed.join(", ")}` : ""}.`,
          });
        }
        for (const key of told) {
          if (key === "<<") {
            // YAML 1.1 merge keys: the recipe parser reads YAML 1.2 (no merges), so `<<` is a
            // plain key here; say what it is rather than "unknown field".
            const fields = mergedFields(input, path);
            out.push({
              path: dotted([...path, key]),
              message: "YAML merge keys (<<) are not supported; write the fields out",
              fix: `Replace \`<<\` in ${label} with the fields it merges${fields.length ? ` (${fields.join(", ")})` : ""}, written out in ${label} itself.`,
            });
            continue;
          }
          const near = allowed
            .map((a) => ({ a, d: distance(key, a) }))
            .filter((x) => x.d <= 2)
            .sort((x, y) => x.d - y.d)[0];
          out.push({
            path: dotted([...path, key]),
            message: `unknown field \`${key}\` in ${label}`,
            fix:
              (near ? `Did you mean \`${near.a}\`? ` : `Remove \`${key}\`. `) +
              (allowed.length ? `Allowed fields here: ${allowed.join(", ")}.` : ""),
          });
        }
        break;
      }
      case "invalid_type": {
        const missing = valueAt(input, path) === undefined;
        // A field a merge key would have brought: the merge key's own problem says it.
        if (missing && field && mergedFields(input, path.slice(0, -1)).includes(field)) break;
        const desc = schemaAt(schema, path)?.description;
        if (path.length === 0) {
          out.push({
            path: at,
            message: `the recipe must be a mapping (${issue.message.replace(/^Invalid input: /, "")})`,
            fix: "Write the recipe as a YAML mapping with name, model, image, previous_image, lanes and rollout; see recipes/example.yaml.",
          });
        } else if (missing && field === "host_key" && isJumpPin(path)) {
          out.push({
            path: at,
            message: `the ${jumpHostName(path, input)} has no host key pin (\`${at}\`)`,
            fix: jumpHostKeyFix(path, input),
          });
        } else if (missing && field === "host_key") {
          out.push({ path: at, message: "lane has no host key pin", fix: HOST_KEY_FIX });
        } else if (
          typeof valueAt(input, path) === "number" &&
          !Number.isFinite(valueAt(input, path))
        ) {
          // YAML reads 1e400 and .inf as Infinity, .nan as NaN: no field takes them.
          out.push({
            path: at,
            message: `${label} must be a finite number; got ${String(valueAt(input, path))} (a number too large, .inf or .nan)`,
            fix: fieldFix(field, path, input) ?? `Set ${label} to a finite number.`,
          });
        } else if (issue.expected === "int" && typeof valueAt(input, path) === "number") {
          // `.int()` refuses a fraction (or an unsafe integer) as an invalid type; a field
          // with a message of its own keeps it, the others are told in the same words.
          out.push({
            path: at,
            message: issue.message.startsWith("Invalid input:")
              ? `${label} must be a whole number; got ${String(valueAt(input, path))}`
              : `${issue.message}; got ${String(valueAt(input, path))}`,
            fix:
              fieldFix(field, path, input) ??
              `Set ${label} to a whole number${numberRange(schemaAt(schema, path)?.node)}${desc ? ` (${desc})` : ""}.`,
          });
        } else if (missing) {
          out.push({
            path: at,
            message: `${label} is required`,
            fix: `Add \`${field ?? at}\`${desc ? `: ${desc}` : "."}`,
          });
        } else {
          out.push({
            path: at,
            message: `${label}: ${issue.message.replace(/^Invalid input: /, "")}`,
            fix:
              fieldFix(field, path, input) ??
              `Set ${label} to ${/^[aeiou]/.test(issue.expected) ? "an" : "a"} ${issue.expected}${desc ? ` (${desc})` : ""}.`,
          });
        }
        break;
      }
      case "invalid_value":
        out.push({
          path: at,
          message: `${label}: ${issue.message.replace(/^Invalid input: /, "")}`,
          fix: `Use one of: ${issue.values.map((v) => String(v)).join(", ")}.`,
        });
        break;
      default:
        // Too many entries: the fix is about the count, not how to write one entry.
        if (issue.code === "too_big" && issue.origin === "array") {
          const given = valueAt(input, path);
          const count = Array.isArray(given) ? given.length : undefined;
          const max = Number(issue.maximum);
          out.push({
            path: at,
            message: `${label}: ${issue.message}${count !== undefined ? `; it lists ${count}` : ""}`,
            fix:
              (field ? COUNT_FIXES[field]?.(max) : undefined) ??
              `Keep at most ${max} entries in ${label}.`,
          });
          break;
        }
        out.push({
          path: at,
          message: issue.message.startsWith(field ?? "\u0000")
            ? issue.message
            : `${label}: ${issue.message}`,
          fix:
            customFix(issue) ??
            fieldFix(field, path, input) ??
            ruleFix(issue, label, schemaAt(schema, path)?.description),
        });
    }
  }
  return out;
}
