/** The action's inputs (action.yml), parsed once. Secrets are masked as soon as they are read. */
import * as core from "@actions/core";

export interface Inputs {
  /** Engine base URL without a trailing slash, e.g. `https://baton.example.org`. */
  engineUrl: string;
  engineOrigin: string;
  /** HMAC secret; empty when the engine takes the OIDC credential alone. */
  callbackSecret: string;
  /** Audience of the GitHub OIDC token sent with each request (input oidc-audience); null: none. */
  oidcAudience: string | null;
  /** Raw key text as pasted (normalised later, when provisioned). */
  sshKey: string;
  sshPassphrase: string;
  /** Allowlist file path relative to the workspace (or absolute). */
  allowlist: string;
}

/** The credential of preflight and callback requests (engine-client.ts). */
export function credentialOf(i: Inputs): { secret: string; oidcAudience: string | null } {
  return { secret: i.callbackSecret, oidcAudience: i.oidcAudience };
}

/**
 * Values redacted from every callback's log, the main step's and the post step's: the inputs'
 * secrets and each line of the key (a tool that prints its key file must not send it).
 */
export function secretsOf(i: Inputs): string[] {
  const lines = i.sshKey
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length >= 8 && !l.startsWith("-----"));
  return [i.callbackSecret, i.sshPassphrase, ...lines].filter(Boolean);
}

/** Reads the inputs. Throws `Error("[action] …")` naming the input and the fix. */
export function readInputs(): Inputs {
  const engineRaw = core.getInput("engine-url").trim();
  const callbackSecret = core.getInput("callback-secret");
  if (callbackSecret) core.setSecret(callbackSecret);
  const sshPassphrase = core.getInput("ssh-passphrase");
  if (sshPassphrase) core.setSecret(sshPassphrase);
  let url: URL;
  try {
    url = new URL(engineRaw);
  } catch {
    throw new Error(
      `[action] input engine-url '${engineRaw}' is not a URL; set it to the engine's base URL, e.g. https://baton.example.org`,
    );
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new Error("[action] input engine-url must be an http(s) URL");
  }
  const oidcAudience = core.getInput("oidc-audience").trim() || null;
  if (!callbackSecret && !oidcAudience)
    throw new Error(
      "[action] inputs callback-secret and oidc-audience are both empty; pass the secret shared with the engine (BATON_CALLBACK_SECRETS), or set oidc-audience (the engine's BATON_OIDC_AUDIENCE) with `permissions: id-token: write`",
    );
  return {
    engineUrl: `${url.origin}${url.pathname.replace(/\/+$/, "")}`,
    engineOrigin: url.origin,
    callbackSecret,
    oidcAudience,
    sshKey: core.getInput("ssh-key"),
    sshPassphrase,
    allowlist: core.getInput("allowlist").trim() || "scripts/release/allowlist.json",
  };
}
