/**
 * Strategies through the engine, on both stores (docs/recipes.md "Strategies"):
 * - rolling: the control plane, observed between reconciler passes, never has more than a
 *   batch's `max_unavailable` lanes out of service, and the lanes on the new image never carry
 *   more than their share of the capacity in service;
 * - blue_green: requests through the reference router proxy reach green only after the switch,
 *   and when a step after the switch fails, one control-plane write sends every request back
 *   to blue, which kept serving the previous image (never excluded, never redeployed);
 *   rolling back the release after a switch back that has no recipe of its own is refused 422
 *   naming `image`; `verify` of a switch back reads the old environment's lanes at their
 *   machines (a target-probe double standing in for `deploy.sh smoke` over SSH).
 * Each release's record names its strategy.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { type RecordJson, releaseSummary } from "../../engine/src/cli/output.ts";
import {
  type RouterProxyHandle,
  startRouterProxy,
} from "../../engine/src/control-plane/router-proxy.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Manifest, ManifestLane } from "../../engine/src/domain/types.ts";
import type { TargetAnswer } from "../../engine/src/domain/verification.ts";
import type { TargetProbe } from "../../engine/src/ports/target-probe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { recordSchemaErrors } from "../support/record-schema.ts";
import {
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const MODEL = "summarizer-v7";
const HOUR = 3_600_000;

/** Six lanes, two batches of three, each at most two out at once. */
function rollingRecipe(): RecipeInput {
  const base = recipe(6, { policy: { rerun_window_minutes: 0 } });
  return {
    ...base,
    strategy: "rolling",
    rollout: {
      waves: [
        { lanes: ["lane-a", "lane-b", "lane-c"], max_unavailable: 2 },
        { lanes: ["lane-d", "lane-e", "lane-f"], max_unavailable: 2 },
      ],
    },
  };
}

/**
 * Blue lanes a, b (50/50) and green lanes c, d (0); after the switch a custom step checks the
 * green environment (`verify_green`, the test decides whether it passes).
 */
function blueGreenRecipe(): RecipeInput {
  const base = recipe(4, { policy: { rerun_window_minutes: 0 } });
  return {
    ...base,
    strategy: "blue_green",
    lanes: (base.lanes ?? []).map((l, i) => ({ ...l, weight: i < 2 ? 50 : 0 })),
    rollout: { waves: [{ lanes: ["lane-c", "lane-d"], max_unavailable: 2 }] },
    custom_steps: [
      {
        name: "verify_green",
        forward: "run-smoke",
        backward: "inspect-lane",
        placement: { after: "assert_traffic_observed", lanes: ["lane-c"] },
      },
    ],
  };
}

/** A seeded control-plane double: lanes with these weights, all in service. */
function controlPlane(h: () => Harness | null, weights: Record<string, number>) {
  const cp = new MemoryControlPlane({ model: MODEL, now: () => h()?.clock.now() ?? 0 });
  cp.seed(
    Object.entries(weights).map(([id, weight]) => ({
      id,
      weight,
      excluded: false,
      capabilities: [],
      advertised: false,
    })),
  );
  return cp;
}

/**
 * The lanes' machines as the engine's target probe reads them (a stand-in for `deploy.sh smoke`
 * over SSH): each lane runs one image; a runner's deploy changes it; `asked` lists each
 * observation as `lane image`.
 */
class Machines implements TargetProbe {
  readonly runs = new Map<string, string>();
  readonly asked: string[] = [];

  /** What a runner's step does to its lane's machine. */
  step(p: DispatchPayload): void {
    const lane = (p.args.lane as { id?: string } | undefined)?.id;
    if (lane && p.tool === "attach-queue-lane" && typeof p.args.image === "string")
      this.runs.set(lane, p.args.image);
  }

  async inspect() {
    return [];
  }

  async observe(lane: ManifestLane, image: string): Promise<TargetAnswer> {
    this.asked.push(`${lane.id} ${image}`);
    const running = this.runs.get(lane.id) === image;
    return {
      reached: true,
      running,
      image: running ? image : null,
      health: running ? "pass" : null,
      message: running ? `${lane.id} runs ${image}` : `the container of ${image} is not running`,
    };
  }
}

/** A recovery verification as `GET /v1/releases/:id` shows it. */
interface VerificationJson {
  state: string;
  desired_from: string;
  summary: string | null;
  lanes: {
    lane: string;
    target_source: string | null;
    fields: { field: string; desired: unknown; observed: unknown; ok: boolean | null }[];
  }[];
}

async function strategyInRecord(h: Harness, id: string): Promise<string> {
  const res = await op(h, "GET", `/v1/releases/${id}/record`);
  const body = (await res.json()) as { intended: { strategy: string } };
  return body.intended.strategy;
}

describe.each(STORE_KINDS)("strategies on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
    await h?.close();
    h = null;
  });

  it.skipIf(skip)(
    "rolling: never more than max_unavailable lanes out of service, no traffic split beyond capacity",
    async () => {
      const r = rollingRecipe();
      const baseline: Record<string, number> = {
        "lane-a": 20,
        "lane-b": 20,
        "lane-c": 15,
        "lane-d": 15,
        "lane-e": 15,
        "lane-f": 15,
      };
      const cp = controlPlane(() => h, baseline);
      h = await makeHarness({ kind, cp });
      const hh = h;
      const id = await createRelease(hh, r);
      const m0 = (await getRecord(hh, id)).manifest as unknown as Manifest;
      expect(m0.strategy).toBe("rolling");
      // Traffic follows capacity: batch 1 holds 55% of the baseline weights.
      expect(m0.waves.map((w) => w.traffic)).toEqual([55, 100]);
      let maxOut = 0;
      let checked = 0;
      // Lanes a runner was asked to redeploy: the only ones that can run the new image.
      const redeployed = new Set<string>();
      const decide = (p: DispatchPayload) => {
        const lane = (p.args as { lane?: { id?: string } }).lane?.id;
        if (p.tool === "attach-queue-lane" && lane) redeployed.add(lane);
        return "pass" as const;
      };
      await drive(hh, decide, 600, () => {
        const lanes = hh.cp.core.lanes(MODEL);
        const serving = lanes.filter((l) => !l.excluded);
        maxOut = Math.max(maxOut, lanes.length - serving.length);
        // Capacity in service: baseline weights of the lanes in service carrying traffic
        // (a draining batch is at weight 0 before it is excluded).
        const inService = serving.filter((l) => l.weight > 0);
        const cap = (ls: typeof lanes) => ls.reduce((a, l) => a + (baseline[l.id] ?? 0), 0);
        const newLanes = inService.filter((l) => redeployed.has(l.id));
        const share = newLanes.reduce((a, l) => a + l.weight, 0);
        expect(share * cap(inService)).toBeLessThanOrEqual(cap(newLanes) * 100);
        checked++;
      });
      const rec = await getRecord(hh, id);
      expect(rec.state).toBe("succeeded");
      expect(checked).toBeGreaterThan(10);
      expect(maxOut).toBe(2);
      // Every lane back in service carrying its baseline weight: traffic followed the lanes.
      expect(
        Object.fromEntries(hh.cp.core.lanes(MODEL).map((l) => [l.id, [l.weight, l.excluded]])),
      ).toEqual(Object.fromEntries(Object.entries(baseline).map(([k, w]) => [k, [w, false]])));
      expect(await strategyInRecord(hh, id)).toBe("rolling");
    },
  );

  /** A lane stand-in that answers with its own id. */
  async function laneServer(id: string): Promise<string> {
    const server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(id);
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", () => ok()));
    closers.push(
      () =>
        new Promise<void>((ok) => {
          server.close(() => ok());
          server.closeAllConnections();
        }),
    );
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it.skipIf(skip)(
    "blue_green: green serves nothing until the switch; rollback is one switch back at the router",
    async () => {
      const cp = controlPlane(() => h, { "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 });
      h = await makeHarness({ kind, cp });
      const hh = h;
      const ups: Record<string, string> = {};
      for (const l of ["lane-a", "lane-b", "lane-c", "lane-d"]) ups[l] = await laneServer(l);
      const router: RouterProxyHandle = await startRouterProxy({
        lanes: (model) => hh.cp.core.lanes(model),
        upstream: (l) => ups[l] ?? null,
      });
      closers.push(() => router.close());
      /** Share of 20 requests through the router that green lanes answered. */
      const greenShare = async () => {
        let green = 0;
        for (let i = 0; i < 20; i++) {
          const res = await fetch(`${router.url}/route/${MODEL}/v1/generate`);
          const who = await res.text();
          if (who === "lane-c" || who === "lane-d") green++;
        }
        return green / 20;
      };

      const id = await createRelease(hh, blueGreenRecipe());
      const m0 = (await getRecord(hh, id)).manifest as unknown as Manifest;
      expect(m0.strategy).toBe("blue_green");
      const verify = m0.steps.find((s) => s.name === "verify_green");
      const failing = `sr_${id.slice(1)}_${verify?.index}_f`;
      const shares: number[] = [];
      let blueOut = false;
      await drive(
        hh,
        (p) => (p.step_run_id === failing ? "fail" : "pass"),
        600,
        async () => {
          shares.push(await greenShare());
          const blue = hh.cp.core
            .lanes(MODEL)
            .filter((l) => l.id === "lane-a" || l.id === "lane-b");
          if (blue.some((l) => l.excluded)) blueOut = true;
        },
      );
      shares.push(await greenShare());
      const rec = await getRecord(hh, id);
      expect(rec.state).toBe("rolled_back");
      // At the router: all or nothing, never a split; green served between the switch and the
      // switch back, and nothing after.
      expect(shares.every((s) => s === 0 || s === 1)).toBe(true);
      const changes = shares.filter((s, i) => i > 0 && s !== shares[i - 1]);
      expect(changes).toEqual([1, 0]);
      expect(shares.at(-1)).toBe(0);
      // The blue lanes were never taken out of service: warm, on the previous image.
      expect(blueOut).toBe(false);
      // One write switched back: the first traffic write of the undo moves everything to blue.
      const undo = rec.step_runs.filter((s) => s.direction === "bwd");
      const firstTraffic = undo.find((s) => m0.steps[s.step_index]?.name === "set_traffic");
      const switchBack = m0.steps[firstTraffic?.step_index ?? -1]?.backward;
      expect(switchBack?.kind === "control_plane" && switchBack.request).toMatchObject({
        op: "set_traffic",
        weights: { "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 },
      });
      expect(await strategyInRecord(hh, id)).toBe("blue_green");
    },
  );
  /** Blue lanes a, b (50/50), green c, d (0), a 2h rollback window; nothing fails. */
  function switchRecipe(): RecipeInput {
    const base = recipe(4, { policy: { rerun_window_minutes: 0, rollback_window: "2h" } });
    return {
      ...base,
      strategy: "blue_green",
      lanes: (base.lanes ?? []).map((l, i) => ({ ...l, weight: i < 2 ? 50 : 0 })),
      rollout: { waves: [{ lanes: ["lane-c", "lane-d"], max_unavailable: 2 }] },
    };
  }

  /** The release's JSON as `baton status` reads it. */
  interface Status {
    state: string;
    succeeded_at: number;
    old_environment: { lanes: string[]; image: string; state: string; until: number } | null;
    lifecycle_actions: { action: string; effect: string }[];
    lineage: { verb: string; of: string; switch_back?: boolean } | null;
  }
  const status = async (hh: Harness, id: string) =>
    (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as Status;

  /** The traffic writes the control plane applied (set_traffic, not replays), from `from` on. */
  const trafficWrites = (cp: MemoryControlPlane, from: number) =>
    cp.calls
      .slice(from)
      .filter(
        (c) =>
          c.method === "apply" &&
          c.op.op === "set_traffic" &&
          c.result.outcome === "ok" &&
          !c.result.replayed,
      );

  it.skipIf(skip)(
    "blue_green: the old environment stays warm until the window closes; rollback is one switch, checked at the router",
    async () => {
      const cp = controlPlane(() => h, { "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 });
      h = await makeHarness({ kind, cp });
      const hh = h;
      const r = switchRecipe();
      // Each lane stand-in answers with its id; the image it runs is the environment's.
      const imageOf: Record<string, string> = {
        "lane-a": r.previous_image as string,
        "lane-b": r.previous_image as string,
        "lane-c": r.image as string,
        "lane-d": r.image as string,
      };
      const ups: Record<string, string> = {};
      for (const l of Object.keys(imageOf)) ups[l] = await laneServer(l);
      const router: RouterProxyHandle = await startRouterProxy({
        lanes: (model) => hh.cp.core.lanes(model),
        upstream: (l) => ups[l] ?? null,
      });
      closers.push(() => router.close());
      /** Answers per image of 40 requests through the router. */
      const answers = async () => {
        const n: Record<string, number> = {};
        for (let i = 0; i < 40; i++) {
          const res = await fetch(`${router.url}/route/${MODEL}/v1/generate`);
          const img = imageOf[await res.text()] ?? "?";
          n[img] = (n[img] ?? 0) + 1;
        }
        return n;
      };

      const id = await createRelease(hh, r);
      await drive(hh);
      const done = await status(hh, id);
      expect(done.state).toBe("succeeded");
      // The candidate answers every request; blue is warm: in service at weight 0, on v6.
      expect(await answers()).toEqual({ [r.image as string]: 40 });
      const blue = hh.cp.core.lanes(MODEL).filter((l) => l.id === "lane-a" || l.id === "lane-b");
      expect(blue.map((l) => [l.weight, l.excluded])).toEqual([
        [0, false],
        [0, false],
      ]);
      const until = done.succeeded_at + 2 * HOUR;
      expect(done.old_environment).toEqual({
        lanes: ["lane-a", "lane-b"],
        image: r.previous_image,
        state: "warm",
        until,
      });
      const record = (await (await op(hh, "GET", `/v1/releases/${id}/record`)).json()) as {
        old_environment?: unknown;
      };
      expect(recordSchemaErrors(record)).toBeNull();
      expect(record.old_environment).toEqual({
        lanes: ["lane-a", "lane-b"],
        image: r.previous_image,
        warm_until: until,
      });
      // `baton status` prints it from the same JSON.
      const json = (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as RecordJson;
      expect(releaseSummary(json, hh.clock.now())).toContain(
        `old environment (lane-a, lane-b) warm on ${r.previous_image} until ${new Date(until).toISOString()} (weight 0, not stopped): \`baton rollback ${id}\` switches traffic back to it in one write`,
      );
      const offer = done.lifecycle_actions.find((a) => a.action === "rollback");
      expect(offer?.effect).toContain(
        "the runner's health check of each of its lanes, then one control-plane write moves every request back to it",
      );

      // Rollback inside the window: a switch back, one traffic write after the runner's health
      // check of each old-environment lane.
      hh.clock.t = done.succeeded_at + HOUR;
      // A blue lane on another image is no warm old environment: refused, nothing started.
      const count = (await hh.store.listReleases({ limit: 50 })).length;
      const other = `ghcr.io/acme/summarizer:v5@sha256:${"5a".repeat(32)}`;
      hh.cp.core.reportImage("lane-a", other);
      const no = await op(hh, "POST", `/v1/releases/${id}/rollback`, { reason: "v7 regressed" });
      expect(no.status).toBe(409);
      expect(((await no.json()) as { error: { message: string } }).error.message).toContain(
        `lane lane-a of the old environment runs ${other}, not ${r.previous_image}`,
      );
      expect((await hh.store.listReleases({ limit: 50 })).length).toBe(count);
      hh.cp.core.reportImage("lane-a", r.previous_image as string);
      const from = cp.calls.length;
      const rb = await op(hh, "POST", `/v1/releases/${id}/rollback`, { reason: "v7 regressed" });
      expect(rb.status, await rb.clone().text()).toBe(201);
      const back = ((await rb.json()) as { id: string }).id;
      const dispatched: string[] = [];
      const laneOf = (p: DispatchPayload) => (p.args as { lane?: { id?: string } }).lane?.id;
      await drive(hh, (p) => {
        dispatched.push(`${p.tool} ${laneOf(p)}`);
        return "pass";
      });
      const after = await status(hh, back);
      expect(after.state).toBe("succeeded");
      expect(after.lineage).toMatchObject({ verb: "rollback", of: id, switch_back: true });
      expect(dispatched).toEqual(["run-smoke lane-a", "run-smoke lane-b"]);
      const backRecord = (await (await op(hh, "GET", `/v1/releases/${back}/record`)).json()) as {
        lineage: { switch_back?: boolean };
      };
      expect(recordSchemaErrors(backRecord)).toBeNull();
      expect(backRecord.lineage.switch_back).toBe(true);
      const backRec = await getRecord(hh, back);
      const plan = backRec.manifest as unknown as Manifest;
      expect(plan.steps.map((s) => [s.name, s.kind])).toEqual([
        ["assert_smoke_passed", "runner"],
        ["assert_smoke_passed", "runner"],
        ["set_traffic", "control_plane"],
        ["assert_traffic_observed", "control_plane"],
      ]);
      expect(backRec.step_runs.map((s) => [s.step_index, s.direction, s.state])).toEqual([
        [0, "fwd", "succeeded"],
        [1, "fwd", "succeeded"],
        [2, "fwd", "succeeded"],
        [3, "fwd", "succeeded"],
      ]);
      const created = (await hh.store.getHistory(back, { limit: 8 })).find(
        (e) => e.kind === "created",
      );
      expect(created?.message).toContain("(4 steps)");
      // At the router: the previous image answers every request.
      expect(await answers()).toEqual({ [r.previous_image as string]: 40 });
      // Exactly one control-plane traffic change, to the blue lanes' weights, read back.
      const writes = trafficWrites(cp, from);
      expect(writes.map((w) => w.op)).toEqual([
        {
          op: "set_traffic",
          weights: { "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 },
          percent: 100,
        },
      ]);
      const reads = cp.calls.slice(from).filter((c) => c.op.op === "assert_traffic");
      expect(reads.length).toBeGreaterThan(0);
      expect(reads.at(-1)?.op).toMatchObject({ weights: { "lane-a": 50, "lane-b": 50 } });
      // A refusal of the switch back names what its rollback is: a switch back, not a redeploy.
      const abort = await op(hh, "POST", `/v1/releases/${back}/abort`, { reason: "x" });
      expect(abort.status).toBe(409);
      const refusal = ((await abort.json()) as { error: { message: string } }).error.message;
      expect(refusal).toContain(`it accepts rollback (a switch back to ${back}'s old environment`);
      expect(refusal).not.toContain("a new release of the previous manifest");
      // The rolled-back release is superseded: no second switch from it.
      expect((await status(hh, id)).old_environment).toBeNull();
      // The switch back is itself blue-green: green stayed warm on the candidate, so rolling
      // it back is one write to green again.
      expect((await status(hh, back)).old_environment).toMatchObject({
        lanes: ["lane-c", "lane-d"],
        image: r.image,
        state: "warm",
      });
      const from2 = cp.calls.length;
      const again = await op(hh, "POST", `/v1/releases/${back}/rollback`, { reason: "mistake" });
      expect(again.status, await again.clone().text()).toBe(201);
      dispatched.length = 0;
      await drive(hh, (p) => {
        dispatched.push(`${p.tool} ${laneOf(p)}`);
        return "pass";
      });
      expect(dispatched).toEqual(["run-smoke lane-c", "run-smoke lane-d"]);
      expect(await answers()).toEqual({ [r.image as string]: 40 });
      expect(trafficWrites(cp, from2)).toHaveLength(1);
    },
    120_000,
  );

  it.skipIf(skip)(
    "blue_green: a switch back whose old-environment lane fails its health check moves no traffic and says which lane and what to do",
    async () => {
      const cp = controlPlane(() => h, { "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 });
      h = await makeHarness({ kind, cp });
      const hh = h;
      const r = switchRecipe();
      const id = await createRelease(hh, r);
      await drive(hh);
      expect((await status(hh, id)).state).toBe("succeeded");
      const weights = () =>
        Object.fromEntries(hh.cp.core.lanes(MODEL).map((l) => [l.id, l.weight]));
      const served = weights();
      const from = cp.calls.length;
      const rb = await op(hh, "POST", `/v1/releases/${id}/rollback`, { reason: "v7 regressed" });
      expect(rb.status, await rb.clone().text()).toBe(201);
      const back = ((await rb.json()) as { id: string }).id;
      // lane-b's old container is down: its smoke step fails.
      await drive(hh, (p) =>
        p.tool === "run-smoke" && (p.args as { lane: { id: string } }).lane.id === "lane-b"
          ? "fail"
          : "pass",
      );
      const rec = await getRecord(hh, back);
      expect(rec.state).toBe("rolled_back");
      // No traffic moved: no write at the control plane, the candidate still serves.
      expect(trafficWrites(cp, from)).toEqual([]);
      expect(weights()).toEqual(served);
      const reason = (rec as unknown as { reason: string | null }).reason ?? "";
      expect(reason).toContain(
        "lane lane-b of the old environment failed its health check before the switch back, so no traffic moved",
      );
      expect(reason).toContain(`redeploy ${r.previous_image} on lane-b and roll back again`);
      // The release it undoes is still the one serving, and may be rolled back again.
      expect((await status(hh, id)).old_environment?.state).toBe("warm");
    },
    120_000,
  );

  it.skipIf(skip)(
    "blue_green: a switch back's record is what served after it: rolling back the release after it redeploys the image switched back to, not the one rolled away from",
    async () => {
      const cp = controlPlane(() => h, { "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 });
      h = await makeHarness({ kind, cp });
      const hh = h;
      const img = (v: string, hex: string) =>
        `ghcr.io/acme/summarizer:${v}@sha256:${hex.repeat(32)}`;
      const [v6, v7, v8, v9] = [img("v6", "06"), img("v7", "07"), img("v8", "08"), img("v9", "09")];
      const noWeights = (r: RecipeInput): RecipeInput => ({
        ...r,
        lanes: (r.lanes ?? []).map(({ weight: _w, ...l }) => l),
      });
      /** Images the runner was asked to put on lanes (attach-queue-lane), per release. */
      const deployed: string[] = [];
      const run = () =>
        drive(hh, (p) => {
          if (p.tool === "attach-queue-lane") deployed.push(String(p.args.image));
          return "pass";
        });
      const succeeded = async (id: string) => {
        await run();
        expect((await status(hh, id)).state).toBe("succeeded");
      };
      // r1: blue-green v7 onto c, d. r2: blue-green v8 onto a, b (c, d stay warm on v7).
      const r1 = await createRelease(hh, {
        ...noWeights(switchRecipe()),
        name: "bg-v7",
        image: v7,
        previous_image: v6,
      });
      await succeeded(r1);
      const r2 = await createRelease(hh, {
        ...noWeights(switchRecipe()),
        policy: { rerun_window_minutes: 0, rollback_window: "2h", drill_every_days: 7 },
        name: "bg-v8",
        image: v8,
        previous_image: v7,
        rollout: { waves: [{ lanes: ["lane-a", "lane-b"], max_unavailable: 2 }] },
      });
      await succeeded(r2);
      // r3: the switch back to c, d on v7.
      const sb = await op(hh, "POST", `/v1/releases/${r2}/rollback`, { reason: "v8 regressed" });
      expect(sb.status, await sb.clone().text()).toBe(201);
      const r3 = ((await sb.json()) as { id: string }).id;
      await succeeded(r3);
      // The switch back keeps the recipe's policies: its drill schedule among them. It is named
      // after the recipe it was admitted with (r1's, of v7: what serves after it), as its
      // history's created entry names it, not after r2's.
      expect((await getRecord(hh, r3)).manifest).toMatchObject({
        image: v7,
        drill_every_days: 7,
        recipe_name: "bg-v7",
      });
      const r3Created = (await hh.store.getHistory(r3, { limit: 8 })).find(
        (e) => e.kind === "created",
      );
      expect(r3Created?.message).toContain("from recipe bg-v7 ");
      // r4: a canary of v9 on all four lanes.
      const canary = recipe(4, { policy: { rerun_window_minutes: 0, rollback_window: "2h" } });
      const r4 = await createRelease(hh, { ...noWeights(canary), image: v9, previous_image: v7 });
      await succeeded(r4);
      deployed.length = 0;
      // Rolling r4 back runs r3's admitted manifest again: v7, what served before r4.
      const rb = await op(hh, "POST", `/v1/releases/${r4}/rollback`, { reason: "v9 regressed" });
      expect(rb.status, await rb.clone().text()).toBe(201);
      const r5 = ((await rb.json()) as { id: string; manifest_of: string }).id;
      await succeeded(r5);
      const plan = (await getRecord(hh, r5)).manifest as unknown as Manifest;
      expect(plan.image).toBe(v7);
      expect((await status(hh, r5)).lineage).toMatchObject({ verb: "rollback", of: r4 });
      expect(deployed.length).toBeGreaterThan(0);
      expect(new Set(deployed)).toEqual(new Set([v7]));
      const created = (await hh.store.getHistory(r5, { limit: 8 })).find(
        (e) => e.kind === "created",
      );
      expect(created?.message).toContain(`${r3}'s admitted manifest runs again (image ${v7})`);
    },
    120_000,
  );

  it.skipIf(skip)(
    "blue_green: a switch back without a recipe of its own: rolling back the release after it is refused 422, saying what happened and naming image",
    async () => {
      const cp = controlPlane(() => h, { "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 });
      h = await makeHarness({ kind, cp });
      const hh = h;
      const img = (v: string, hex: string) =>
        `ghcr.io/acme/summarizer:${v}@sha256:${hex.repeat(32)}`;
      const [v7, v8, v9] = [img("v7", "07"), img("v8", "08"), img("v9", "09")];
      const noWeights = (r: RecipeInput): RecipeInput => ({
        ...r,
        lanes: (r.lanes ?? []).map(({ weight: _w, ...l }) => l),
      });
      const succeeded = async (id: string) => {
        await drive(hh);
        expect((await status(hh, id)).state).toBe("succeeded");
      };
      // r1: blue-green v8 onto c, d; no release before it kept a recipe of v7.
      const r1 = await createRelease(hh, { ...switchRecipe(), image: v8, previous_image: v7 });
      await succeeded(r1);
      // r2: the switch back to a, b on v7, admitted with r1's recipe (which deploys v8).
      const sb = await op(hh, "POST", `/v1/releases/${r1}/rollback`, { reason: "v8 regressed" });
      expect(sb.status, await sb.clone().text()).toBe(201);
      const r2 = ((await sb.json()) as { id: string }).id;
      await succeeded(r2);
      // r3: a canary of v9 on all four lanes.
      const canary = recipe(4, { policy: { rerun_window_minutes: 0, rollback_window: "2h" } });
      const r3 = await createRelease(hh, { ...noWeights(canary), image: v9, previous_image: v7 });
      await succeeded(r3);
      const before = (await hh.store.listReleases({ limit: 50 })).length;
      const from = cp.calls.length;
      const rb = await op(hh, "POST", `/v1/releases/${r3}/rollback`, { reason: "v9 regressed" });
      expect(rb.status).toBe(422);
      const e = (
        (await rb.json()) as {
          error: { code: string; message: string; problems: { path: string; fix: string }[] };
        }
      ).error;
      expect(e.code).toBe("no_previous_manifest");
      const why = `${r3} cannot be rolled back: ${r2}, the release before it, is a switch back of ${r1} that put ${v7} back on the lanes without a recipe of its own`;
      expect(e.message).toContain(why);
      expect(e.message).toContain(`${r2}'s would deploy ${v8}, not ${v7}`);
      expect(e.message).toContain(`write a recipe of ${MODEL} whose \`image\` is ${v7}`);
      expect(e.problems).toEqual([
        expect.objectContaining({ path: "image", fix: expect.stringContaining(`image: ${v7}`) }),
      ]);
      // Nothing started, no traffic moved; the status says the same and offers no rollback.
      expect((await hh.store.listReleases({ limit: 50 })).length).toBe(before);
      expect(trafficWrites(cp, from)).toEqual([]);
      const st = (await status(hh, r3)) as Status & { lifecycle_note: string | null };
      expect(st.lifecycle_actions.map((a) => a.action)).not.toContain("rollback");
      expect(st.lifecycle_note).toContain(why);
      // Rolling back r2, which r3 superseded, does not send the operator to r3's refused
      // rollback: it names what r3 accepts instead.
      const old = await op(hh, "POST", `/v1/releases/${r2}/rollback`, { reason: "again" });
      expect(old.status).toBe(409);
      const oldText = await old.text();
      expect(oldText).toContain(`act on ${r3} instead: ${why}`);
      expect(oldText).not.toContain(`roll back ${r3} instead`);
    },
    120_000,
  );

  /**
   * A blue-green release driven to success on four lanes (control plane `cp`) whose machines
   * (`machines`) all ran the previous image (`blue`) before it, the candidate `green`; `answer`
   * runs each runner step on them and passes.
   */
  const succeededBlueGreen = async () => {
    const cp = controlPlane(() => h, { "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 });
    const machines = new Machines();
    h = await makeHarness({ kind, cp, targetProbe: machines });
    const hh = h;
    const r = switchRecipe();
    const blue = r.previous_image as string;
    for (const l of ["lane-a", "lane-b", "lane-c", "lane-d"]) machines.runs.set(l, blue);
    const id = await createRelease(hh, r);
    const answer = (p: DispatchPayload) => {
      machines.step(p);
      return "pass" as const;
    };
    await drive(hh, answer);
    /** `baton verify` of release `of`, driven until the reading is judged: its state and reading. */
    const verify = async (of: string) => {
      machines.asked.length = 0;
      const asked = await op(hh, "POST", `/v1/releases/${of}/verify`, {});
      expect(asked.status, await asked.clone().text()).toBe(202);
      await drive(hh, answer);
      return (await (await op(hh, "GET", `/v1/releases/${of}`)).json()) as {
        state: string;
        verification: VerificationJson | null;
      };
    };
    return { hh, cp, machines, blue, green: r.image as string, id, answer, verify };
  };

  it.skipIf(skip)(
    "blue_green: verify of a switch back reads the old environment's lanes, now serving, at their machines",
    async () => {
      const { hh, machines, blue, id, answer, verify: reading } = await succeededBlueGreen();
      expect((await status(hh, id)).state).toBe("succeeded");
      const sb = await op(hh, "POST", `/v1/releases/${id}/rollback`, { reason: "regressed" });
      expect(sb.status, await sb.clone().text()).toBe(201);
      const back = ((await sb.json()) as { id: string }).id;
      await drive(hh, answer);
      expect((await status(hh, back)).state).toBe("succeeded");

      /** `baton verify` of the switch back, driven until the reading is judged. */
      const verify = async () => {
        const rel = await reading(back);
        expect(rel.state).toBe("succeeded");
        return rel.verification;
      };
      const v = await verify();
      expect(v).toMatchObject({ state: "passed", desired_from: "manifest" });
      // The lanes now serving were asked at their machines for the image they serve.
      expect(machines.asked.sort()).toEqual([`lane-a ${blue}`, `lane-b ${blue}`]);
      for (const lane of ["lane-a", "lane-b"]) {
        const l = v?.lanes.find((x) => x.lane === lane);
        expect(l?.target_source).toBe("target_probe");
        expect(l?.fields.find((f) => f.field === "image")).toMatchObject({
          desired: blue,
          observed: blue,
          ok: true,
        });
      }
      // lane-b's old container is gone: verify says so, naming the lane and the image.
      machines.runs.set("lane-b", "gone");
      const again = await verify();
      expect(again?.state).toBe("failed");
      expect(again?.summary).toContain(`lane lane-b: image desired ${blue} is not running`);
    },
    120_000,
  );

  it.skipIf(skip)(
    "blue_green: verify of the succeeded release reads the warm old environment at the control plane, not at its machines",
    async () => {
      const { hh, cp, machines, green, id, verify: reading } = await succeededBlueGreen();
      expect((await status(hh, id)).old_environment?.state).toBe("warm");
      const verify = async () => (await reading(id)).verification;
      const v = await verify();
      expect(v?.state).toBe("passed");
      // The blue lanes are judged at the control plane: listed, weight 0, not excluded.
      for (const lane of ["lane-a", "lane-b"]) {
        const fields = v?.lanes.find((x) => x.lane === lane)?.fields ?? [];
        expect(fields.find((f) => f.field === "weight")).toMatchObject({ desired: 0, ok: true });
        expect(fields.find((f) => f.field === "excluded")).toMatchObject({
          desired: false,
          ok: true,
        });
        expect(fields.find((f) => f.field === "image")?.ok).toBeNull();
      }
      // Only the green lanes' machines are asked; a stopped blue container goes unseen here
      // (the switch back's own health check finds it).
      expect(machines.asked.sort()).toEqual([`lane-c ${green}`, `lane-d ${green}`]);
      machines.runs.set("lane-a", "gone");
      expect((await verify())?.state).toBe("passed");
      // A blue lane excluded at the control plane is no warm old environment: verify fails.
      cp.seed([
        { ...(cp.lane("lane-a") as NonNullable<ReturnType<typeof cp.lane>>), excluded: true },
      ]);
      const failed = await verify();
      expect(failed?.state).toBe("failed");
      expect(failed?.summary).toContain("lane lane-a: excluded marker desired false observed true");
    },
    120_000,
  );

  it.skipIf(skip)(
    "blue_green: once the rollback window closed the old environment is retired and rollback is refused, saying why and what to do",
    async () => {
      const cp = controlPlane(() => h, { "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 });
      h = await makeHarness({ kind, cp });
      const hh = h;
      const id = await createRelease(hh, switchRecipe());
      await drive(hh);
      const done = await status(hh, id);
      expect(done.state).toBe("succeeded");
      const closes = done.succeeded_at + 2 * HOUR;
      hh.clock.t = closes - 1;
      expect((await status(hh, id)).old_environment?.state).toBe("warm");
      hh.clock.t = closes;
      const late = await status(hh, id);
      expect(late.old_environment).toMatchObject({ state: "retired", until: closes });
      expect(late.lifecycle_actions.map((a) => a.action)).not.toContain("rollback");
      const json = (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as RecordJson;
      expect(releaseSummary(json, hh.clock.now())).toContain(
        `old environment (lane-a, lane-b) retired at ${new Date(closes).toISOString()}, when the rollback window closed: it is no longer a way back`,
      );
      const before = (await hh.store.listReleases({ limit: 50 })).length;
      const from = cp.calls.length;
      const rb = await op(hh, "POST", `/v1/releases/${id}/rollback`, { reason: "late" });
      expect(rb.status).toBe(409);
      const e = ((await rb.json()) as { error: { code: string; message: string } }).error;
      expect(e.code).toBe("rollback_window_closed");
      expect(e.message).toContain(
        `closed at ${new Date(closes).toISOString()}, and its old environment (lane-a, lane-b on`,
      );
      expect(e.message).toContain("Roll forward instead");
      expect((await hh.store.listReleases({ limit: 50 })).length).toBe(before);
      expect(trafficWrites(cp, from)).toEqual([]);
    },
    120_000,
  );
});
