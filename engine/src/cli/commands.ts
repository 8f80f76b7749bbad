/**
 * What each `baton` command does. Every function resolves to an exit code or throws a
 * `CliError`; printing goes through `io` so that tests and the program share one path.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { BatonError } from "../domain/errors.ts";
import type { ReleaseState } from "../domain/states.ts";
import { RELEASE_STATES } from "../domain/states.ts";
import { drainCapacityNotes, waveRoundNotes, waveRounds } from "../domain/wave-rounds.ts";
import type { ReleaseSummary } from "../ports/store.ts";
import { isReleaseId, isStepRunId } from "../protocol/ids.ts";
import { type Connection, EngineClient } from "./client.ts";
import { CliError, EXIT, type ExitCode, errorLines, usage } from "./errors.ts";
import { type RecordJson, releaseSummary, releasesTable, statusJson } from "./output.ts";
import { watch } from "./watch.ts";

export interface Io {
  out: { write(s: string): unknown; isTTY?: boolean };
  err: { write(s: string): unknown };
}

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

function readRecipe(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw usage(
      `[cli] cannot read recipe file ${file} (${code}); give the path of a recipe YAML file`,
    );
  }
}

const print = (io: Io, lines: string[]) => io.out.write(`${lines.join("\n")}\n`);
const printJson = (io: Io, v: unknown) => io.out.write(`${JSON.stringify(v, null, 2)}\n`);

/** `check <recipe…>`: contract check and compile, locally; exit 1 when any recipe fails. */
export async function check(files: string[], o: { json: boolean }, io: Io): Promise<ExitCode> {
  const { compileRecipeText } = await import("../recipes/compile-text.ts");
  const results = files.map((file) => {
    const text = readRecipe(file);
    try {
      const c = compileRecipeText(text, file);
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
      if (!(err instanceof BatonError)) throw err;
      return { file, ok: false as const, message: err.message, problems: err.problems };
    }
  });
  if (o.json) printJson(io, { recipes: results });
  else {
    for (const r of results) {
      if (r.ok)
        print(io, [
          `ok    ${r.file}: ${r.steps} steps in ${r.waves} waves, manifest ${r.manifest_digest}`,
          ...r.notes.map((n) => `      note: ${n.path}: ${n.message}`),
        ]);
      else
        print(io, [
          `FAIL  ${r.file}`,
          ...errorLines(new CliError(r.message, EXIT.failed, r.problems)).map((l) => `      ${l}`),
        ]);
    }
  }
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
    rollback?: boolean;
    /** `dark`: `baton deploy`, held at 0% exposure until `baton release`. */
    exposure?: "dark";
  },
  io: Io,
): Promise<ExitCode> {
  let text = readRecipe(file);
  let type = /\.json$/i.test(file) ? "application/json" : "application/yaml";
  if (o.bundle || o.attestation?.length || o.rollback) {
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
      rollback: Boolean(o.rollback),
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
            `  it waits at 0% exposure before the first traffic write; expose it with: baton release ${res.id}`,
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
  o: { json: boolean; state?: string; limit?: string },
  io: Io,
): Promise<ExitCode> {
  const client = new EngineClient(conn);
  if (id !== undefined) {
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
  return watch(new EngineClient(conn), releaseId(id), {
    intervalMs: interval,
    timeoutMs: timeout * 1000,
    json: o.json,
    out: io.out,
  });
}

/**
 * `abort <id> --reason [--actor]`, `resume <id>`, `retry <step-run>`: operator actions;
 * refusals exit 1.
 */
export async function act(
  conn: Connection,
  action: "abort" | "resume" | "retry",
  target: string,
  o: { json: boolean; reason?: string; actor?: string },
  io: Io,
): Promise<ExitCode> {
  const client = new EngineClient(conn);
  let path: string;
  let body: string | undefined;
  if (action === "retry") path = `/v1/releases/step-runs/${stepRunId(target)}/retry`;
  else path = `/v1/releases/${releaseId(target)}/${action}`;
  if (action === "abort") {
    const actor = actorName(o.actor);
    body = JSON.stringify({ reason: o.reason ?? "", ...(actor ? { actor } : {}) });
  }
  const res = await client.call<{ state?: string; release_state?: string; generation?: number }>(
    "POST",
    path,
    body,
  );
  if (o.json) printJson(io, res);
  else {
    const state = res.state ?? res.release_state ?? "?";
    const release = action === "retry" ? `r${target.split("_")[1]}` : target;
    print(io, [
      `${action} accepted: ${release} is now ${state}${res.generation !== undefined ? ` (generation ${res.generation})` : ""}`,
    ]);
  }
  return EXIT.ok;
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

/** `accept <id> --by <owner>`: the owner accepts a closed release's final state. */
export async function accept(
  conn: Connection,
  id: string,
  o: { by: string; expires?: string; note?: string; digest?: string; json: boolean },
  io: Io,
): Promise<ExitCode> {
  const body = {
    by: o.by,
    ...(o.expires ? { expires_at: o.expires } : {}),
    ...(o.note ? { note: o.note } : {}),
    ...(o.digest ? { record_digest: o.digest } : {}),
  };
  const res = await new EngineClient(conn).call<{ id: string; record_digest: string }>(
    "POST",
    `/v1/releases/${releaseId(id)}/accept`,
    JSON.stringify(body),
    "application/json",
  );
  if (o.json) printJson(io, res);
  else print(io, [`accepted ${id} by ${o.by}: record sha256:${res.record_digest}`]);
  return EXIT.ok;
}

/** `keygen <prefix>`: an ECDSA P-256 signing key (`<prefix>.key`, mode 0600) and `<prefix>.pub`. */
export async function keygen(prefix: string, io: Io): Promise<ExitCode> {
  const { generateSigningKey } = await import("../admission/sign.ts");
  const k = generateSigningKey();
  writeOutFile(`${prefix}.key`, k.private_key_pem, "keygen", { mode: 0o600 });
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
  let validMs: number | undefined;
  if (o.validFor) {
    const m = /^(\d+)([hd])$/.exec(o.validFor);
    if (!m) throw usage("[cli] --valid-for must be hours or days, e.g. 12h or 7d");
    validMs = Number(m[1]) * (m[2] === "h" ? 3_600_000 : 86_400_000);
  }
  const { compileRecipeText } = await import("../recipes/compile-text.ts");
  const { signManifest } = await import("../admission/sign.ts");
  const keyless = o.keyless ? keylessOptions(o) : undefined;
  const c = compileRecipeText(readRecipe(file), file);
  let keyPem = "";
  if (o.key) {
    try {
      keyPem = readFileSync(o.key, "utf8");
    } catch (e) {
      throw usage(`[cli] cannot read key file ${o.key} (${(e as NodeJS.ErrnoException).code})`);
    }
  }
  const bundle = await signManifest(c, {
    ...(o.key ? { key: { key_id: o.keyId ?? "", private_key_pem: keyPem } } : { keyless }),
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
 * Reads a PEM signing key file for `--key` with its `--key-id` (start-pending).
 * @throws usage error (exit 2) without a key id or when the file cannot be read.
 */
export function readSigningKey(
  file: string,
  keyId: string | undefined,
): { key_id: string; private_key_pem: string } {
  if (!keyId) throw usage("[cli] --key needs --key-id <id> (the id the trust policy lists)");
  try {
    return { key_id: keyId, private_key_pem: readFileSync(file, "utf8") };
  } catch (e) {
    throw usage(`[cli] cannot read key file ${file} (${(e as NodeJS.ErrnoException).code})`);
  }
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

/** The caller's name for the history: `--actor`, else $USER; undefined when neither fits. */
export function actorName(given: string | undefined): string | undefined {
  const name = given ?? process.env.USER ?? process.env.LOGNAME;
  return name && /^[A-Za-z0-9._@ -]{1,64}$/.test(name) ? name : undefined;
}

/** `resolve <step-run> --reason`: the operator did the backward effect by hand. */
export async function resolve(
  conn: Connection,
  target: string,
  o: { json: boolean; reason: string; actor?: string },
  io: Io,
): Promise<ExitCode> {
  const actor = actorName(o.actor);
  const res = await new EngineClient(conn).call<{ release_state: string }>(
    "POST",
    `/v1/releases/step-runs/${stepRunId(target)}/resolve`,
    JSON.stringify({ reason: o.reason, ...(actor ? { actor } : {}) }),
  );
  if (o.json) printJson(io, res);
  else
    print(io, [
      `resolve accepted: ${target} counts as done; r${target.split("_")[1]} is now ${res.release_state}`,
    ]);
  return EXIT.ok;
}

/** `promote <id> [--reason]`: past an inconclusive gate or a manual promotion, the next wave begins. */
export function promote(
  conn: Connection,
  id: string,
  o: { json: boolean; reason?: string; actor?: string },
  io: Io,
): Promise<ExitCode> {
  return holdVerb(conn, "promote", id, o, io);
}

const HOLD_VERB_DONE: Record<
  "pause" | "release" | "promote" | "confirm-restore",
  (id: string, state: string) => string
> = {
  pause: (id) => `step runs in flight settle, then nothing new starts until baton resume ${id}`,
  "confirm-restore": (id, state) =>
    `the restore action is recorded with your name; ${id} is ${state === "succeeded" ? "a finished rollback" : "rolled back"} and its lanes are free`,
  release: () => "the candidate gets its first exposure; the rollout goes on",
  promote: () => "the next wave begins",
};

/**
 * `pause|release|promote|confirm-restore <id> [--reason] [--actor]` (docs/lifecycle.md): an
 * operator pauses a running release (reason required), exposes a release deployed dark, widens
 * it to the next wave, or confirms a recoverable release's restore action (reason required).
 */
export async function holdVerb(
  conn: Connection,
  action: "pause" | "release" | "promote" | "confirm-restore",
  id: string,
  o: { json: boolean; reason?: string; actor?: string },
  io: Io,
): Promise<ExitCode> {
  const actor = actorName(o.actor);
  const res = await new EngineClient(conn).call<{ state: string }>(
    "POST",
    `/v1/releases/${releaseId(id)}/${action}`,
    JSON.stringify({ reason: o.reason ?? "", ...(actor ? { actor } : {}) }),
  );
  if (o.json) printJson(io, res);
  else
    print(io, [
      `${action} accepted: ${id} is now ${res.state}; ${HOLD_VERB_DONE[action](id, res.state)}`,
    ]);
  return EXIT.ok;
}

/** What a lifecycle verb answers: the new release and where it came from. */
interface NewRelease {
  id: string;
  state: string;
  step_count: number;
  manifest_digest: string;
  lineage: { verb: string; of: string; manifest_of?: string } | null;
}

/**
 * `rollback <id> [--reason]`: a succeeded release is rolled back; a new release runs the
 * previous admitted manifest of its model again (docs/lifecycle.md).
 */
export async function rollback(
  conn: Connection,
  id: string,
  o: { json: boolean; reason?: string; actor?: string },
  io: Io,
): Promise<ExitCode> {
  const actor = actorName(o.actor);
  const res = await new EngineClient(conn).call<NewRelease>(
    "POST",
    `/v1/releases/${releaseId(id)}/rollback`,
    JSON.stringify({ reason: o.reason ?? "", ...(actor ? { actor } : {}) }),
  );
  if (o.json) printJson(io, res);
  else
    print(io, [
      `rollback accepted: ${res.id} runs ${res.lineage?.manifest_of}'s admitted manifest again (${res.step_count} steps, state ${res.state}); ${id} stays as it ended`,
      `  follow it: baton watch ${res.id}   dashboard: ${conn.engine}/releases/${res.id}`,
    ]);
  return EXIT.ok;
}

/**
 * `roll-forward <id> <recipe> [--bundle] [--attestation]`: a rolled-back, aborted or abandoned
 * release is replaced by a new release of a fixed recipe (docs/lifecycle.md).
 */
export async function rollForward(
  conn: Connection,
  id: string,
  file: string,
  o: { json: boolean; bundle?: string; attestation?: string[] },
  io: Io,
): Promise<ExitCode> {
  const text = JSON.stringify({
    recipe: readRecipe(file),
    ...(o.bundle ? { bundle: readJsonFile(o.bundle) } : {}),
    attestations: (o.attestation ?? []).map(readJsonFile),
  });
  const res = await new EngineClient(conn).call<NewRelease>(
    "POST",
    `/v1/releases/${releaseId(id)}/roll-forward`,
    text,
    "application/json",
  );
  if (o.json) printJson(io, res);
  else
    print(io, [
      `roll forward accepted: ${res.id} replaces ${id} (${res.step_count} steps, state ${res.state}, manifest ${res.manifest_digest})`,
      `  follow it: baton watch ${res.id}   dashboard: ${conn.engine}/releases/${res.id}`,
    ]);
  return EXIT.ok;
}

function readJsonFile(f: string): unknown {
  try {
    return JSON.parse(readFileSync(f, "utf8")) as unknown;
  } catch (e) {
    throw usage(`[cli] cannot read ${f} as JSON (${(e as Error).message.split("\n")[0]})`);
  }
}

/** `abandon <id> --reason --lane l=image…`: ends a needs_operator release as abandoned. */
export async function abandon(
  conn: Connection,
  id: string,
  o: { json: boolean; reason: string; lane?: string[]; actor?: string },
  io: Io,
): Promise<ExitCode> {
  const lanes: Record<string, string> = {};
  for (const pair of o.lane ?? []) {
    const at = pair.indexOf("=");
    if (at <= 0 || at === pair.length - 1) {
      throw usage(
        `[cli] --lane ${JSON.stringify(pair)} must be <lane id>=<image> or <lane id>=none, e.g. --lane lane-a=registry/model@sha256:…`,
      );
    }
    lanes[pair.slice(0, at)] = pair.slice(at + 1);
  }
  const actor = actorName(o.actor);
  const res = await new EngineClient(conn).call<{
    state: string;
    generation: number;
    lanes: Record<string, string>;
  }>(
    "POST",
    `/v1/releases/${releaseId(id)}/abandon`,
    JSON.stringify({ reason: o.reason, lanes, ...(actor ? { actor } : {}) }),
  );
  if (o.json) printJson(io, res);
  else
    print(io, [
      `abandon accepted: ${id} is now ${res.state} (generation ${res.generation}); its lanes are free`,
      ...Object.entries(res.lanes).map(([l, img]) => `  ${l} runs ${img} (as you confirmed)`),
    ]);
  return EXIT.ok;
}

/** `serve`: the Node server (engine/src/main-node.ts), configured from the environment. */
export async function serve(o: { port?: string; host?: string }): Promise<ExitCode> {
  if (o.port !== undefined) {
    const n = Number(o.port);
    if (!Number.isInteger(n) || n < 1 || n > 65535)
      throw usage(`[cli] --port must be 1..65535; got ${JSON.stringify(o.port)}`);
    process.env.PORT = String(n);
  }
  const { startNodeServer } = await import("../main-node.ts");
  let server: Awaited<ReturnType<typeof startNodeServer>>["server"];
  try {
    ({ server } = await startNodeServer({}, o.host));
  } catch (err) {
    if (err instanceof BatonError) throw new CliError(err.message, EXIT.usage, []);
    throw err;
  }
  // Serving is the command's work: it ends when the server closes (SIGTERM or SIGINT; the
  // shutdown then closes the engine and exits), not when it starts listening.
  await new Promise<void>((resolve) => server.once("close", () => resolve()));
  return EXIT.ok;
}

const DEMO = new URL("../demo/main.ts", import.meta.url);

/**
 * `demo`: delegates to engine/src/demo/main.ts (loaded lazily). The module may export
 * `main(args)` (or a default function) resolving to an exit code; otherwise it runs on import.
 */
export async function demo(args: string[]): Promise<ExitCode> {
  if (!existsSync(fileURLToPath(DEMO))) {
    throw new CliError(
      "[cli] the demo is not part of this build (engine/src/demo/main.ts is missing); run `baton serve` and `baton start <recipe>` instead",
    );
  }
  const mod = (await import(DEMO.href)) as { main?: (a: string[]) => unknown; default?: unknown };
  const fn =
    mod.main ??
    (typeof mod.default === "function" ? (mod.default as (a: string[]) => unknown) : undefined);
  const code = fn ? await fn(args) : undefined;
  return code === EXIT.failed || code === EXIT.usage ? code : EXIT.ok;
}
