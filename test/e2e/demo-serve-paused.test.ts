/**
 * `npm run demo -- --serve` with the release paused by an operator part-way: paused is not the
 * end. The demo keeps serving and following, says how to resume (`baton resume r1`), and after
 * the resume follows the release to its terminal state, writes the record at that state (not
 * as paused), then serves until Ctrl-C. Asserted on the running engine (its API) and the record.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { alive, spawnDemo, within } from "../support/demo-process.ts";

describe("npm run demo -- --serve with a paused release", () => {
  it("keeps serving and following through a pause, says how to resume, ends at the terminal state", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "baton-demo-paused-"));
    const file = join(tmp, "record.json");
    const demo = await spawnDemo(["--serve", "--record", file]);
    const { pgid } = demo;
    try {
      const started = await demo.started(300_000);
      expect(started, demo.output()).toBe(true);
      const { url, token } = demo.engine();
      const api = (path: string, body?: unknown) =>
        fetch(`${url}${path}`, {
          method: body === undefined ? "GET" : "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      const stateOf = async () =>
        ((await (await api("/v1/releases/r1")).json()) as { state: string }).state;

      const paused = await api("/v1/releases/r1/pause", { reason: "e2e: look at wave 1 first" });
      expect(paused.status, await paused.text()).toBe(200);
      expect(await within(120_000, async () => (await stateOf()) === "paused")).toBe(true);
      // The demo says how to resume, and does not end.
      expect(
        await within(60_000, () =>
          /\[demo\] release r1 is paused[\s\S]*baton resume r1/.test(demo.output()),
        ),
        demo.output(),
      ).toBe(true);
      expect(demo.output()).toMatch(
        /\[demo\] resume\s+BATON_ENGINE_URL=http:\/\/127\.0\.0\.1:\d+ BATON_TOKEN=\S+ npx baton resume r1/,
      );
      // A while later it is still following: no end line, no record written, engine answering.
      await new Promise((r) => setTimeout(r, 3_000));
      expect(demo.output()).not.toMatch(/ended paused/);
      expect(demo.output()).not.toMatch(/\[demo\] record /);
      expect(alive(pgid)).toBe(true);
      expect(await stateOf()).toBe("paused");

      const resumed = await api("/v1/releases/r1/resume", {});
      expect(resumed.status, await resumed.text()).toBe(200);
      // Followed to the end (the gates got the router's traffic again), then serving.
      expect(
        await within(400_000, () => /\[demo\] serving until Ctrl-C/.test(demo.output())),
        demo.output(),
      ).toBe(true);
      expect(demo.output()).toMatch(/release r1 ended succeeded in [\d.]+ s/);
      expect(await stateOf()).toBe("succeeded");
      const rec = JSON.parse(readFileSync(file, "utf8")) as {
        release: { state: string; closed: boolean };
      };
      expect(rec.release).toMatchObject({ state: "succeeded", closed: true });

      process.kill(pgid, "SIGINT");
      const done = await demo.exit(120_000);
      expect(done, demo.output()).toEqual({ code: 0, signal: null });
    } finally {
      demo.kill();
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 900_000);
});
