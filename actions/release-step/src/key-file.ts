/**
 * Phase 5: the SSH key on disk. Written to a fresh 0700 directory under RUNNER_TEMP as a 0600
 * file, normalised (F10), every line masked; encrypted keys without a passphrase are detected
 * here, before any connection (F09a). The directory is removed by the main step after the tool
 * and again by the post step, whichever runs.
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as core from "@actions/core";
import { inspectKey, normaliseKey } from "../../../scripts/lib/key.ts";

/** Masks every non-empty line of the key (the runner then hides them from the log). */
export function maskKey(raw: string): void {
  for (const line of raw.replace(/\r\n?/g, "\n").split("\n")) {
    const t = line.trim();
    if (t) core.setSecret(t);
  }
}

const live = new Set<string>();

/**
 * Creates the key directory (call saveState with it before writing the key). It is also
 * removed when this process exits for any reason it can observe (normal end, uncaught error,
 * process.exit), so an action orphaned by a dead runner or engine never leaves the key behind;
 * only SIGKILL escapes this, and the post step removes the directory then.
 */
export function makeKeyDir(runnerTemp: string): string {
  const dir = mkdtempSync(join(runnerTemp, "baton-key-"));
  if (live.size === 0)
    process.once("exit", () => {
      for (const d of [...live]) removeKeyDir(d);
    });
  live.add(dir);
  return dir;
}

/** Outcome of provisioning. `problem` carries a failure class and message when unusable. */
export type Provisioned =
  | { ok: true; keyPath: string }
  | { ok: false; errorClass: "key_encrypted_no_passphrase" | "key_invalid"; message: string };

/** Writes the key file (mode 0600) into `dir`. */
export function provisionKey(dir: string, raw: string, passphrase: string): Provisioned {
  let key: string;
  try {
    key = normaliseKey(raw);
  } catch (e) {
    return { ok: false, errorClass: "key_invalid", message: (e as Error).message };
  }
  const info = inspectKey(key);
  if (info.format === "unknown") {
    return {
      ok: false,
      errorClass: "key_invalid",
      message: "[action] input ssh-key is not an OpenSSH or PEM private key",
    };
  }
  if (info.encrypted && !passphrase) {
    return {
      ok: false,
      errorClass: "key_encrypted_no_passphrase",
      message:
        "[action] the SSH key is encrypted but input ssh-passphrase is empty; add the passphrase secret or use an unencrypted deploy key. Nothing was connected.",
    };
  }
  const keyPath = join(dir, "id");
  writeFileSync(keyPath, key, { mode: 0o600 });
  return { ok: true, keyPath };
}

/** Removes the key directory; never throws. Returns whether something was removed. */
export function removeKeyDir(dir: string | undefined): boolean {
  if (!dir) return false;
  live.delete(dir);
  try {
    rmSync(dir, { recursive: true, force: true });
    return true;
  } catch {
    return false;
  }
}
