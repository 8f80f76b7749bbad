/**
 * Nothing a notice says is lost across an engine kill -9 (docs/engine.md "Notifications"):
 * the engine runs as its own process (test/support/chaos-process.ts) on SQLite or Postgres, a
 * fault point SIGKILLs it (a) after the notice's commit, before the POST and (b) after the POST,
 * before the outbox row is completed; the engine restarts on the same store and the loopback
 * receiver gets the notice: exactly once in (a), and in (b) again with the same delivery id
 * (delivery is at least once; receivers deduplicate on `x-baton-delivery`).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { startEmbeddedControlPlane } from "../../engine/src/control-plane/embedded.ts";
import { verifyBody } from "../../engine/src/protocol/credential.ts";
import { recipe, STORE_KINDS, skipStore } from "../integration/service-harness.ts";
import {
  type EngineProcess,
  spawnEngine,
  spawnEngineOnFreshPort,
} from "../support/chaos-process.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.ts";

const SECRET = "callback-secret-0123456789abcdef";
const OPERATOR = "operator-token-0123456789abcdef";
const HOOK_SECRET = "hook-secret-0123456789abcdef";
const PG = process.env.BATON_TEST_DATABASE_URL;

async function freshDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const base = PG as string;
  const name = `baton_notify_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`).finally(() => admin.end());
  const u = new URL(base);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => c.end());
    },
  };
}

describe.each(STORE_KINDS)("notices across kill -9 on %s", (kind) => {
  const skip = skipStore(kind);
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
  });

  async function world() {
    const dir = mkdtempSync(join(tmpdir(), "baton-notify-crash-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const rx: WebhookReceiver = await startWebhookReceiver();
    cleanups.push(() => rx.close());
    let databaseUrl: string | null = null;
    if (kind === "postgres") {
      const db = await freshDatabase();
      cleanups.push(() => db.drop());
      databaseUrl = db.url;
    }
    // The engine's port: proposed at its first start, kept across its restarts.
    let port = 0;
    // Nothing in this test dispatches or writes to a control plane; the start only reads the
    // lanes (the observed baseline), so a control plane serving them runs beside the engine.
    // GitHub is never called: an address where nothing listens (the discard port).
    const closed = "http://127.0.0.1:9";
    const { handle: cp } = await startEmbeddedControlPlane({ dataDir: ":memory:" });
    cleanups.push(() => cp.close());
    cp.core.seed(
      (recipe(2).lanes ?? []).map((l) => ({ id: l.id, model: "summarizer-v7", weight: 50 })),
    );
    const env = (fault?: string): Record<string, string> => ({
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : { BATON_DATA_DIR: dir }),
      BATON_CALLBACK_SECRETS: SECRET,
      BATON_OPERATOR_TOKEN: OPERATOR,
      // Unsigned test recipes: admission is off for this engine (docs/trust.md).
      BATON_ADMISSION: "off",
      BATON_CONTROL_PLANE_URL: cp.url,
      BATON_CONTROL_PLANE_TOKEN: cp.writeToken,
      GITHUB_REPOSITORY: "acme/models",
      GITHUB_TOKEN: "ghs_0123456789abcdef",
      CHAOS_GITHUB_API_URL: closed,
      CHAOS_LEASE_MS: "1000",
      BATON_TICK_MS: "100",
      BATON_EXCLUSIVE_LANES: "off",
      BATON_NOTIFY_WEBHOOK_URL: rx.url,
      BATON_NOTIFY_WEBHOOK_SECRET: HOOK_SECRET,
      BATON_NOTIFY_RETRY_MS: "100",
      ...(fault ? { BATON_FAULT: fault } : {}),
    });
    let proc: EngineProcess | null = null;
    cleanups.push(async () => proc?.kill());
    const start = async (fault?: string) => {
      if (port === 0) {
        proc = await spawnEngineOnFreshPort(env(fault));
        port = Number(new URL(proc.url).port);
      } else {
        proc = await spawnEngine(port, env(fault));
      }
      return proc;
    };
    const call = async (path: string, body: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as { id?: string } };
    };
    return { rx, start, call };
  }

  /**
   * Starts an engine with `fault` set, creates a release and aborts it: the abort commits the
   * notice, the reconciler claims it and the fault point SIGKILLs the engine (within 20 s).
   * Returns the release id.
   */
  async function abortUntilKilled(w: Awaited<ReturnType<typeof world>>, fault: string) {
    const p1 = await w.start(fault);
    const made = await w.call("/v1/releases?start=false", recipe(2));
    expect(made.status).toBe(201);
    const id = made.body.id as string;
    await w.call(`/v1/releases/${id}/abort`, { reason: "wrong image" }).catch(() => null);
    const ended = await Promise.race([
      p1.exited,
      new Promise<null>((r) => setTimeout(() => r(null), 20_000)),
    ]);
    expect(ended?.signal).toBe("SIGKILL");
    return id;
  }

  it.skipIf(skip)(
    "killed after the commit, before the POST: the restarted engine sends it once",
    async () => {
      const w = await world();
      const id = await abortUntilKilled(w, "after_commit_before_effect@effect=notify");
      expect(w.rx.received).toHaveLength(0);

      await w.start();
      await w.rx.waitFor(1);
      // Bounded wait for a second (wrong) delivery: none may come.
      await new Promise((r) => setTimeout(r, 1_500));
      expect(w.rx.received).toHaveLength(1);
      const r = w.rx.received[0]!;
      const notice = JSON.parse(r.raw.toString()) as { kind: string; release_id: string };
      expect(notice).toMatchObject({ kind: "aborted", release_id: id });
      const sig = verifyBody(
        [HOOK_SECRET],
        r.raw,
        r.headers["x-baton-signature"] as string,
        r.headers["x-baton-timestamp"] as string,
      );
      expect(sig.ok).toBe(true);
    },
    90_000,
  );

  it.skipIf(skip)(
    "killed after the POST, before completion: sent again with the same delivery id",
    async () => {
      const w = await world();
      const id = await abortUntilKilled(w, "after_effect_before_outcome@effect=notify");
      expect(w.rx.received).toHaveLength(1);

      await w.start();
      await w.rx.waitFor(2);
      await new Promise((r) => setTimeout(r, 1_500));
      const ids = w.rx.received.map((r) => r.headers["x-baton-delivery"]);
      expect(ids).toHaveLength(2);
      expect(ids[0]).toBe(ids[1]);
      expect(String(ids[0])).toMatch(new RegExp(`^${id}\\.[0-9a-f]+\\.v\\d+\\.aborted\\.webhook$`));
    },
    90_000,
  );
});
