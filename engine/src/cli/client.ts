/**
 * A small HTTP client of the engine's API (docs/engine.md), for the CLI. Every failure
 * becomes a `CliError` with one clear line: unreachable engine, bad token, refusal (the
 * engine's own message), or an answer that is not the engine's JSON.
 */
import type { Problem } from "../domain/errors.ts";
import { CliError, EXIT, flagWords, problemsByFlag, usage } from "./errors.ts";

/** Default engine URL (the engine's default `PORT`). */
export const DEFAULT_ENGINE_URL = "http://127.0.0.1:8787";
/** Per-request timeout (ms). */
export const REQUEST_TIMEOUT_MS = 30_000;

/** Where the engine is and how to authenticate, from flags or environment. */
export interface Connection {
  engine: string;
  token: string | undefined;
}

/**
 * Resolves `--engine` / `BATON_ENGINE_URL` and `--token` / `BATON_TOKEN`.
 * @throws CliError (usage) when the URL is not http(s).
 */
export function connection(
  flags: { engine?: string; token?: string },
  env: NodeJS.ProcessEnv = process.env,
): Connection {
  const raw = flags.engine ?? env.BATON_ENGINE_URL ?? DEFAULT_ENGINE_URL;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw usage(
      `[cli] --engine must be an http(s) URL such as ${DEFAULT_ENGINE_URL}; got ${JSON.stringify(raw)}`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw usage(
      `[cli] --engine must be an http(s) URL such as ${DEFAULT_ENGINE_URL}; got ${JSON.stringify(raw)}`,
    );
  }
  const token = (flags.token ?? env.BATON_TOKEN)?.trim() || undefined;
  if (token) {
    const bad = tokenProblem(token);
    if (bad) {
      const from = flags.token !== undefined ? "--token" : "BATON_TOKEN";
      throw usage(
        `[cli] ${from} is not a valid HTTP header value: ${bad}; the token is sent in the Authorization header, which carries printable ASCII only; fix: use the engine's token exactly as set (tokens are random ASCII, e.g. made with \`openssl rand -hex 32\`); if the engine's BATON_OPERATOR_TOKEN itself has such a character, give the engine a new ASCII token and use that`,
      );
    }
  }
  return { engine: url.href.replace(/\/+$/, ""), token };
}

/**
 * Why `token` cannot travel in an HTTP header (null when it can): the first character that is
 * not printable ASCII (a letter such as "é", an emoji, a control character), with its
 * position (1-based) and code point.
 */
export function tokenProblem(token: string): string | null {
  let i = 0;
  for (const ch of token) {
    i++;
    const cp = ch.codePointAt(0) ?? 0;
    if (cp < 0x20 || cp > 0x7e) {
      const code = `U+${cp.toString(16).toUpperCase().padStart(4, "0")}`;
      const shown = cp < 0x20 || cp === 0x7f ? "a control character" : `"${ch}"`;
      return `character ${i} is ${shown} (${code}), which is not printable ASCII`;
    }
  }
  return null;
}

interface ErrorBody {
  error?: { code?: string; message?: string; problems?: Problem[] };
}

/** Calls the engine. Methods resolve to the parsed JSON body of a 2xx answer. */
export class EngineClient {
  constructor(readonly conn: Connection) {}

  /**
   * One request. `body` is sent as is with `contentType`.
   * @throws CliError: exit 1 for unreachable engine, 4xx/5xx answers (engine message kept).
   */
  async call<T>(
    method: string,
    path: string,
    body?: string,
    contentType = "application/json",
  ): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.conn.token) headers.authorization = `Bearer ${this.conn.token}`;
    if (body !== undefined) headers["content-type"] = contentType;
    let res: Response;
    try {
      res = await fetch(`${this.conn.engine}${path}`, {
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      const why =
        e.name === "TimeoutError"
          ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`
          : (e.cause?.code ?? e.cause?.message ?? e.message);
      throw new CliError(
        `[cli] cannot reach the engine at ${this.conn.engine} (${why}); start it with \`baton serve\` or point --engine / BATON_ENGINE_URL at it`,
      );
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text === "" ? {} : JSON.parse(text);
    } catch {
      throw new CliError(
        `[cli] ${this.conn.engine} answered ${res.status} with something that is not the engine's JSON; is --engine the engine's URL?`,
      );
    }
    if (res.ok) return json as T;
    const err = (json as ErrorBody).error;
    // The engine names body fields (`body.by`); the person typed flags (`--by`).
    let message = err?.message ? flagWords(err.message) : `[cli] the engine answered ${res.status}`;
    if (res.status === 401) {
      message += this.conn.token
        ? "; the token given was refused: check --token / BATON_TOKEN"
        : "; pass --token <token> or set BATON_TOKEN";
    }
    if (res.status === 403) message += "; pass the operator token with --token or BATON_TOKEN";
    throw new CliError(message, EXIT.failed, problemsByFlag(err?.problems ?? []), err?.code);
  }
}
