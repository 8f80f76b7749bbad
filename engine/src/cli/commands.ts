/**
 * What each `baton` command does. Every function resolves to an exit code or throws a
 * `CliError`; printing goes through `io` so that tests and the program share one path.
 */
import { createPrivateKey } from "node:crypto";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { BatonError } from "../domain/errors.ts";
import type { ReleaseState } from "../domain/states.ts";
import { RELEASE_STATES } from "../domain/states.ts";
import {
  ACTOR_PATTERN,
  suggestedCommand,
  VERBS,
  type VerbName,
  verbRoute,
} from "../domain/verbs.ts";
import { drainCapacityNotes, waveRoundNotes, waveRounds } from "../domain/wave-rounds.ts";
import type { ReleaseSummary } from "../ports/store.ts";
import { isReleaseId, isStepRunId } from "../protocol/ids.ts";
import { readRecipeFileText } from "../recipes/read-file.ts";
import { type Connection, EngineClient } from "./client.ts";
import { CliError, EXIT, type ExitCode, errorLines, usage } from "./errors.ts";
import { type RecordJson, releaseSummary, releasesTable, statusJson } from "./output.ts";
import { statusWatch } from "./status-watch.ts";
import { watch } from "./watch.ts";

/**
 * Where a command prints and what it reads of its environment: `bin/baton.mjs` passes the
 * process's streams and environment; tests pass their own, to run the CLI in process.
 */
export interface Io {
  out: { write(s: string): unknown; isTTY?: boolean; columns?: number };
  err: { write(s: string): unknown };
  /**
   * The variables the commands read (BATON_ENGINE_URL, BATON_TOKEN, USER, GITHUB_TOKEN, and
   * whether an OIDC token is there for --keyless); default `process.env`. `serve`, `demo` and
   * the Sigstore client of --keyless read `process.env` themselves.
   */
  env?: Record<string, string | undefined>;
}

/** The environment `io` gives the commands (`process.env` when it gives none). */
export const envOf = (io: Io): Record<string, string | undefined> => io.env ?? process.env;

/** @throws CliError (usage) unless `id` looks like `r17`. */
export function releaseId(id: string): string {
  if (!isReleaseId(id))
    throw usage(
      `[cli] ${JSON.stringify(id)} is not a release id; ids look like r17 (see baton status)`,
    );
  return id;
}

/** @throws CliError (usage) unless `id` looks like `sr_17_6_f`. */
export function stepRunId(id: string): string {
  if (!isStepRunId(id)) {
    throw usage(
      `[cli] ${JSON.stringify(id)} is not a step run id; ids look like sr_17_6_f (see baton status <release>)`,
    );
  }
  return id;
}

/**
 * A recipe file's text, read through `readRecipeFileText`: at most the recipe size limit + 1
 * bytes of any file (a device or FIFO included); past the limit it is refused
 * (`payload_too_large`, as the engine answers 413).
 * @throws CliError (usage) when the file cannot be read.
 */
function readRecipe(file: string): string {
  try {
    return readRecipeFileText(file);
  } catch (err) {
    if (err instanceof BatonError) throw err;
    const e = err as NodeJS.ErrnoException;
    // Not a regular file (a FIFO, a device…): its message says what it is.
    const code = e.code === "EFTYPE" ? e.message : (e.code ?? e.message);
    throw usage(
      `[cli] cannot read recipe file ${file} (${code}); give the path of a recipe YAML file`,
    );
  }
}

const print = (io: Io, lines: string[]) => io.out.write(`${lines.join("\n")}\n`);
const printJson = (io: Io, v: unknown) => io.out.write(`${JSON.stringify(v, null, 2)}\n`);

/**
 * `check <recipe…>`: contract check and compile every file, locally, listing every problem at
 * once (a file that cannot be read is a `FAIL` naming it, and the others are still checked).
 * Exit 2 when any file could not be read, else 1 when any recipe fails, else 0.
 */
export async function check(files: string[], o: { json: boolean }, io: Io): Promise<ExitCode> {
  const { compileRecipeText } = await import("../recipes/compile-text.ts");
  const results = files.map((file) => {
    try {
      const c = compileRecipeText(readRecipe(file), file);
      return {
        file,
        ok: true as const,
        steps: c.manifest.steps.length,
        waves: c.manifest.waves.length,
        manifest_digest: c.manifest_digest,
        // Not failures: parallel waves the failure-domain rule holds below max_unavailable,
        // and drains that leave fewer lanes with traffic than min_serving.
        notes: [...waveRoundNotes(c.manifest), ...drainCapacityNotes(c.manifest)],
        // Each parallel wave's resolved limit (after min_serving) and what its domains allow.
        parallel_waves: waveRounds(c.manifest),
      };
    } catch (err) {
      // A file that cannot be read is one more problem in the list: the others are still checked.
      if (err instanceof CliError && err.exitCode === EXIT.usage) {
        return { file, ok: false as const, unreadable: true, message: err.message, problems: [] };
      }
      if (!(err instanceof BatonError)) throw err;
      return { file, ok: false as const, message: err.message, problems: err.problems };
    }
  });
  if (o.json) printJson(io, { recipes: results });
  else {
    for (const r of results) {
      if (r.ok)
        print(io, [
          `ok    ${r.file}: ${r.steps} steps in ${r.waves} ${r.waves === 1 ? "wave" : "waves"}, manifest ${r.manifest_digest}`,
          ...r.notes.map((n) => `      note: ${n.path}: ${n.message}`),
        ]);
      else
        print(io, [
          `FAIL  ${r.file}`,
          ...errorLines(new CliError(r.message, EXIT.failed, r.problems)).map((l) => `      ${l}`),
        ]);
    }
  }
  // Exit codes (docs/cli.md): 2 when a file could not be read, else 1 when a recipe failed.
  if (results.some((r) => !r.ok && "unreadable" in r)) return EXIT.usage;
  return results.every((r) => r.ok) ? EXIT.ok : EXIT.failed;
}

/** `start <recipe>`: sends the recipe (YAML or JSON by extension) to the engine. */
export async function start(
  conn: Connection,
  file: string,
  o: {
    json: boolean;
    hold: boolean;
    bundle?: string;
    attestation?: string[];
    /** `dark`: `baton deploy`, held at 0% exposure until `baton release`. */
    exposure?: "dark";
  },
  io: Io,
): Promise<ExitCode> {
  let text = readRecipe(file);
  let type = /\.json$/i.test(file) ? "application/json" : "application/yaml";
  if (o.bundle || o.attestation?.length) {
    // A signed start (docs/trust.md): the recipe text, its manifest bundle, the attestations.
    const readJson = (f: string) => {
      try {
        return JSON.parse(readFileSync(f, "utf8")) as unknown;
      } catch (e) {
        throw usage(`[cli] cannot read ${f} as JSON (${(e as Error).message.split("\n")[0]})`);
      }
    };
    text = JSON.stringify({
      recipe: text,
      ...(o.bundle ? { bundle: readJson(o.bundle) } : {}),
      attestations: (o.attestation ?? []).map(readJson),
    });
    type = "application/json";
  }
  const res = await new EngineClient(conn).call<{
    id: string;
    state: string;
    step_count: number;
    manifest_digest: string;
  }>("POST", `/v1/releases${startQuery(o)}`, text, type);
  if (o.json) printJson(io, res);
  else {
    print(io, [
      `${o.exposure === "dark" ? "deployed" : "started"} ${res.id}: ${res.step_count} steps, state ${res.state}, manifest ${res.manifest_digest}`,
      ...(o.exposure === "dark"
        ? [
            `  it waits at 0% exposure before the first traffic write; expose it with: ${suggestedCommand("release", { target: res.id })}`,
          ]
        : []),
      `  follow it: baton watch ${res.id}   dashboard: ${conn.engine}/releases/${res.id}`,
    ]);
  }
  return EXIT.ok;
}

/** The query of a start: `?start=false` (hold), `?exposure=dark` (deploy). */
function startQuery(o: { hold: boolean; exposure?: "dark" }): string {
  const q = new URLSearchParams();
  if (o.hold) q.set("start", "false");
  if (o.exposure) q.set("exposure", o.exposure);
  const text = q.toString();
  return text ? `?${text}` : "";
}

/** `status [id]`: the releases table, or one release's summary. */
export async function status(
  conn: Connection,
  id: string | undefined,
  o: {
    json: boolean;
    state?: string;
    limit?: string;
    /** `-w`: one screen, redrawn as the release changes (`status-watch.ts`). */
    watch?: boolean;
    interval?: string;
    timeout?: string;
  },
  io: Io,
): Promise<ExitCode> {
  const client = new EngineClient(conn);
  if (o.watch) {
    if (id === undefined)
      throw usage("[cli] status -w follows one release: give its id, e.g. baton status r17 -w");
    if (o.json)
      throw usage(
        "[cli] status -w draws a screen; for one JSON object per change use baton watch <id> --json",
      );
    return statusWatch(client, releaseId(id), {
      ...pollOptions({ interval: o.interval ?? "1000", timeout: o.timeout ?? "21600" }),
      out: io.out,
    });
  }
  if (id !== undefined) {
    // --state and --limit filter the list: with an id they would be ignored, so say so.
    const listOnly = [
      o.state !== undefined && "--state",
      o.limit !== undefined && "--limit",
    ].filter(Boolean);
    if (listOnly.length > 0) {
      throw usage(
        `[cli] ${listOnly.join(" and ")} filter the list of releases; baton status ${id} shows one release: drop ${listOnly.join(" and ")}, or drop the id to list`,
      );
    }
    const rec = await client.call<RecordJson>("GET", `/v1/releases/${releaseId(id)}`);
    if (o.json) printJson(io, statusJson(rec));
    else print(io, releaseSummary(rec, Date.now()));
    return EXIT.ok;
  }
  const q = new URLSearchParams();
  if (o.state !== undefined) {
    if (!RELEASE_STATES.includes(o.state as ReleaseState)) {
      throw usage(
        `[cli] --state ${JSON.stringify(o.state)} is not a release state; use one of ${RELEASE_STATES.join(", ")}`,
      );
    }
    q.set("state", o.state);
  }
  if (o.limit !== undefined) {
    const n = Number(o.limit);
    if (!Number.isInteger(n) || n < 1 || n > 200)
      throw usage(`[cli] --limit must be a whole number 1..200; got ${JSON.stringify(o.limit)}`);
    q.set("limit", String(n));
  }
  const qs = q.toString();
  const res = await client.call<{ releases: ReleaseSummary[] }>(
    "GET",
    `/v1/releases${qs ? `?${qs}` : ""}`,
  );
  if (o.json) printJson(io, res);
  else print(io, releasesTable(res.releases, Date.now()));
  return EXIT.ok;
}

/** `watch <id>`. */
export async function watchCommand(
  conn: Connection,
  id: string,
  o: { json: boolean; interval: string; timeout: string },
  io: Io,
): Promise<ExitCode> {
  return watch(new EngineClient(conn), releaseId(id), {
    ...pollOptions(o),
    json: o.json,
    out: io.out,
  });
}

/**
 * `--interval <ms>` and `--timeout <s>` of a command that polls (`watch`, `status -w`).
 * @throws CliError (usage) naming the option and its range.
 */
function pollOptions(o: { interval: string; timeout: string }): {
  intervalMs: number;
  timeoutMs: number;
} {
  const interval = Number(o.interval);
  const timeout = Number(o.timeout);
  if (!Number.isFinite(interval) || interval < 100 || interval > 60_000) {
    throw usage(`[cli] --interval must be 100..60000 ms; got ${JSON.stringify(o.interval)}`);
  }
  if (!Number.isFinite(timeout) || timeout <= 0) {
    throw usage(
      `[cli] --timeout must be a positive number of seconds; got ${JSON.stringify(o.timeout)}`,
    );
  }
  return { intervalMs: interval, timeoutMs: timeout * 1000 };
}

/**
 * Writes `text` to the file an option names (`--out`): a path that cannot be written is a
 * usage error (exit 2) naming the option, the path and the fix, not Node's raw `ENOENT: …`.
 * @throws CliError (usage) when the folder is missing, the path is a folder, or writing is denied.
 */
export function writeOutFile(
  file: string,
  text: string,
  flag = "--out",
  options: { mode?: number } = {},
): void {
  try {
    writeFileSync(file, text, options);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const folder = dirname(file);
    if (code === "ENOENT") {
      throw usage(
        `[cli] ${flag} ${file}: the folder ${folder} does not exist; create it (mkdir -p ${folder}) or choose another path`,
      );
    }
    if (code === "ENOTDIR") {
      throw usage(
        `[cli] ${flag} ${file}: a part of ${folder} is a file, not a folder; choose another path`,
      );
    }
    if (code === "EISDIR") {
      throw usage(`[cli] ${flag} ${file}: is a folder; name a file in it, e.g. ${file}/out.json`);
    }
    if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
      throw usage(
        `[cli] ${flag} ${file}: cannot write there (${code}); choose a path you can write to`,
      );
    }
    throw usage(`[cli] ${flag} ${file}: cannot write (${code ?? String(e)}); choose another path`);
  }
}

/**
 * `record <id>`: the release record document (docs/record.md), to stdout or `--out FILE`;
 * `--raw`: the engine's full state of the release instead (release, history, attempt results).
 */
export async function record(
  conn: Connection,
  id: string,
  o: { raw?: boolean; out?: string },
  io: Io,
): Promise<ExitCode> {
  const path = `/v1/releases/${releaseId(id)}${o.raw ? "" : "/record"}`;
  const rec = await new EngineClient(conn).call<RecordJson>("GET", path);
  if (o.out) {
    writeOutFile(o.out, `${JSON.stringify(rec, null, 2)}\n`);
    print(io, [`wrote ${o.raw ? "the full state" : "the release record"} of ${id} to ${o.out}`]);
  } else printJson(io, rec);
  return EXIT.ok;
}

/**
 * `keygen <prefix>`: an ECDSA P-256 signing key (`<prefix>.key`, mode 0600) and `<prefix>.pub`.
 * @throws CliError (usage) when either file exists and `force` is not set: a key is never
 *   overwritten by accident.
 */
export async function keygen(prefix: string, o: { force?: boolean }, io: Io): Promise<ExitCode> {
  if (!o.force) {
    for (const file of [`${prefix}.key`, `${prefix}.pub`]) {
      if (existsSync(file)) {
        throw usage(
          `[cli] keygen: ${file} already exists; choose another prefix, delete it first, or pass --force to replace the key pair`,
        );
      }
    }
  }
  const { generateSigningKey } = await import("../admission/sign.ts");
  const k = generateSigningKey();
  writeOutFile(`${prefix}.key`, k.private_key_pem, "keygen", { mode: 0o600 });
  // `mode` applies only to a new file: a key replaced with --force is made private too.
  chmodSync(`${prefix}.key`, 0o600);
  writeOutFile(`${prefix}.pub`, k.public_key_pem, "keygen");
  print(io, [
    `wrote ${prefix}.key (private, keep it secret) and ${prefix}.pub`,
    `  list ${prefix}.pub under manifest.signers.keys in the engine's trust policy (docs/trust.md)`,
  ]);
  return EXIT.ok;
}

/**
 * `sign <recipe>`: compiles the recipe locally and signs its manifest: with `--key` (and
 * `--key-id`), or keylessly in GitHub Actions (`--keyless`, needs `id-token: write`).
 * Writes the Sigstore bundle to `--out` (or stdout); prints the digest to stderr.
 */
export async function sign(
  file: string,
  o: {
    key?: string;
    keyId?: string;
    keyless?: boolean;
    out?: string;
    validFor?: string;
  } & KeylessFlags,
  io: Io,
): Promise<ExitCode> {
  if (Boolean(o.key) === Boolean(o.keyless)) {
    throw usage("[cli] give exactly one of --key <file> (with --key-id) or --keyless");
  }
  if (o.key && !o.keyId)
    throw usage("[cli] --key needs --key-id <id> (the id the trust policy lists)");
  const validMs = o.validFor === undefined ? undefined : parseValidFor(o.validFor);
  const { compileRecipeText } = await import("../recipes/compile-text.ts");
  const { signManifest } = await import("../admission/sign.ts");
  const keyless = o.keyless ? keylessOptions(o, envOf(io)) : undefined;
  const c = compileRecipeText(readRecipe(file), file);
  const key = o.key ? readSigningKey(o.key, o.keyId) : undefined;
  const bundle = await signManifest(c, {
    ...(key ? { key } : { keyless }),
    ...(validMs ? { valid_for_ms: validMs } : {}),
  });
  const text = `${JSON.stringify(bundle)}\n`;
  if (o.out) writeOutFile(o.out, text);
  else io.out.write(text);
  io.err.write(
    `signed manifest sha256:${c.manifest_digest} of ${file}${o.out ? ` -> ${o.out}` : ""}\n`,
  );
  return EXIT.ok;
}

/** Longest `--valid-for` a manifest signature may have: 366 days, in ms. */
export const MAX_VALID_FOR_MS = 366 * 86_400_000;

/**
 * `--valid-for` as ms: `<n>h` or `<n>d`, at least 1h and at most 366d.
 * @throws CliError (usage) naming the flag, the bounds and an example otherwise.
 */
export function parseValidFor(text: string): number {
  const m = /^(\d+)([hd])$/.exec(text);
  const ms = m ? Number(m[1]) * (m[2] === "h" ? 3_600_000 : 86_400_000) : Number.NaN;
  if (!(ms > 0 && ms <= MAX_VALID_FOR_MS)) {
    throw usage(
      `[cli] --valid-for ${JSON.stringify(text)}: give hours or days from 1h to 366d, e.g. 12h or 7d (leave it out for 7d)`,
    );
  }
  return ms;
}

/** An image reference pinned by digest (`name[:tag]@sha256:<64 hex>`). */
const PINNED_IMAGE = /^[^\s@]+@sha256:[a-f0-9]{64}$/;

/**
 * Whether `arg` reads as an image reference (a tag or digest: `ghcr.io/a/b:latest`,
 * `b@sha256:ab…`) rather than a recipe file: no such file, no recipe extension, and a `:` or `@`.
 */
function looksLikeImage(arg: string): boolean {
  return !existsSync(arg) && !/\.(ya?ml|json)$/i.test(arg) && /^[^\s]+[:@][^\s]+$/.test(arg);
}

/**
 * `baton attest <image|recipe>`: signs a SLSA provenance v1 Statement for the image (a recipe
 * file's `image`) with a local key, in GitHub's layout (what `actions/attest-build-provenance`
 * writes), and prints the Sigstore bundle (or writes it to `--out`): the file `--attestation`
 * sends. For keys a trust policy lists (the demo's own, tests); a real build attests in its
 * build job. `--builder` defaults to GitHub-hosted runners' id.
 * @throws CliError (usage) for a missing flag, an unreadable key or recipe, or an image not
 *   pinned by digest.
 */
export async function attest(
  subject: string,
  o: { key?: string; keyId?: string; repository?: string; builder?: string; out?: string },
  io: Io,
): Promise<ExitCode> {
  if (!PINNED_IMAGE.test(subject) && looksLikeImage(subject))
    throw usage(
      `[cli] attest ${subject}: this looks like an image reference not pinned by digest (and is no recipe file); give the image as name@sha256:<64 hex> or a recipe file, first: baton attest <image@sha256:…|recipe.yaml> --key <file> --key-id <id> --repository <url>`,
    );
  if (!o.key) throw usage("[cli] attest needs --key <file> (with --key-id), the signing key");
  const key = readSigningKey(o.key, o.keyId);
  if (!o.repository)
    throw usage(
      "[cli] attest needs --repository <url>, the source repository the trust policy lists (images.source_repositories), e.g. https://github.com/acme/models",
    );
  const { GITHUB_HOSTED_BUILDER, provenanceStatement } = await import("../admission/statement.ts");
  const { signWithKey } = await import("../admission/sign.ts");
  let image = subject;
  if (!PINNED_IMAGE.test(subject)) {
    const { compileRecipeText } = await import("../recipes/compile-text.ts");
    image = compileRecipeText(readRecipe(subject), subject).manifest.image;
  }
  const builder = o.builder ?? GITHUB_HOSTED_BUILDER;
  const bundle = await signWithKey(
    provenanceStatement(image, { builder, repository: o.repository }),
    key,
  );
  const text = `${JSON.stringify(bundle)}\n`;
  if (o.out) writeOutFile(o.out, text);
  else io.out.write(text);
  io.err.write(
    `attested ${image}: built by ${builder} from ${o.repository}, signed by key ${key.key_id}${o.out ? ` -> ${o.out}` : ""}\n`,
  );
  return EXIT.ok;
}

/** A RecordSignatureError as a CLI error (exit 1) with its check and fix. */
async function recordFailure<T>(f: () => T | Promise<T>): Promise<T> {
  const { RecordSignatureError } = await import("../record/sign.ts");
  try {
    return await f();
  } catch (e) {
    if (e instanceof RecordSignatureError) {
      throw new CliError(`[cli] ${e.check}: ${e.message}`, EXIT.failed, [
        { path: e.check, message: e.message, fix: e.fix },
      ]);
    }
    throw e;
  }
}

/**
 * `sign-record <record.json>`: signs a closed release record written by `baton record --out`
 * (subject = its digest) with `--key`/`--key-id` or `--keyless`; the bundle goes to `--out` or
 * stdout. Refuses (exit 1) an open record or one whose contents no longer match its digest.
 */
export async function signRecordFile(
  file: string,
  o: { key?: string; keyId?: string; keyless?: boolean; out?: string },
  io: Io,
): Promise<ExitCode> {
  if (Boolean(o.key) === Boolean(o.keyless)) {
    throw usage("[cli] give exactly one of --key <file> (with --key-id) or --keyless");
  }
  const key = o.key ? readSigningKey(o.key, o.keyId) : undefined;
  const value = readJsonFile(file);
  const { signRecord } = await import("../record/sign.ts");
  const r = await recordFailure(() => signRecord(value, key ? { key } : { keyless: {} }));
  const text = `${JSON.stringify(r.bundle)}\n`;
  if (o.out) writeOutFile(o.out, text);
  else io.out.write(text);
  io.err.write(
    `signed the record of ${r.release_id}, sha256:${r.digest}${o.out ? ` -> ${o.out}` : ""}\n`,
  );
  return EXIT.ok;
}

/**
 * `verify-record <record.json> --bundle <file>`: checks the record is closed and unchanged and
 * that the bundle signs its digest, by `--public-key`/`--key-id` or a signer of `--policy`'s
 * `manifest.signers` (the engine's trust policy file). Exit 0 verified, 1 not.
 */
export async function verifyRecordFile(
  file: string,
  o: { bundle: string; publicKey?: string; keyId?: string; policy?: string; json?: boolean },
  io: Io,
): Promise<ExitCode> {
  if (Boolean(o.publicKey) === Boolean(o.policy)) {
    throw usage("[cli] give exactly one of --public-key <file> (with --key-id) or --policy <file>");
  }
  if (o.publicKey && !o.keyId) throw usage("[cli] --public-key needs --key-id <id>");
  const { loadTrustPolicy, parseTrustPolicy } = await import("../admission/policy.ts");
  let policy: ReturnType<typeof loadTrustPolicy>;
  try {
    policy = o.policy
      ? loadTrustPolicy(o.policy)
      : parseTrustPolicy(
          {
            version: 1,
            manifest: { signers: { keys: [{ key_id: o.keyId, public_key_file: o.publicKey }] } },
            images: { provenance: "off" },
          },
          process.cwd(),
        );
  } catch (e) {
    if (e instanceof BatonError) {
      throw new CliError(`[cli] ${e.message}`, EXIT.usage, e.problems);
    }
    throw e;
  }
  const value = readJsonFile(file);
  const bundle = readJsonFile(o.bundle);
  const { verifyRecord } = await import("../record/sign.ts");
  const { describeSigner } = await import("../admission/signer.ts");
  const v = await recordFailure(() => verifyRecord(value, bundle, policy, policy.manifest.signers));
  if (o.json) printJson(io, { verified: true, ...v });
  else
    print(io, [
      `verified: the record of ${v.release_id} (sha256:${v.digest}) is signed by ${describeSigner(v.signer)}`,
    ]);
  return EXIT.ok;
}

/**
 * Reads a PEM signing key file for `--key` with its `--key-id` (sign, attest, sign-record,
 * start-pending).
 * @throws usage error (exit 2) without a key id, when the file cannot be read, or when it is not
 *   a private key (a .pub, /etc/passwd…), naming the file.
 */
export function readSigningKey(
  file: string,
  keyId: string | undefined,
): { key_id: string; private_key_pem: string } {
  if (!keyId) throw usage("[cli] --key needs --key-id <id> (the id the trust policy lists)");
  let pem: string;
  try {
    pem = readFileSync(file, "utf8");
  } catch (e) {
    throw usage(`[cli] cannot read key file ${file} (${(e as NodeJS.ErrnoException).code})`);
  }
  try {
    createPrivateKey(pem);
  } catch {
    throw usage(
      `[cli] --key ${file} is not a private key: give the PEM (PKCS#8) <prefix>.key that baton keygen writes, not its .pub or another file`,
    );
  }
  return { key_id: keyId, private_key_pem: pem };
}

/** Sigstore instances a keyless signature can go to (docs/trust.md "Signing from the recipe workflow"). */
export const SIGSTORE_INSTANCES = {
  /** Public-good Sigstore: Fulcio + Rekor at sigstore.dev (sigstore-js's defaults). */
  "public-good": {},
  /** GitHub's Sigstore (private repositories' attestations): Fulcio + TSA, no public log. */
  github: {
    fulcioURL: "https://fulcio.githubapp.com",
    tsaServerURL: "https://timestamp.githubapp.com",
    tlogUpload: false,
  },
} as const;

/** Keyless flags as given (`--sigstore`, `--fulcio-url`, `--rekor-url`, `--tsa-url`). */
export interface KeylessFlags {
  sigstore?: string;
  fulcioUrl?: string;
  rekorUrl?: string;
  tsaUrl?: string;
}

/**
 * sigstore-js options for a keyless signature with the CI's OIDC identity. `--tsa-url`
 * without `--rekor-url` means a timestamp authority instead of the transparency log.
 * @throws usage error (exit 2) for an unknown instance, a bad URL, or when no OIDC token can
 * be had (`ACTIONS_ID_TOKEN_REQUEST_URL` + `_TOKEN`, or `SIGSTORE_ID_TOKEN`).
 */
export function keylessOptions(
  f: KeylessFlags,
  env: Record<string, string | undefined> = process.env,
): {
  fulcioURL?: string;
  rekorURL?: string;
  tsaServerURL?: string;
  tlogUpload?: boolean;
} {
  const name = f.sigstore ?? "public-good";
  if (!Object.hasOwn(SIGSTORE_INSTANCES, name))
    throw usage(
      `[cli] --sigstore must be one of ${Object.keys(SIGSTORE_INSTANCES).join(", ")}, not ${JSON.stringify(name)}`,
    );
  const url = (flag: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    try {
      const u = new URL(v);
      if (u.protocol !== "https:" && u.protocol !== "http:") throw new Error("scheme");
    } catch {
      throw usage(`[cli] ${flag} must be an http(s) URL, not ${JSON.stringify(v)}`);
    }
    return v.replace(/\/+$/, "");
  };
  const fulcio = url("--fulcio-url", f.fulcioUrl);
  const rekor = url("--rekor-url", f.rekorUrl);
  const tsa = url("--tsa-url", f.tsaUrl);
  const hasGha = Boolean(env.ACTIONS_ID_TOKEN_REQUEST_URL && env.ACTIONS_ID_TOKEN_REQUEST_TOKEN);
  if (!hasGha && !env.SIGSTORE_ID_TOKEN)
    throw usage(
      "[cli] --keyless needs an OIDC identity token: in GitHub Actions give the job `permissions: id-token: write` (it sets ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN); elsewhere set SIGSTORE_ID_TOKEN, or sign with --key",
    );
  const out: ReturnType<typeof keylessOptions> = { ...SIGSTORE_INSTANCES[name as "github"] };
  if (fulcio) out.fulcioURL = fulcio;
  if (tsa) {
    out.tsaServerURL = tsa;
    if (!rekor) out.tlogUpload = false;
  }
  if (rekor) {
    out.rekorURL = rekor;
    out.tlogUpload = true;
  }
  return out;
}

/**
 * Where `--github-attestations <owner/name>` reads: GITHUB_API_URL (default api.github.com)
 * with GITHUB_TOKEN (or GH_TOKEN).
 * @throws usage error (exit 2) for a bad repository or no token.
 */
export function githubAttestationSource(
  repository: string,
  env: Record<string, string | undefined> = process.env,
): { apiUrl: string; repository: string; token: string } {
  if (!/^[\w.-]+\/[\w.-]+$/.test(repository))
    throw usage(
      `[cli] --github-attestations must be owner/name, not ${JSON.stringify(repository)}`,
    );
  const token = env.GITHUB_TOKEN || env.GH_TOKEN;
  if (!token)
    throw usage(
      "[cli] --github-attestations needs GITHUB_TOKEN (or GH_TOKEN) that may read the repository's attestations (permissions: attestations: read)",
    );
  return { apiUrl: env.GITHUB_API_URL || "https://api.github.com", repository, token };
}

/** Reads image attestation bundle files (`--attestation`). @throws usage error (exit 2). */
export function readAttestations(files: string[] | undefined): unknown[] {
  return (files ?? []).map(readJsonFile);
}

/**
 * The caller's name for the history: `--actor`, else $USER (or $LOGNAME) when it fits the actor
 * rule; undefined when neither is given or $USER does not fit.
 * @throws usage error (exit 2) naming `--actor` and the rule when `given` does not fit it.
 */
export function actorName(
  given: string | undefined,
  env: Record<string, string | undefined>,
): string | undefined {
  if (given !== undefined && !ACTOR_PATTERN.test(given))
    throw usage(
      `[cli] --actor must be 1-64 letters, digits, '.', '_', '@', '-' or spaces, not ${JSON.stringify(given)}; give your login, e.g. --actor dana`,
    );
  const name = given ?? env.USER ?? env.LOGNAME;
  return name && ACTOR_PATTERN.test(name) ? name : undefined;
}

/**
 * What a suggested command needs to say who acts: `""` when $USER (or $LOGNAME) names the
 * caller, else ` --actor <given>` (the `--actor` this command was given) or ` --actor <name>`,
 * so that the command runs as written.
 */
export function actorSuggestion(
  given: string | undefined,
  env: Record<string, string | undefined>,
): string {
  if (actorName(undefined, env)) return "";
  return ` --actor ${given !== undefined && ACTOR_PATTERN.test(given) ? given : "<name>"}`;
}

function readJsonFile(f: string): unknown {
  try {
    return JSON.parse(readFileSync(f, "utf8")) as unknown;
  } catch (e) {
    throw usage(`[cli] cannot read ${f} as JSON (${(e as Error).message.split("\n")[0]})`);
  }
}

/**
 * `--lane a=img --lane b=none` as `{a: "img", b: "none"}`.
 * @throws CliError (usage) naming a bad pair, or a lane named twice (which value is meant is
 *   not for the CLI to guess).
 */
function lanePairs(pairs: string[]): Record<string, string> {
  const lanes = new Map<string, string>();
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    if (at <= 0 || at === pair.length - 1) {
      throw usage(
        `[cli] --lane ${JSON.stringify(pair)} must be <lane id>=<image> or <lane id>=none, e.g. --lane lane-a=registry/model@sha256:…`,
      );
    }
    const lane = pair.slice(0, at);
    const value = pair.slice(at + 1);
    const earlier = lanes.get(lane);
    if (earlier !== undefined) {
      throw usage(
        `[cli] --lane ${lane} is given twice (${earlier} and ${value}); give each lane once, with the image it runs now or none`,
      );
    }
    lanes.set(lane, value);
  }
  return Object.fromEntries(lanes);
}

/** The option's key as commander stores it: `--record-digest` -> `recordDigest`. */
const optionKey = (flag: string) =>
  flag.replace(/^--/, "").replace(/-([a-z])/g, (_m, ch: string) => ch.toUpperCase());

/**
 * The request body of `verb` from the command line: its positional arguments after the id
 * (`args`) and its flags (`o`, as commander parsed them), as its declaration says
 * (domain/verbs.ts); undefined for a verb that sends no body. `env` gives $USER for `--actor`'s
 * default.
 */
export function verbBody(
  verb: VerbName,
  args: readonly string[],
  o: Readonly<Record<string, unknown>>,
  env: Record<string, string | undefined> = process.env,
): Record<string, unknown> | undefined {
  const v = VERBS[verb];
  if (v.body === "none") return undefined;
  const body: Record<string, unknown> = {};
  v.args.forEach((a, i) => {
    const given = args[i] ?? "";
    body[a.body] = a.body === "recipe" ? readRecipe(given) : given;
  });
  for (const f of v.flags) {
    const given = o[optionKey(f.flag)];
    if (f.body === null) continue;
    if (f.reads === "actor") {
      const actor = actorName(given as string | undefined, env);
      if (actor) body[f.body] = actor;
    } else if (f.reads === "lanes") body[f.body] = lanePairs((given as string[] | undefined) ?? []);
    else if (f.reads === "json-file") {
      if (given) body[f.body] = readJsonFile(given as string);
    } else if (f.reads === "json-files")
      body[f.body] = ((given as string[] | undefined) ?? []).map(readJsonFile);
    else if (f.body === "reason") body[f.body] = (given as string | undefined) ?? "";
    else if (given !== undefined) body[f.body] = given;
  }
  return body;
}

/** What `postVerb` sent and got: the id as checked, the body sent, the engine's answer. */
export interface VerbPosted {
  id: string;
  sent: Record<string, unknown>;
  answer: Record<string, unknown>;
}

/**
 * Sends operator verb `name` on `target`: the id checked, the body from the command line
 * (`verbBody`), one POST to the verb's route. @throws CliError: a bad id or flag (usage, exit
 * 2), or the engine's refusal (exit 1, its reason).
 */
export async function postVerb(
  conn: Connection,
  name: VerbName,
  target: string,
  args: readonly string[],
  o: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<VerbPosted> {
  const v = VERBS[name];
  const id = v.on === "step_run" ? stepRunId(target) : releaseId(target);
  const body = verbBody(name, args, o, envOf(io));
  const answer = await new EngineClient(conn).call<Record<string, unknown>>(
    "POST",
    verbRoute(name).slice("POST ".length).replace(":id", id),
    body === undefined ? undefined : JSON.stringify(body),
  );
  return { id, sent: body ?? {}, answer };
}

/**
 * An operator verb (domain/verbs.ts: abort, resume, pause, release, promote, retry, resolve,
 * abandon, confirm-restore, rollback, roll-forward, accept) on `target`: `postVerb`, then the
 * verb's accepted lines (or the answer with --json). A refusal exits 1 with the engine's
 * reason. A verb with its own action (`cli: "own"`, verify) is not run here.
 */
export async function verb(
  conn: Connection,
  name: VerbName,
  target: string,
  args: readonly string[],
  o: Readonly<Record<string, unknown>> & { json: boolean },
  io: Io,
): Promise<ExitCode> {
  const { id, sent, answer } = await postVerb(conn, name, target, args, o, io);
  if (o.json) printJson(io, answer);
  else print(io, VERBS[name].accepted(id, answer, conn.engine, sent));
  return EXIT.ok;
}
