/**
 * The HTTP dependency probe: a GET of the recipe's probe URL (https, or http to the engine's own
 * machine, as the recipe schema allows), no redirects followed, bounded in time and size; the
 * revision is read from the answer by `revisionFromAnswer` (the trimmed text, or a JSON field).
 * Uses the platform's `fetch`, so it runs on Node, Workers and Lambda alike.
 */
import { type DependencyProbeSpec, revisionFromAnswer } from "../../domain/mutable-dependencies.ts";
import type { DependencyProbe, ProbeAnswer } from "../../ports/dependency-probe.ts";

/** Largest probe answer read (bytes); a longer one is an error, not a revision. */
export const PROBE_MAX_BYTES = 64 * 1024;

export interface HttpDependencyProbeOptions {
  /** Per probe, ms (default 5000). */
  timeoutMs?: number;
  /** The fetch to use (tests); default the global one. */
  fetch?: typeof fetch;
}

export class HttpDependencyProbe implements DependencyProbe {
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(o: HttpDependencyProbeOptions = {}) {
    this.timeoutMs = o.timeoutMs ?? 5000;
    this.fetch = o.fetch ?? ((input, init) => fetch(input, init));
  }

  async revision(spec: DependencyProbeSpec, signal?: AbortSignal): Promise<ProbeAnswer> {
    const limit = AbortSignal.timeout(this.timeoutMs);
    const all = signal ? AbortSignal.any([signal, limit]) : limit;
    try {
      const res = await this.fetch(spec.url, {
        method: "GET",
        redirect: "manual",
        headers: { accept: spec.field ? "application/json" : "text/plain, */*" },
        signal: all,
      });
      if (res.status < 200 || res.status > 299) {
        await res.body?.cancel().catch(() => {});
        return { ok: false, message: `the probe answered HTTP ${res.status}` };
      }
      const body = await readBounded(res);
      if (body === null)
        return { ok: false, message: `the probe's answer is larger than ${PROBE_MAX_BYTES} bytes` };
      return revisionFromAnswer(body, spec.field);
    } catch (err) {
      if (limit.aborted) return { ok: false, message: `no answer within ${this.timeoutMs} ms` };
      return { ok: false, message: `the probe could not be read: ${(err as Error).message}` };
    }
  }
}

/** The body as text, or null past `PROBE_MAX_BYTES` (the read is cancelled there). */
async function readBounded(res: Response): Promise<string | null> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > PROBE_MAX_BYTES) {
      await reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  const all = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}
