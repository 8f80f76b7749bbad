/**
 * How each operator verb (domain/verbs.ts) reaches the service: one call per verb, shared by
 * the API routes and the dashboard's forms, so both take a verb the same way.
 */
import type { VerbName } from "../domain/verbs.ts";
import type { Accepted, Refusal, ReleaseApi } from "../service/api.ts";

/** The parsed body of a verb (its schema's output, or what a dashboard form gave). */
export type VerbBody = Record<string, unknown>;

const text = (v: unknown) => (typeof v === "string" ? v : "");

/**
 * Per verb: the service call for `target` (a release or step run id) by `actor` (as history
 * records it, e.g. `operator:maria`) with `body`.
 */
export const VERB_CALLS: {
  readonly [K in VerbName]: (
    api: ReleaseApi,
    target: string,
    actor: string,
    body: VerbBody,
  ) => Promise<Accepted | Refusal>;
} = {
  abort: (api, id, actor, b) => api.abort(id, actor, text(b.reason)),
  resume: (api, id, actor, b) => api.resume(id, actor, text(b.reason)),
  pause: (api, id, actor, b) => api.pause(id, actor, text(b.reason)),
  release: (api, id, actor, b) => api.release(id, actor, text(b.reason)),
  promote: (api, id, actor, b) => api.promote(id, actor, text(b.reason)),
  retry: (api, id, actor, b) => api.retry(id, actor, text(b.reason)),
  resolve: (api, id, actor, b) => api.resolve(id, actor, text(b.reason)),
  abandon: (api, id, actor, b) =>
    api.abandon(id, actor, text(b.reason), (b.lanes ?? {}) as Record<string, string>),
  confirm_restore: (api, id, actor, b) => api.confirmRestore(id, actor, text(b.reason)),
  restore_state: (api, id, actor, b) =>
    api.restoreState(id, actor, text(b.reason), b.point ? text(b.point) : undefined),
  verify: (api, id, actor, b) => api.verify(id, actor, text(b.reason)),
  rollback: (api, id, actor, b) => api.rollback(id, actor, text(b.reason)),
  roll_forward: (api, id, actor, b) =>
    api.rollForward(id, b.recipe, actor, {
      ...(b.bundle !== undefined ? { bundle: b.bundle } : {}),
      attestations: (b.attestations ?? []) as unknown[],
    }),
  accept: (api, id, _actor, b) =>
    api.accept(id, text(b.by), {
      ...(b.expires_at ? { expires_at: Date.parse(text(b.expires_at)) } : {}),
      ...(b.note ? { note: text(b.note) } : {}),
      ...(b.record_digest ? { record_digest: text(b.record_digest) } : {}),
    }),
};
