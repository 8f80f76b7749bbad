/**
 * Mutable dependencies (docs/drift.md "Mutable dependencies"), on both stores with a fake clock:
 * the provider's revision comes from a stand-in HTTP server the test controls (never from
 * Baton's own state), asked by the engine's HTTP probe on the drift schedule. An unchanged
 * revision records nothing and blocks nothing; a new revision is a `dependency_drift` entry and
 * a start of the same recipe is refused (409, naming the dependency, what changed and how to
 * requalify) until a recipe declaring the new revision starts, runs its requalification check
 * and succeeds, which clears the drift; an expired contract does the same.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { NOTICE_KINDS, type Notice } from "../../engine/src/domain/notifications.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Notifier } from "../../engine/src/ports/notifier.ts";
import { gatedRecipe, type Rig, rig, run } from "../support/gate-rig.ts";
import { PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import { op, STORE_KINDS, skipStore } from "./service-harness.ts";

const INTERVAL = 30_000;
const DAY = 86_400_000;

/** The provider: answers `{"revision": …}` with whatever the test set last; counts its probes. */
async function provider(): Promise<{
  url: string;
  set(r: string): void;
  asked(): number;
  close(): Promise<void>;
}> {
  let revision = "2026-11-01";
  let asked = 0;
  const server: Server = createServer((req, res) => {
    asked++;
    res.writeHead(req.url === "/v1/models/summarizer" ? 200 : 404, {
      "content-type": "application/json",
    });
    res.end(JSON.stringify({ model: "summarizer", revision }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/models/summarizer`,
    set: (r) => {
      revision = r;
    },
    asked: () => asked,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

type Body = {
  state: string;
  dependency_drift: {
    dependencies: { name: string; declared: string; observed: string | null; expired: boolean }[];
  } | null;
  history: { kind: string; message: string }[];
  error?: {
    code: string;
    message: string;
    problems: { path: string; message: string; fix: string }[];
  };
};

describe.each(STORE_KINDS)("mutable dependencies on %s", (kind) => {
  const skip = skipStore(kind);
  let g: Rig | null = null;
  let p: Awaited<ReturnType<typeof provider>> | null = null;
  afterEach(async () => {
    g?.traffic.stop();
    await g?.h.close();
    await p?.close();
    g = null;
    p = null;
  });

  const recipeWith = (url: string, over: Record<string, unknown> = {}): RecipeInput =>
    ({
      ...gatedRecipe({ checks: [{ name: "task-set", tool: "run-smoke" }] }),
      mutable_dependencies: [
        {
          name: "summarizer-api",
          kind: "hosted_model",
          owner: "ml-platform",
          revision: "2026-11-01",
          // The fake clock starts on 2027-01-15.
          contract_expires: "2027-01-20",
          probe: { url, field: "revision" },
          requalification: { checks: ["task-set"] },
          fallback: "start recipe summarizer-v6-selfhosted",
          ...over,
        },
      ],
    }) as RecipeInput;

  const get = async (id: string) =>
    (await (await op((g as Rig).h, "GET", `/v1/releases/${id}`)).json()) as Body;
  const post = (r: RecipeInput) => op((g as Rig).h, "POST", "/v1/releases", r);
  /** Starts `r` (201) and runs it to rest; returns its id. */
  const release = async (r: RecipeInput) => {
    // Each release rolls the candidate out over lanes serving the previous image again.
    for (const l of r.lanes ?? []) (g as Rig).traffic.setLaneImage(String(l.id), PREVIOUS_IMAGE);
    const res = await post(r);
    expect(res.status, await res.clone().text()).toBe(201);
    const id = ((await res.json()) as { id: string }).id;
    await run(g as Rig);
    return id;
  };
  /** One drift interval later, one tick: the probes are asked. */
  const observe = async () => {
    (g as Rig).h.clock.advance(INTERVAL);
    await (g as Rig).h.engine.tick();
  };
  const kinds = async (id: string) =>
    (await get(id)).history.map((h) => h.kind).filter((k) => k.startsWith("dependency_"));

  it.skipIf(skip)(
    "a new revision raises drift and blocks the next release until a release requalifies it; an unchanged one does not",
    async () => {
      p = await provider();
      const sent: Notice[] = [];
      const notifier: Notifier = {
        channel: "webhook",
        send: async (n) => {
          sent.push(n);
          return { ok: true, status: 200 };
        },
      };
      const notify = {
        webhook: null,
        slack: null,
        github: false,
        events: [...NOTICE_KINDS],
        retryBaseMs: 1_000,
        maxTries: 3,
      };
      g = await rig(kind, 0.01, { driftIntervalMs: INTERVAL, notify }, [notifier]);
      const r1 = await release(recipeWith(p.url));
      expect((await get(r1)).state).toBe("succeeded");

      // Unchanged: the probe is asked, nothing is recorded, the same recipe starts again.
      await observe();
      expect(p.asked()).toBeGreaterThan(0);
      expect(await kinds(r1)).toEqual([]);
      const r2 = await release(recipeWith(p.url));
      expect((await get(r2)).state).toBe("succeeded");

      // The provider moves to a new revision: drift on the newest succeeded release.
      p.set("2026-12-01");
      const asked = p.asked();
      await observe();
      expect(p.asked()).toBeGreaterThan(asked);
      const drifted = await get(r2);
      expect(drifted.dependency_drift?.dependencies).toEqual([
        expect.objectContaining({
          name: "summarizer-api",
          declared: "2026-11-01",
          observed: "2026-12-01",
          expired: false,
        }),
      ]);
      expect(drifted.history.filter((h) => h.kind === "dependency_drift")).toEqual([
        expect.objectContaining({
          message: expect.stringMatching(
            /mutable dependency summarizer-api \(hosted_model, owner ml-platform\): provider revision changed: the recipe declares "2026-11-01", its probe observed "2026-12-01"/,
          ),
        }),
      ]);
      // Observed again, unchanged: recorded once, and told once (a drift notice, delivered
      // from the outbox by the ticks).
      await observe();
      expect(await kinds(r2)).toEqual(["dependency_drift"]);
      expect(sent.filter((n) => n.kind === "drift" && /mutable dependenc/.test(n.summary))).toEqual(
        [
          expect.objectContaining({
            release_id: r2,
            summary: expect.stringMatching(
              new RegExp(
                `^${r2} has mutable dependencies that need requalification: model summarizer-v7: mutable dependency summarizer-api .*observed "2026-12-01"`,
              ),
            ),
          }),
        ],
      );

      // The next release of the same recipe is refused, naming the dependency and the fix.
      const before = (await g.h.store.listReleases({ limit: 50 })).length;
      const refused = await post(recipeWith(p.url));
      expect(refused.status).toBe(409);
      const body = (await refused.json()) as Body;
      expect(body.error?.code).toBe("requalification_required");
      expect(body.error?.problems).toEqual([
        {
          path: "mutable_dependencies.0.revision",
          message: expect.stringMatching(/summarizer-api .* its probe observed "2026-12-01"/),
          fix: expect.stringMatching(
            /set mutable_dependencies\.0\.revision to "2026-12-01" .* requalification checks task-set/,
          ),
        },
      ]);
      expect((await g.h.store.listReleases({ limit: 50 })).length).toBe(before);
      // Leaving the dependency out of the recipe is no requalification: refused the same way.
      const without = await post({ ...recipeWith(p.url), mutable_dependencies: undefined });
      expect(without.status).toBe(409);
      const left = (await without.json()) as Body;
      expect(left.error?.code).toBe("requalification_required");
      expect(left.error?.problems).toEqual([
        {
          path: "mutable_dependencies",
          message: expect.stringMatching(
            /summarizer-api of summarizer-v7 is in drift .*"2026-12-01".*no longer declares it/,
          ),
          fix: expect.stringMatching(/Declare summarizer-api again .*"2026-12-01"/),
        },
      ]);
      expect((await g.h.store.listReleases({ limit: 50 })).length).toBe(before);

      // Requalified: the recipe declares the new revision; its release runs the check and succeeds.
      const dispatched = g.h.dispatcher.accepted.length;
      const r3 = await release(recipeWith(p.url, { revision: "2026-12-01" }));
      expect((await get(r3)).state).toBe("succeeded");
      const checks = g.h.dispatcher.accepted
        .slice(dispatched)
        .filter((x) => (x.args as { check?: { name?: string } }).check?.name === "task-set");
      expect(checks.length).toBeGreaterThan(0);
      await observe();
      expect(await kinds(r2)).toEqual(["dependency_drift", "dependency_drift_cleared"]);
      expect((await get(r2)).dependency_drift).toBeNull();
      expect(await kinds(r3)).toEqual([]);
    },
  );

  it.skipIf(skip)(
    "an expired contract raises drift and blocks the next release until the contract is renewed",
    async () => {
      p = await provider();
      g = await rig(kind, 0.01, { driftIntervalMs: INTERVAL });
      const r1 = await release(recipeWith(p.url));
      await observe();
      expect(await kinds(r1)).toEqual([]);

      // 2027-01-20 was the contract's last day.
      g.h.clock.advance(6 * DAY);
      await observe();
      expect((await get(r1)).dependency_drift?.dependencies).toEqual([
        expect.objectContaining({ name: "summarizer-api", observed: null, expired: true }),
      ]);
      const refused = await post(recipeWith(p.url));
      expect(refused.status).toBe(409);
      const body = (await refused.json()) as Body;
      expect(body.error?.problems.map((x) => x.path)).toEqual([
        "mutable_dependencies.0.contract_expires",
      ]);
      expect(body.error?.message).toMatch(
        /contract expired: it held through 2027-01-20\. Fix: Renew the contract with ml-platform/,
      );

      const r2 = await release(recipeWith(p.url, { contract_expires: "2028-01-31" }));
      expect((await get(r2)).state).toBe("succeeded");
      await observe();
      expect(await kinds(r1)).toEqual(["dependency_drift", "dependency_drift_cleared"]);
    },
  );
});
