/**
 * The owner's acceptance of a closed release's final state (docs/record.md "Acceptance"): an
 * audited history entry naming who, when, until when, and the record digest accepted, written
 * through the kernel's conditional `annotate`.
 */
import { acceptedActionsPhrase } from "../../domain/lifecycle.ts";
import { acceptanceEntry } from "../../domain/release-history.ts";
import type { Accepted, Refusal } from "../api.ts";
import type { Annotation, ApplyKernel } from "../kernel.ts";
import type { ReleaseQueries } from "./queries.ts";

/** One day, ms (the example expiry of an acceptance). */
const DAY_MS = 24 * 60 * 60 * 1000;

/** What an acceptance may carry: an expiry (epoch ms), a note, the record digest read. */
export interface AcceptOptions {
  expires_at?: number | null;
  note?: string;
  record_digest?: string;
}

export class Acceptance {
  constructor(
    private readonly kernel: ApplyKernel,
    private readonly queries: ReleaseQueries,
  ) {}

  /**
   * The owner accepts a closed release's final state. Refused (409) while the release is open,
   * when `record_digest` is given and is not the record's digest, and (409 `already_accepted`)
   * while an earlier acceptance stands: one without expiry is final, one with an expiry can be
   * replaced once it has passed (history keeps both). Decided on a fresh read and committed
   * with the release's `resource_version` raised by one (nothing else of the release changes,
   * so its `updated_at` and record digest stay): of two engines accepting at once exactly one
   * commit lands; the other reloads and is refused `already_accepted` naming the winner.
   * @throws BatonError `not_found` / `bad_request` as `get`; `conflict` when every reload lost.
   */
  accept(id: string, by: string, o: AcceptOptions = {}): Promise<Accepted | Refusal> {
    return this.kernel.annotate(id, "accept", () => this.decide(id, by, o));
  }

  private async decide(id: string, by: string, o: AcceptOptions): Promise<Annotation | Refusal> {
    const read = await this.queries.get(id);
    const { release } = read;
    const rec = await this.queries.recordOf(read);
    if (!rec.release.closed || !rec.digest) {
      return {
        ok: false,
        status: 409,
        code: "not_closed",
        reason: `[engine] release ${id} is ${release.state}; only a closed release (succeeded, rolled_back, aborted, abandoned) can be accepted. It accepts: ${acceptedActionsPhrase(release)}`,
      };
    }
    if (o.record_digest && o.record_digest !== rec.digest) {
      return {
        ok: false,
        status: 409,
        code: "record_changed",
        reason: `[engine] release ${id}'s record digest is ${rec.digest}, not ${o.record_digest}; read the record again (baton record ${id}) and accept what it says`,
      };
    }
    const now = this.kernel.clock.now();
    const prior = rec.acceptance;
    if (prior && (prior.expires_at === null || prior.expires_at > now)) {
      const when = new Date(prior.at).toISOString();
      const way =
        prior.expires_at === null
          ? "without expiry; an acceptance without expiry is final, and the release record keeps it"
          : `until ${new Date(prior.expires_at).toISOString()}; a new acceptance is allowed once it has expired (it then replaces it, and the history keeps both)`;
      return {
        ok: false,
        status: 409,
        code: "already_accepted",
        reason: `[engine] release ${id} was already accepted by ${prior.by} at ${when} ${way}`,
      };
    }
    if (o.expires_at != null && o.expires_at <= now) {
      const message = `${new Date(o.expires_at).toISOString()} is in the past (the engine's clock reads ${new Date(now).toISOString()}); an acceptance cannot have expired already`;
      return {
        ok: false,
        status: 422,
        code: "bad_expiry",
        reason: `[engine] body.expires_at ${message}`,
        problems: [
          {
            path: "body.expires_at",
            message,
            fix: `give a time after now, e.g. ${new Date(now + 30 * DAY_MS).toISOString().replace(/\.\d{3}Z$/, "Z")} (30 days on), or leave body.expires_at out for an acceptance that does not expire`,
          },
        ],
      };
    }
    const entry = acceptanceEntry(release, {
      by,
      digest: rec.digest,
      expires_at: o.expires_at ?? null,
      note: o.note ?? "",
      now,
    });
    return { release, history: [entry], reply: { record_digest: rec.digest }, now };
  }
}
