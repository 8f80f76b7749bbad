/**
 * Credential revocation (docs/recovery-actions.md "Revoke a credential"): an audited verb that
 * runs the allowlisted tool a model's recipe names for a credential reference, through the
 * runner protocol — dispatched like a release's runner step (same payload shape, same tool
 * allowlist on the runner), preflighted and called back with the same runner credential, at
 * `/v1/releases/step-runs/rv<N>/…`. The revocation's own recovery verification is the tool's
 * check that the old credential is refused (domain/credentials.ts `judge`). The book is one
 * engine-state document (`credential_revocations`) changed with the store's compare-and-set;
 * each revocation goes into the timeline of every open incident that names the model, when it
 * is dispatched and when its result is judged.
 */
import {
  declaringRelease,
  judge,
  type Revocation,
  type RevocationBook,
  type RevocationMode,
  revocationArgs,
  revocationBookOf,
  revocationKey,
  revocationLine,
} from "../../domain/credential-revocation.ts";
import { BatonError } from "../../domain/errors.ts";
import type { Release } from "../../domain/types.ts";
import type { Clock } from "../../ports/clock.ts";
import type { Dispatcher } from "../../ports/dispatcher.ts";
import type { Store } from "../../ports/store.ts";
import type { CallbackBody, PreflightRequest } from "../../protocol/messages.ts";
import { DispatchPayload } from "../../protocol/messages.ts";
import { payloadDigest } from "../../protocol/payload-digest.ts";
import { capLogTail } from "../log-tail.ts";
import { callbackUrl } from "../payload.ts";
import { StateDocument } from "../state-document.ts";
import type { Incidents } from "./incidents.ts";

const STATE = "credential_revocations";
/** Releases looked through (newest first) for the one that lists a reference. */
const SCAN = 200;
/** Releases of the model read at most while looking. */
const READS = 20;
/** Longest log tail kept with a revocation (bytes of UTF-8). */
const LOG_TAIL = 16_384;

/** A runner message the engine refused (answered with its status, nothing changed). */
export interface RunRefusal {
  ok: false;
  status: 404 | 409;
  code: string;
  reason: string;
}

/** A runner message accepted; `changed` false when it repeated one already applied. */
export interface RunAccepted {
  ok: true;
  changed: boolean;
  revocation: Revocation;
}

const refuse = (status: 404 | 409, code: string, reason: string): RunRefusal => ({
  ok: false,
  status,
  code,
  reason,
});

export class CredentialRevocations {
  private readonly doc: StateDocument<RevocationBook>;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly dispatcher: Dispatcher | null,
    private readonly publicUrl: string,
    private readonly incidents: Incidents,
  ) {
    this.doc = new StateDocument(store, clock, STATE, revocationBookOf, "credential revocations");
  }

  /** Every revocation, newest first; of one model when `model` is given. */
  async list(model?: string): Promise<Revocation[]> {
    const all = [...(await this.doc.read()).doc.revocations].reverse();
    return model === undefined ? all : all.filter((r) => r.model === model);
  }

  /** The model's releases, newest first (at most `READS` read). */
  private async releasesOf(model: string): Promise<Release[]> {
    const ids = (await this.store.listReleases({ limit: SCAN }))
      .filter((s) => s.model === model)
      .slice(0, READS)
      .map((s) => s.id);
    const out: Release[] = [];
    for (const id of ids) {
      const r = await this.store.getRelease(id);
      if (r) out.push(r);
    }
    return out;
  }

  /**
   * Revokes (or rotates) credential `ref` of `model`: finds the newest release of the model
   * whose manifest lists it, and dispatches that entry's `revoke_tool` with the reference (never
   * a value). Answers the revocation as dispatched (or `dispatch_failed`); its result arrives by
   * callback.
   * @throws BatonError 404 (no release of the model lists `ref`), 503 (no dispatcher).
   */
  async revoke(
    model: string,
    ref: string,
    mode: RevocationMode,
    reason: string,
    actor: string,
  ): Promise<Revocation> {
    if (!this.dispatcher)
      throw new BatonError(
        "unavailable",
        "[engine] no dispatcher is configured, so no runner tool can run; nothing was revoked",
      );
    const { release, credential } = declaringRelease(model, ref, await this.releasesOf(model));
    const started = await this.doc.change((book, now) => {
      const id = `rv${book.last + 1}`;
      const r: Revocation = {
        id,
        model,
        ref,
        mode,
        tool: credential.revoke_tool,
        release: release.id,
        manifest_digest: release.manifest_digest,
        operation_key: revocationKey(id, mode, ref),
        actor,
        reason,
        at: now,
        finished_at: null,
        state: "dispatched",
        dispatch: "sending",
        run: null,
        result: null,
        verified: false,
        verification: "not verified: no result from the runner yet",
        incidents: [],
      };
      return { doc: { last: book.last + 1, revocations: [...book.revocations, r] }, out: r };
    });
    const payload = DispatchPayload.parse({
      v: 1,
      step_run_id: started.id,
      tool: started.tool,
      args: revocationArgs(started),
      callback_url: callbackUrl(this.publicUrl, started.id),
      release: {
        id: started.id,
        generation: 1,
        manifest_digest: started.manifest_digest,
        dispatch: 1,
        operation_key: started.operation_key,
      },
    });
    let outcome: { ok: boolean; message: string };
    try {
      const r = await this.dispatcher.dispatch(payload);
      outcome = r.ok
        ? { ok: true, message: "accepted" }
        : { ok: false, message: r.status ? `HTTP ${r.status}: ${r.message}` : r.message };
    } catch (err) {
      outcome = { ok: false, message: `the dispatcher threw: ${(err as Error).message}` };
    }
    const dispatched = await this.update(started.id, (r, now) => {
      const failed = !outcome.ok && r.state === "dispatched";
      return {
        ...r,
        dispatch: outcome.message,
        ...(failed
          ? {
              state: "dispatch_failed" as const,
              finished_at: now,
              verification: `not verified: the dispatch failed (${outcome.message}); nothing ran: revoke again`,
            }
          : {}),
      };
    });
    return this.toIncidents(dispatched);
  }

  /** Writes the revocation's line to the model's open incidents and keeps their ids on it. */
  private async toIncidents(r: Revocation): Promise<Revocation> {
    const ids = await this.incidents.recordRecovery(r.model, revocationLine(r), r.actor);
    if (ids.every((i) => r.incidents.includes(i))) return r;
    return this.update(r.id, (cur) => ({
      ...cur,
      incidents: [...new Set([...cur.incidents, ...ids])],
    }));
  }

  private update(id: string, f: (r: Revocation, now: number) => Revocation): Promise<Revocation> {
    return this.doc.change((book, now) => {
      const cur = book.revocations.find((r) => r.id === id);
      if (!cur) throw new BatonError("not_found", `[engine] recovery run ${id} does not exist`);
      const next = f(cur, now);
      return {
        doc: { ...book, revocations: book.revocations.map((r) => (r.id === id ? next : r)) },
        out: next,
      };
    });
  }

  /**
   * A runner asks whether it may run recovery run `id`. The first run to ask is bound; the
   * same run and attempt asking again gets the same answer; a re-run (a higher attempt of the
   * bound run) moves the attempt on; any other run, an older attempt, work that is not what
   * was dispatched (tool, manifest digest, payload digest) or a finished run is refused (409).
   */
  async preflight(id: string, req: PreflightRequest): Promise<RunAccepted | RunRefusal> {
    const r = (await this.doc.read()).doc.revocations.find((x) => x.id === id);
    if (!r) return refuse(404, "not_found", `[engine] recovery run ${id} does not exist`);
    const digest = payloadDigest({
      tool: r.tool,
      args: revocationArgs(r),
      operation_key: r.operation_key,
    });
    const stale =
      req.release_id !== r.id
        ? `the request names ${req.release_id}, not ${r.id}`
        : req.tool !== r.tool
          ? `tool ${req.tool} is not ${r.tool}, the tool dispatched`
          : req.manifest_digest !== r.manifest_digest
            ? "the manifest digest is not the one dispatched"
            : req.payload_digest !== digest
              ? "the payload digest does not match the work dispatched"
              : null;
    if (stale) return refuse(409, "stale", `[engine] preflight of ${id} refused: ${stale}`);
    if (r.state === "dispatch_failed" || r.state === "done")
      return refuse(
        409,
        "finished",
        `[engine] recovery run ${id} is ${r.state === "done" ? "finished" : "not dispatched (its dispatch failed)"}; nothing to run`,
      );
    const b = r.run;
    if (b && b.run_id !== req.run_id)
      return refuse(
        409,
        "duplicate",
        `[engine] recovery run ${id} is bound to run ${b.run_id}; run ${req.run_id} is a duplicate delivery`,
      );
    if (b && req.run_attempt < b.run_attempt)
      return refuse(
        409,
        "fenced",
        `[engine] attempt ${req.run_attempt} of run ${req.run_id} is fenced out by attempt ${b.run_attempt}`,
      );
    if (b && req.run_attempt === b.run_attempt) return { ok: true, changed: false, revocation: r };
    const next = await this.update(id, (cur, now) => ({
      ...cur,
      state: "running",
      run: { run_id: req.run_id, run_attempt: req.run_attempt, sha: req.sha, preflight_at: now },
    }));
    return { ok: true, changed: true, revocation: next };
  }

  /**
   * The runner's result for recovery run `id`, from the bound run and attempt: judged (the
   * tool's `old_credential_refused` check) and recorded with its checks and log tail, then
   * written to the model's open incidents. The same result again is a replay (nothing changes).
   */
  async callback(id: string, body: CallbackBody): Promise<RunAccepted | RunRefusal> {
    const r = (await this.doc.read()).doc.revocations.find((x) => x.id === id);
    if (!r) return refuse(404, "not_found", `[engine] recovery run ${id} does not exist`);
    const b = r.run;
    if (!b)
      return refuse(409, "no_preflight", `[engine] recovery run ${id} had no accepted preflight`);
    if (b.run_id !== body.run_id || b.run_attempt !== body.run_attempt)
      return refuse(
        409,
        "fenced",
        `[engine] recovery run ${id} is bound to run ${b.run_id} attempt ${b.run_attempt}; the result of run ${body.run_id} attempt ${body.run_attempt} is not taken`,
      );
    if (r.state === "done") return { ok: true, changed: false, revocation: r };
    const verdict = judge(r, body.overall, body.status, body.checks);
    const received = this.clock.now();
    const done = await this.update(id, (cur, now) =>
      cur.state === "done"
        ? cur
        : {
            ...cur,
            state: "done",
            finished_at: now,
            result: {
              run_id: body.run_id,
              run_attempt: body.run_attempt,
              status: body.status,
              overall: body.overall,
              checks: body.checks ?? null,
              log: capLogTail(body.log, LOG_TAIL).log,
              received_at: received,
            },
            ...verdict,
          },
    );
    return { ok: true, changed: true, revocation: await this.toIncidents(done) };
  }
}
