/**
 * Incidents and the releases they affect (docs/incidents.md "Notices and records"), on both
 * stores: declaring and resolving an incident sends one `incident` notice per named model (on
 * its newest release, through the outbox), and names the incident in the record of each of its
 * models' releases that was open then.
 */
import { afterEach, expect, it } from "vitest";
import { NOTICE_KINDS, type Notice } from "../../engine/src/domain/notifications.ts";
import type { Notifier } from "../../engine/src/ports/notifier.ts";
import { createRelease, type Harness, makeHarness, op } from "./service-harness.ts";
import { describeEachStore } from "./store-suites.ts";

const MODEL = "summarizer-v7";

/** A notifier that keeps what it is given. */
function capture(): Notifier & { sent: { notice: Notice; delivery: string }[] } {
  const sent: { notice: Notice; delivery: string }[] = [];
  return {
    channel: "webhook",
    sent,
    async send(notice, delivery) {
      sent.push({ notice, delivery });
      return { ok: true, status: 204 };
    },
  };
}

const notify = {
  webhook: null,
  slack: null,
  github: false,
  events: [...NOTICE_KINDS],
  retryBaseMs: 1_000,
  maxTries: 3,
};

interface IncidentRecord {
  incidents?: {
    id: string;
    severity: string;
    summary: string;
    commander: string;
    declared_at: number | null;
    resolved_at: number | null;
    resolution: string | null;
  }[];
}

async function settle(h: Harness): Promise<void> {
  for (let i = 0; i < 5; i++) await h.engine.tick();
}

describeEachStore("incident notices and records on %s", ({ kind, skip }) => {
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it.skipIf(skip)(
    "a declare and a resolve each send one notice and name the incident in the affected release's record",
    async () => {
      const n = capture();
      h = await makeHarness({ kind, notifiers: [n], config: { notify } });
      const id = await createRelease(h);
      await settle(h);
      const before = n.sent.length;
      const dec = await op(h, "POST", "/v1/incidents", {
        severity: "sev2",
        summary: "summaries truncated",
        models: [MODEL, "no-such-model"],
        commander: "maria",
        actor: "maria",
      });
      expect(dec.status, await dec.clone().text()).toBe(201);
      await settle(h);
      const declared = n.sent.slice(before).filter((s) => s.notice.kind === "incident");
      expect(declared).toHaveLength(1);
      expect(declared[0]?.notice).toMatchObject({ release_id: id, model: MODEL });
      expect(declared[0]?.notice.summary).toContain(
        "incident inc1 (sev2) declared by operator:maria: summaries truncated; commander maria",
      );

      h.clock.advance(60_000);
      const res = await op(h, "POST", "/v1/incidents/inc1/resolve", {
        summary: "tokenizer fixed",
        actor: "maria",
      });
      expect(res.status, await res.clone().text()).toBe(200);
      await settle(h);
      const all = n.sent.filter((s) => s.notice.kind === "incident");
      expect(all).toHaveLength(2);
      expect(all[1]?.notice.summary).toContain(
        "incident inc1 (sev2) resolved by operator:maria: tokenizer fixed",
      );
      expect(new Set(all.map((s) => s.delivery)).size).toBe(2);

      const rec = (await (
        await op(h, "GET", `/v1/releases/${id}/record`)
      ).json()) as IncidentRecord;
      expect(rec.incidents).toEqual([
        {
          id: "inc1",
          severity: "sev2",
          summary: "summaries truncated",
          commander: "maria",
          declared_at: h.clock.now() - 60_000,
          resolved_at: h.clock.now(),
          resolution: "tokenizer fixed",
        },
      ]);
      // The incident's timeline shows the declaration once (its own event), not again per release.
      const tl = (await (await op(h, "GET", "/v1/incidents/inc1")).json()) as {
        timeline: { kind: string }[];
      };
      expect(tl.timeline.filter((e) => e.kind === "declared")).toHaveLength(1);
      expect(tl.timeline.some((e) => e.kind === "incident_declared")).toBe(false);
    },
  );

  it.skipIf(skip)(
    "a release started while an incident is open names it in its record",
    async () => {
      h = await makeHarness({ kind });
      const declaredAt = h.clock.now();
      const dec = await op(h, "POST", "/v1/incidents", {
        severity: "sev3",
        summary: "latency up",
        models: [MODEL],
        commander: "lee",
        actor: "lee",
      });
      expect(dec.status).toBe(201);
      h.clock.advance(5_000);
      const id = await createRelease(h);
      const rec = (await (
        await op(h, "GET", `/v1/releases/${id}/record`)
      ).json()) as IncidentRecord;
      expect(rec.incidents).toEqual([
        {
          id: "inc1",
          severity: "sev3",
          summary: "latency up",
          commander: "lee",
          declared_at: declaredAt,
          resolved_at: null,
          resolution: null,
        },
      ]);
    },
  );
});
