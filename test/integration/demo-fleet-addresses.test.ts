/**
 * A kept data dir keeps the embedded fleet's addresses: the SSH target comes back on the same
 * port with the same host key (so a manifest of an earlier start still pins it) and accepts the
 * same client key, and each lane's health URL is on the same port. A port taken meanwhile is
 * replaced by a free one, said in `moved`, and the kept file names the new one.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { ADDRESSES_FILE, type Fleet, startFleet } from "../../engine/src/demo/fleet.ts";
import { connect } from "../../scripts/lib/ssh.ts";

const addressesOf = (f: Fleet) => ({
  ssh: f.target.port,
  pin: f.target.hostKeyPin,
  health: Object.fromEntries([...f.lanes.values()].map((l) => [l.id, l.healthUrl])),
});

/** Listens on `port` (127.0.0.1); null when something else holds it already (just as taken). */
function occupy(port: number): Promise<Server | null> {
  return new Promise((ok) => {
    const s = createServer();
    s.once("error", () => ok(null));
    s.listen(port, "127.0.0.1", () => ok(s));
  });
}

it("a second start in the same folder keeps the SSH port, host key, client key and health ports; a taken port moves and says so", async () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-fleet-addresses-"));
  const laneIds = ["lane-a", "lane-b"];
  try {
    const first = await startFleet({ dir, laneIds, model: "m" });
    const before = addressesOf(first);
    const clientKey = first.target.clientPrivateKey;
    expect(first.kept).toBe(false);
    const file = join(dir, "target", ADDRESSES_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    await first.close();

    const second = await startFleet({ dir, laneIds, model: "m" });
    try {
      expect(addressesOf(second)).toEqual(before);
      expect(second.kept).toBe(true);
      expect(second.moved).toEqual([]);
      // What a rollback's lane_credentials check does with the earlier manifest's lane.
      const session = await connect(
        { host: "127.0.0.1", port: before.ssh, user: second.target.user, hostKey: before.pin },
        { privateKey: clientKey, connectTimeoutMs: 10_000 },
      );
      try {
        expect((await session.exec("echo reached", 10_000)).stdout.trim()).toBe("reached");
      } finally {
        session.close();
      }
    } finally {
      await second.close();
    }

    const holder = await occupy(before.ssh);
    try {
      const third = await startFleet({ dir, laneIds, model: "m" });
      try {
        expect(third.target.port).not.toBe(before.ssh);
        expect(third.target.hostKeyPin).toBe(before.pin);
        expect(third.kept).toBe(false);
        expect(third.moved.join("\n")).toContain(
          `the SSH target's port ${before.ssh} of the last start is in use, so it listens on ${third.target.port} now`,
        );
        const kept = JSON.parse(readFileSync(file, "utf8")) as { ssh_port: number };
        expect(kept.ssh_port).toBe(third.target.port);
      } finally {
        await third.close();
      }
    } finally {
      holder?.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
