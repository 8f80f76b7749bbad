/**
 * The store contract on SQLite (a WAL file in a temp dir, so a second store can open the
 * same database), plus what only the SQLite path and the store factory do.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { sqliteMigrations } from "../../engine/src/adapters/sqlite/migrations.ts";
import { openSqliteStore, SqliteStore } from "../../engine/src/adapters/sqlite/sqlite-store.ts";
import { openStore } from "../../engine/src/adapters/store-factory.ts";
import type { Store } from "../../engine/src/ports/store.ts";
import { makeRelease, storeContract } from "../contract/store.contract.ts";

storeContract("sqlite", async () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-store-"));
  const open = async () => {
    const s = openSqliteStore(join(dir, "baton.sqlite"));
    await s.migrate();
    return s;
  };
  const stores: Store[] = [await open()];
  return {
    store: stores[0]!,
    openPeer: async () => {
      const s = await open();
      stores.push(s);
      return s;
    },
    openReadOnlyPeer: async () => {
      const s = new SqliteStore(new Database(join(dir, "baton.sqlite"), { readonly: true }));
      stores.push(s);
      return s;
    },
    dispose: async () => {
      for (const s of stores) await s.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe("openStore (SQLite and configuration)", () => {
  it("opens ':memory:' migrated and ready", async () => {
    const store = await openStore(":memory:");
    await store.createRelease(makeRelease(1), [], [], 0);
    expect((await store.getRelease("r1"))?.id).toBe("r1");
    await store.close();
  });

  it("without DATABASE_URL creates <dataDir>/baton.sqlite in WAL mode, and keeps data across opens", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "baton-store-")), "nested", "data");
    try {
      const first = await openStore({ dataDir: dir });
      await first.createRelease(makeRelease(3), [], [], 0);
      expect(await first.nextReleaseNumber()).toBe(1);
      await first.close();
      const raw = new Database(join(dir, "baton.sqlite"), { readonly: true });
      expect(raw.pragma("journal_mode", { simple: true })).toBe("wal");
      raw.close();
      const second = await openStore({ dataDir: dir, databaseUrl: "" });
      expect((await second.getRelease("r3"))?.id).toBe("r3");
      expect(await second.nextReleaseNumber()).toBe(2);
      await second.close();
    } finally {
      rmSync(join(dir, "..", ".."), { recursive: true, force: true });
    }
  });

  it("refuses a DATABASE_URL that is not Postgres, without echoing credentials", async () => {
    const p = openStore({ databaseUrl: "mysql://root:hunter2@db/baton", dataDir: "/nonexistent" });
    await expect(p).rejects.toThrow(
      /^\[store\] DATABASE_URL must start with postgres:\/\/ or postgresql:\/\/ \(got "mysql:…"\); unset it/,
    );
    await expect(p).rejects.not.toThrow(/hunter2/);
  });

  it("reports an unreachable Postgres as a [store] error", async () => {
    // Port 9 on loopback: nothing listens there.
    await expect(
      openStore({ databaseUrl: "postgres://u@127.0.0.1:9/x", dataDir: "/nonexistent" }),
    ).rejects.toThrow(/^\[store\] /);
  });

  it("0003 upgrades a database made by 0001–0002: rows kept, `abandoned` accepted", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-store-"));
    const file = join(dir, "baton.sqlite");
    try {
      const old = new Database(file);
      old.exec("CREATE TABLE baton_migration (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)");
      for (const name of ["0001_initial", "0002_manifests"] as const) {
        for (const sql of sqliteMigrations[name] ?? []) old.exec(sql);
        old.prepare("INSERT INTO baton_migration (name, applied_at) VALUES (?, 0)").run(name);
      }
      old.close();
      const before = openSqliteStore(file);
      // Not migrated yet: the old CHECK refuses the new state.
      await expect(
        before.createRelease(makeRelease(1, { state: "abandoned" }), [], [], 0),
      ).rejects.toThrow();
      await before.createRelease(makeRelease(2, { state: "needs_operator" }), [], [], 0);
      await before.migrate();
      await before.createRelease(makeRelease(3, { state: "abandoned" }), [], [], 0);
      expect((await before.getRelease("r2"))?.state).toBe("needs_operator");
      expect((await before.getRelease("r3"))?.state).toBe("abandoned");
      const list = await before.listReleases({ state: "abandoned", limit: 5 });
      expect(list.map((r) => r.id)).toEqual(["r3"]);
      await before.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("retention keeps a finished release's document and manifest deflated; both read back whole, and a later commit writes plain JSON", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-store-"));
    const file = join(dir, "baton.sqlite");
    try {
      const store = openSqliteStore(file);
      await store.migrate();
      const r = makeRelease(1, { state: "succeeded", updated_at: 5, reason: "é ✓ done" });
      await store.createRelease(r, [], [], 5);
      const before = await store.getRelease("r1");
      const res = await store.compactFinished({
        before: 1_000,
        now: 2_000,
        limit: 10,
        logTailChars: 100,
      });
      expect(res.releases).toBe(1);
      const raw = () =>
        store.database
          .prepare(
            "SELECT r.doc AS doc, m.manifest AS manifest FROM releases r JOIN manifests m ON m.release_id = r.id WHERE r.id = 'r1'",
          )
          .get() as { doc: string; manifest: string };
      expect(raw().doc.startsWith("z:")).toBe(true);
      expect(raw().manifest.startsWith("z:")).toBe(true);
      expect(raw().doc.length).toBeLessThan(JSON.stringify(before).length);
      // A fresh store (no manifest cache) reads the same release.
      await store.close();
      const again = openSqliteStore(file);
      expect(await again.getRelease("r1")).toEqual(before);
      const next = { ...before!, resource_version: before!.resource_version + 1, reason: "again" };
      expect(
        await again.commit({
          release: next,
          expected_version: before!.resource_version,
          history: [],
          effects: [],
          now: 3_000,
        }),
      ).toEqual({ ok: true });
      expect(await again.getRelease("r1")).toEqual(next);
      expect(
        (
          again.database.prepare("SELECT doc FROM releases WHERE id = 'r1'").get() as {
            doc: string;
          }
        ).doc,
      ).toMatch(/^\{/);
      await again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a wrong-typed value is refused by the STRICT schema, not stored", async () => {
    const store = await openStore(":memory:");
    const bad = makeRelease(1, { created_at: "yesterday" as unknown as number });
    await expect(store.createRelease(bad, [], [], 0)).rejects.toThrow(
      /^\[store\] creating release r1 failed and was rolled back/,
    );
    expect(await store.getRelease("r1")).toBeNull();
    await store.close();
  });
});
