/**
 * `baton verify <id>` (docs/cli.md, docs/lifecycle.md "Recovery verification"), in process
 * (`runCli`) against an engine served over HTTP on 127.0.0.1, on each store: it asks the engine
 * to read the lanes, waits for the verdict and prints it lane by lane. A succeeded release
 * whose lanes run what its manifest says: exit 0, every lane `ok`. After a lane's machine was
 * changed by hand: exit 1, the lane `DIFFERS` naming the field and both values. Bad input: a
 * malformed id is a usage error (exit 2), a release that refuses verify exits 1 naming why.
 */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { afterEach, describe, expect, it } from "vitest";
import { runCli } from "../../engine/src/cli/program.ts";
import type { ManifestLane } from "../../engine/src/domain/types.ts";
import type { TargetAnswer } from "../../engine/src/domain/verification.ts";
import type { TargetProbe } from "../../engine/src/ports/target-probe.ts";
import {
  createRelease,
  drive,
  type Harness,
  laneId,
  makeHarness,
  OPERATOR,
  recipe,
  STORE_KINDS,
  skipStore,
} from "../integration/service-harness.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";

/** Each lane runs one image: the last one a runner step deployed, unless set by hand. */
class Fleet implements TargetProbe {
  readonly runs = new Map<string, string>();
  async inspect() {
    return [];
  }
  async observe(lane: ManifestLane, image: string): Promise<TargetAnswer> {
    const now = this.runs.get(lane.id) ?? PREVIOUS_IMAGE;
    const running = now === image;
    return {
      reached: true,
      running,
      image: running ? image : null,
      health: running ? "pass" : null,
      message: running ? "healthy" : `the lane runs ${now}`,
    };
  }
}

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: {
      out: { write: (s: string) => out.push(s) },
      err: { write: (s: string) => err.push(s) },
    },
  };
}

describe.each(STORE_KINDS)("baton verify on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  let close: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await close?.();
    await h?.close();
    h = null;
    close = null;
  });

  it.skipIf(skip)(
    "prints each lane's verdict; exit 0 when every lane is as desired, 1 naming the difference",
    async () => {
      const fleet = new Fleet();
      h = await makeHarness({ kind, targetProbe: fleet });
      const hh = h;
      const id = await createRelease(hh, recipe(2));
      await drive(hh, (p) => {
        const lane = (p.args.lane as { id?: string } | undefined)?.id;
        if (lane && p.tool === "attach-queue-lane") fleet.runs.set(lane, String(p.args.image));
        return "pass";
      });
      // From here the engine performs what a request commits at once (as `baton serve` does).
      const server = serve({ fetch: hh.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
      await new Promise<void>((ok) => server.once("listening", () => ok()));
      close = () =>
        new Promise<void>((ok) => {
          (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
          server.close(() => ok());
        });
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const base = ["--engine", url, "--token", OPERATOR];
      // The harness reconciles only when ticked: tick while the CLI waits.
      const ticking = setInterval(() => void hh.engine.tick().catch(() => {}), 20);
      try {
        const a = io();
        const code = await runCli(
          [...base, "verify", id, "--interval", "100", "--timeout", "60"],
          a.io,
        );
        const text = a.out.join("");
        expect(a.err.join("")).toBe("");
        expect(code).toBe(0);
        expect(text).toContain(`verification 1 of ${id} (asked by `);
        expect(text).toContain("against the manifest's end state): passed");
        expect(text).toMatch(
          new RegExp(
            `${laneId(0)}\\s+ok\\s+as desired: weight, excluded, capabilities, image, health`,
          ),
        );
        expect(text).toMatch(new RegExp(`${laneId(1)}\\s+ok`));

        fleet.runs.set(laneId(1), PREVIOUS_IMAGE);
        const b = io();
        const again = await runCli(
          [...base, "verify", id, "--interval", "100", "--timeout", "60", "--actor", "alice"],
          b.io,
        );
        const out = b.out.join("");
        expect(again).toBe(1);
        expect(out).toContain(`verification 2 of ${id} (asked by operator:alice`);
        expect(out).toContain("FAILED");
        expect(out).toMatch(
          new RegExp(
            `${laneId(1)}\\s+DIFFERS image desired ${IMAGE.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} is not running`,
          ),
        );

        const bad = io();
        expect(await runCli([...base, "verify", "release-1"], bad.io)).toBe(2);
        expect(bad.err.join("")).toContain("is not a release id");
        const missing = io();
        expect(await runCli([...base, "verify", "r999"], missing.io)).toBe(1);
        expect(missing.err.join("")).not.toMatch(/\n\s+at .+:\d+:\d+/);
      } finally {
        clearInterval(ticking);
      }
    },
  );
});
