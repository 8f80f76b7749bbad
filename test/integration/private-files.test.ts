/**
 * The data folder is 0700 and the SQLite files in it 0600, companions (-wal, -shm) included,
 * for the engine's store and the embedded control plane's: they hold runners' logs, callback
 * bodies and release records. Before: the folder was created 0755 and the files 0644.
 * (Postgres keeps no files here; its data folder gets the same 0700.)
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../engine/src/adapters/store-factory.ts";
import { SqliteCpStore } from "../../engine/src/control-plane/sqlite-store.ts";
import { prepareDataDir } from "../../engine/src/node/data-dir.ts";

const root = mkdtempSync(join(tmpdir(), "baton-modes-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const mode = (f: string) => statSync(f).mode & 0o777;

describe("private data", () => {
  it("prepareDataDir makes the data folder 0700, new or existing", () => {
    const fresh = join(root, "fresh", "data");
    prepareDataDir(fresh);
    expect(mode(fresh)).toBe(0o700);
    const old = join(root, "old");
    mkdirSync(old, { mode: 0o755 });
    prepareDataDir(old);
    expect(mode(old)).toBe(0o700);
  });

  it("the engine's SQLite store: folder 0700, baton.sqlite, -wal and -shm 0600", async () => {
    const dir = join(root, "store");
    const store = await openStore({ dataDir: dir });
    try {
      await store.migrate();
      expect(mode(dir)).toBe(0o700);
      for (const f of ["baton.sqlite", "baton.sqlite-wal", "baton.sqlite-shm"]) {
        expect(existsSync(join(dir, f)), f).toBe(true);
        expect(mode(join(dir, f)), f).toBe(0o600);
      }
    } finally {
      await store.close();
    }
  });

  it("files an older engine left 0644 are made 0600", async () => {
    const dir = join(root, "older");
    mkdirSync(dir, { mode: 0o755 });
    writeFileSync(join(dir, "baton.sqlite"), "", { mode: 0o644 });
    writeFileSync(join(dir, "baton.sqlite-wal"), "", { mode: 0o644 });
    const store = await openStore({ dataDir: dir });
    await store.close();
    expect(mode(dir)).toBe(0o700);
    expect(mode(join(dir, "baton.sqlite"))).toBe(0o600);
    expect(
      existsSync(join(dir, "baton.sqlite-wal")) ? mode(join(dir, "baton.sqlite-wal")) : 0o600,
    ).toBe(0o600);
  });

  it("the embedded control plane's SQLite file and its companions are 0600", () => {
    const file = join(root, "cp.sqlite");
    const cp = new SqliteCpStore(file);
    try {
      for (const f of [file, `${file}-wal`, `${file}-shm`]) {
        if (existsSync(f)) expect(mode(f), f).toBe(0o600);
      }
      expect(mode(file)).toBe(0o600);
    } finally {
      cp.close();
    }
  });
});
