/**
 * The demo's fleet holds each lane's health port from its start: it binds the port and hands
 * the listening socket to the target's stand-in health server, so the port a recipe names is
 * never free between being chosen and being served. Before any container runs there, it answers
 * 503 {"healthy": false}; no other socket can bind it; once the fleet closes, the port is free.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { startFleet } from "../../engine/src/demo/fleet.ts";

/** Binds `port` on 127.0.0.1 and lets it go; rejects with the bind's error (e.g. EADDRINUSE). */
function bindOnce(port: number): Promise<void> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(port, "127.0.0.1", () => s.close(() => ok()));
  });
}

/** GET the URL; the status, or null when nothing answers. */
const status = (url: string) =>
  fetch(url, { signal: AbortSignal.timeout(2_000) }).then(
    (r) => r.status,
    () => null,
  );

it("each lane's health port is held from the fleet's start, served before any container, and freed by close", async () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-fleet-ports-"));
  const fleet = await startFleet({ dir, laneIds: ["lane-a", "lane-b"], model: "m" });
  const lanes = [...fleet.lanes.values()];
  try {
    expect(lanes.map((l) => l.id)).toEqual(["lane-a", "lane-b"]);
    expect(new Set(lanes.map((l) => l.healthPort)).size).toBe(2);
    for (const l of lanes) {
      const res = await fetch(l.healthUrl);
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ healthy: false });
      await expect(bindOnce(l.healthPort)).rejects.toMatchObject({ code: "EADDRINUSE" });
    }
  } finally {
    await fleet.close();
    rmSync(dir, { recursive: true, force: true });
  }
  // The health server stops with the fleet (bounded: 10 s).
  for (const l of lanes) {
    let s = await status(l.healthUrl);
    for (let i = 0; i < 100 && s !== null; i++) {
      await new Promise((r) => setTimeout(r, 100));
      s = await status(l.healthUrl);
    }
    expect(s).toBeNull();
  }
});
