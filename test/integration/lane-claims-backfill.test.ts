/**
 * Migration 0007's backfill on both stores: a database made by migrations 0001–0006 (no
 * `lane_claims` table) holding releases in every kind of state is migrated; afterwards exactly
 * the lanes of releases not yet terminal are claimed, each by the release that owned it first
 * (the lowest number when two releases in flight already shared a lane), and a new release
 * is refused on a claimed lane and accepted on a lane only a finished release named.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { postgresMigrations } from "../../engine/src/adapters/postgres/migrations.ts";
import { openPostgresStore } from "../../engine/src/adapters/postgres/postgres-store.ts";
import { sqliteMigrations } from "../../engine/src/adapters/sqlite/migrations.ts";
import { openSqliteStore } from "../../engine/src/adapters/sqlite/sqlite-store.ts";
import type { ReleaseState } from "../../engine/src/domain/states.ts";
import type { ManifestLane, Release } from "../../engine/src/domain/types.ts";
import { LanesClaimed, type Store } from "../../engine/src/ports/store.ts";
import { makeRelease } from "../contract/store.contract.ts";

/** The migrations a database had before lane claims existed. */
const BEFORE_0007 = (names: string[]) => names.filter((n) => n < "0007").sort();

function lane(id: string): ManifestLane {
  return {
    id,
    host: `${id}.internal`,
    port: 22,
    user: "deploy",
    host_key: `SHA256:${"A".repeat(43)}`,
    queue: `q-${id}`,
    capabilities: [],
    health_url: `http://${id}.internal:8080/healthz`,
    baseline_weight: 0,
  };
}

function release(n: number, state: ReleaseState, lanes: string[]): Release {
  const r = makeRelease(n, { state });
  return { ...r, manifest: { ...r.manifest, lanes: lanes.map(lane) } };
}

/** Releases as an engine before 0007 left them: terminal and not, two sharing lane `b`. */
const OLD: Release[] = [
  release(1, "running", ["a", "b"]),
  release(2, "succeeded", ["c"]),
  release(3, "paused", ["d"]),
  release(4, "pending", ["b", "e"]),
  release(5, "rolled_back", ["f"]),
  release(6, "aborted", ["g"]),
  release(7, "abandoned", ["h"]),
  release(8, "needs_operator", ["i"]),
  release(9, "compensating", ["j"]),
];
const ALL_LANES = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
const EXPECTED = [
  { lane_id: "a", release_id: "r1" },
  { lane_id: "b", release_id: "r1" },
  { lane_id: "d", release_id: "r3" },
  { lane_id: "e", release_id: "r4" },
  { lane_id: "i", release_id: "r8" },
  { lane_id: "j", release_id: "r9" },
];

/** Writes the old releases through the store (not migrated past 0006), migrates, checks. */
async function backfillChecks(store: Store, tableCount: () => Promise<number>): Promise<void> {
  expect(await tableCount()).toBe(0);
  for (const r of OLD) await store.createRelease(r, [], [], r.created_at);
  await store.migrate();
  expect(await tableCount()).toBe(1);
  expect(await store.laneClaims(ALL_LANES)).toEqual(EXPECTED);
  // The claims work as if written at creation: a claimed lane refuses a new release …
  const refused = await store
    .createRelease(release(10, "pending", ["b", "z"]), [], [], 0, { claimLanes: ["b", "z"] })
    .then(
      () => null,
      (e: unknown) => e,
    );
  expect(refused).toBeInstanceOf(LanesClaimed);
  expect((refused as LanesClaimed).owners).toEqual([{ lane_id: "b", release_id: "r1" }]);
  expect(await store.getRelease("r10")).toBeNull();
  // … and a lane only finished releases named is free.
  await store.createRelease(release(11, "pending", ["c", "f"]), [], [], 0, {
    claimLanes: ["c", "f"],
  });
  expect(await store.laneClaims(["c", "f"])).toEqual([
    { lane_id: "c", release_id: "r11" },
    { lane_id: "f", release_id: "r11" },
  ]);
}

describe("migration 0007 backfills lane claims", () => {
  it("SQLite", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-0007-"));
    const file = join(dir, "baton.sqlite");
    try {
      const old = new Database(file);
      old.exec("CREATE TABLE baton_migration (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)");
      for (const name of BEFORE_0007(Object.keys(sqliteMigrations))) {
        for (const sql of sqliteMigrations[name] ?? []) old.exec(sql);
        old.prepare("INSERT INTO baton_migration (name, applied_at) VALUES (?, 0)").run(name);
      }
      expect(BEFORE_0007(Object.keys(sqliteMigrations)).at(-1)).toBe("0006_gate_evidence");
      old.close();
      const store = openSqliteStore(file);
      const raw = new Database(file, { readonly: true });
      try {
        await backfillChecks(store, async () =>
          Number(
            raw
              .prepare(
                "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='lane_claims'",
              )
              .pluck()
              .get(),
          ),
        );
      } finally {
        raw.close();
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const url = process.env.BATON_TEST_DATABASE_URL;
  it.skipIf(!url && process.env.CI !== "true")("Postgres", async () => {
    if (!url) throw new Error("[test] BATON_TEST_DATABASE_URL is not set (required when CI=true)");
    const schema = `baton_test_${randomBytes(6).toString("hex")}`;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    let store: Store | null = null;
    try {
      await client.query(`CREATE SCHEMA ${schema}`);
      await client.query(`SET search_path = ${schema}`);
      await client.query(
        "CREATE TABLE baton_migration (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)",
      );
      const names = BEFORE_0007(Object.keys(postgresMigrations));
      expect(names.at(-1)).toBe("0006_gate_evidence");
      for (const name of names) {
        for (const sql of postgresMigrations[name] ?? []) await client.query(sql);
        await client.query("INSERT INTO baton_migration (name, applied_at) VALUES ($1, 0)", [name]);
      }
      store = openPostgresStore({ connectionString: url, schema, max: 2 });
      await backfillChecks(store, async () => {
        const { rows } = await client.query(
          "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'lane_claims'",
          [schema],
        );
        return Number(rows[0]?.n);
      });
    } finally {
      await store?.close();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    }
  });
});
