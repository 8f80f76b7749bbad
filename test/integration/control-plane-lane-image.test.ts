/**
 * The reference control plane keeps the image each lane reports it runs (`LaneState.image`,
 * docs/control-plane.md "Lane images"): `PUT /v1/lanes/:lane/image` (the lane's own report,
 * write token, no operation key) or `image` in the lane's declaration. The report changes
 * nothing else, writes no ledger row or history entry, survives a restart on its SQLite file,
 * and a file written before the column existed is migrated (lanes read as unknown).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { startEmbeddedControlPlane } from "../../engine/src/control-plane/embedded.ts";
import type { ControlPlaneHandle } from "../../engine/src/control-plane/server.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";

describe("control plane: lane images", () => {
  const dirs: string[] = [];
  let cp: ControlPlaneHandle | null = null;
  afterEach(async () => {
    await cp?.close();
    cp = null;
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const put = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${cp!.url}${path}`, {
      method: "PUT",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${cp!.writeToken}`,
        ...headers,
      },
      body: JSON.stringify(body),
    });

  it("a lane's report is kept, shown, survives a restart, and changes nothing else", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-cp-image-"));
    dirs.push(dir);
    cp = (await startEmbeddedControlPlane({ dataDir: dir })).handle;
    cp.core.seed([
      { id: "lane-a", model: "m", weight: 60, capabilities: ["x"], advertised: true },
      { id: "lane-b", model: "m", weight: 40 },
    ]);
    const before = cp.core.lane("lane-a");

    const ok = await put("/v1/lanes/lane-a/image", { image: PREVIOUS_IMAGE });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { image: string }).image).toBe(PREVIOUS_IMAGE);
    const listed = (await (await fetch(`${cp.url}/v1/lanes?model=m`)).json()) as {
      lanes: { id: string; image?: string | null; weight: number }[];
    };
    expect(listed.lanes.map((l) => [l.id, l.image ?? null, l.weight])).toEqual([
      ["lane-a", PREVIOUS_IMAGE, 60],
      ["lane-b", null, 40],
    ]);
    const after = cp.core.lane("lane-a");
    expect({ ...after, image: undefined, updated_at: 0 }).toEqual({
      ...before,
      image: undefined,
      updated_at: 0,
    });
    // Not a Baton write: no history entry, no ledger row.
    expect(cp.core.history()).toEqual([]);
    expect(cp.core.ledger()).toEqual([]);

    // Refusals name the field and the fix; nothing changes.
    const unpinned = await put("/v1/lanes/lane-a/image", { image: "ghcr.io/acme/summarizer:v7" });
    expect(unpinned.status).toBe(400);
    expect(await unpinned.text()).toContain("image must be pinned by digest");
    const unknown = await put("/v1/lanes/lane-z/image", { image: IMAGE });
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain("lane lane-z is unknown");
    const anonymous = await fetch(`${cp.url}/v1/lanes/lane-a/image`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ image: IMAGE }),
    });
    expect(anonymous.status).toBe(401);
    expect(cp.core.lane("lane-a").image).toBe(PREVIOUS_IMAGE);

    // A declaration may carry the image too (a keyed write).
    const declared = await put(
      "/v1/lanes/lane-b",
      { model: "m", image: IMAGE },
      {
        "idempotency-key": "declare:lane-b:1",
        "baton-release-id": "ops",
        "baton-generation": "1",
      },
    );
    expect(declared.status).toBe(200);
    expect(cp.core.lane("lane-b")).toMatchObject({ model: "m", weight: 40, image: IMAGE });

    // Restart on the same file: the reports are still there.
    await cp.close();
    cp = (await startEmbeddedControlPlane({ dataDir: dir })).handle;
    expect(cp.core.lane("lane-a").image).toBe(PREVIOUS_IMAGE);
    expect(cp.core.lane("lane-b").image).toBe(IMAGE);
  });

  it("a file written before lanes reported images is migrated: every image unknown", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-cp-image-old-"));
    dirs.push(dir);
    const db = new Database(join(dir, "control-plane.sqlite"));
    db.exec(`CREATE TABLE cp_lanes (
      id TEXT PRIMARY KEY, model TEXT, weight INTEGER NOT NULL, excluded INTEGER NOT NULL,
      capabilities TEXT NOT NULL, advertised INTEGER NOT NULL, updated_at INTEGER NOT NULL)`);
    db.prepare("INSERT INTO cp_lanes VALUES ('lane-a', 'm', 100, 0, '[]', 0, 1)").run();
    db.close();
    cp = (await startEmbeddedControlPlane({ dataDir: dir })).handle;
    expect(cp.core.lane("lane-a").image).toBeUndefined();
    cp.core.reportImage("lane-a", IMAGE);
    expect(cp.core.lane("lane-a")).toMatchObject({ weight: 100, image: IMAGE });
  });
});
