import { afterEach, describe, expect, it } from "vitest";
import type { KillSwitch } from "../../engine/src/domain/kill-switch.ts";
import {
  type Harness,
  OPERATOR,
  op,
  STORE_KINDS,
  skipStore,
} from "../integration/service-harness.ts";
import { baton } from "./run-baton.ts";
import { type Served, served } from "./served-engine.ts";

const noStack = (s: string) => expect(s).not.toMatch(/\n\s+at .+:\d+:\d+/);

/** An engine whose control plane holds three lanes of `ranker` and one of another model. */
const servedWithLanes = (kind: "sqlite" | "postgres") =>
  served(kind, "baton-cli-kill-switch-", (h) =>
    h.cp.core.seed([
      {
        id: "ranker-a",
        model: "ranker",
        weight: 50,
        capabilities: ["chat", "search"],
        advertised: true,
      },
      { id: "ranker-b", model: "ranker", weight: 50, capabilities: ["chat"], advertised: true },
      { id: "ranker-c", model: "ranker", weight: 0, capabilities: ["search"], advertised: true },
      { id: "other-a", model: "other", weight: 100, capabilities: ["chat"], advertised: true },
    ]),
  );

/** Capabilities per lane as the control-plane stand-in holds them now. */
function atControlPlane(h: Harness): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const id of ["ranker-a", "ranker-b", "ranker-c", "other-a"])
    out[id] = h.cp.lane(id)?.capabilities ?? [];
  return out;
}

const SEEDED = {
  "ranker-a": ["chat", "search"],
  "ranker-b": ["chat"],
  "ranker-c": ["search"],
  "other-a": ["chat"],
};

describe.each(STORE_KINDS)("baton kill-switch on %s", (kind) => {
  const skip = skipStore(kind);
  let s: Served | null = null;
  afterEach(async () => {
    await s?.close();
    s = null;
  });
  const env = () => ({ BATON_ENGINE_URL: s?.url, BATON_TOKEN: OPERATOR, USER: "dana" });

  it.skipIf(skip)(
    "a kill switch withdraws and restores one capability on every lane, read at the control plane",
    async () => {
      s = await servedWithLanes(kind);
      const { h } = s;
      const dec = await op(h, "POST", "/v1/incidents", {
        severity: "sev2",
        summary: "ranker chat leaks",
        models: ["ranker"],
        commander: "maria",
      });
      expect(dec.status).toBe(201);

      const off = await baton(
        ["kill-switch", "ranker", "chat", "--reason", "chat answers leak PII"],
        env(),
      );
      expect(off.code, off.stderr).toBe(0);
      expect(off.stdout).toContain(
        "kill switch ks1: withdrew chat from ranker-a, ranker-b of ranker",
      );
      expect(off.stdout).toContain("operator:dana: chat answers leak PII");
      expect(off.stdout).toContain("in the timeline of inc1");
      // At the control plane: chat is gone from every lane of ranker, nothing else moved.
      expect(atControlPlane(h)).toEqual({
        "ranker-a": ["search"],
        "ranker-b": [],
        "ranker-c": ["search"],
        "other-a": ["chat"],
      });
      expect(h.cp.weights("ranker")).toEqual({ "ranker-a": 50, "ranker-b": 50, "ranker-c": 0 });

      // The record: who, why, when, the lanes before and after as the control plane answered.
      const list = await op(h, "GET", "/v1/models/ranker/kill-switch");
      const [ks] = ((await list.json()) as { kill_switches: KillSwitch[] }).kill_switches;
      expect(ks?.state).toBe("withdrawn");
      expect(ks?.lanes).toEqual(["ranker-a", "ranker-b"]);
      const w = ks?.actions[0];
      expect(w).toMatchObject({
        kind: "withdraw",
        actor: "operator:dana",
        reason: "chat answers leak PII",
        at: h.clock.now(),
        verified: true,
        incidents: ["inc1"],
      });
      expect(w?.before.map((l) => l.capabilities)).toEqual([
        ["chat", "search"],
        ["chat"],
        ["search"],
      ]);
      expect(w?.after?.map((l) => l.capabilities)).toEqual([["search"], [], ["search"]]);
      expect(w?.writes.map((x) => x.operation_key)).toEqual([
        "ks1:withdraw:g1:ranker-a",
        "ks1:withdraw:g1:ranker-b",
      ]);

      // Withdrawn already: refused, naming the way back.
      const again = await baton(["kill-switch", "ranker", "chat", "--reason", "x"], env());
      expect(again.code).toBe(1);
      expect(again.stderr).toContain("already withdrawn by kill switch ks1");
      expect(again.stderr).toContain("baton kill-switch ranker chat --restore");

      h.clock.advance(60_000);
      const on = await baton(
        [
          "kill-switch",
          "ranker",
          "chat",
          "--restore",
          "--reason",
          "fix deployed",
          "--actor",
          "lee",
        ],
        env(),
      );
      expect(on.code, on.stderr).toBe(0);
      expect(atControlPlane(h)).toEqual(SEEDED);
      const [ks2] = (
        (await (await op(h, "GET", "/v1/models/ranker/kill-switch")).json()) as {
          kill_switches: KillSwitch[];
        }
      ).kill_switches;
      expect(ks2?.state).toBe("restored");
      expect(ks2?.actions[1]).toMatchObject({
        kind: "restore",
        generation: 2,
        actor: "operator:lee",
        reason: "fix deployed",
        at: h.clock.now(),
        verified: true,
      });
      const noneLeft = await baton(
        ["kill-switch", "ranker", "chat", "--restore", "--reason", "x"],
        env(),
      );
      expect(noneLeft.code).toBe(1);
      expect(noneLeft.stderr).toContain("no kill switch of capability chat on ranker is in force");

      // The incident's timeline holds both actions with who.
      const show = await baton(["incident", "show", "inc1"], env());
      expect(show.stdout).toMatch(
        /operator:dana: kill switch ks1: withdrew capability chat of ranker on ranker-a, ranker-b \(verified at the control plane\): chat answers leak PII/,
      );
      expect(show.stdout).toMatch(
        /operator:lee: kill switch ks1: restored capability chat of ranker on ranker-a, ranker-b \(verified at the control plane\): fix deployed/,
      );
      // A kill switch is recovery: never frozen by an incident that does not name the model,
      // and not written to that incident's timeline.
      const other = await baton(["kill-switch", "other", "chat", "--reason", "contain"], env());
      expect(other.code, other.stderr).toBe(0);
      expect(h.cp.lane("other-a")?.capabilities).toEqual([]);
      expect(other.stdout).not.toContain("in the timeline of");
      // And the dashboard shows the switch.
      const page = await h.engine.app.request("/kill-switches", {
        headers: { authorization: `Bearer ${OPERATOR}` },
      });
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain("ks1");
      expect(html).toContain("fix deployed");
    },
  );

  it.skipIf(skip)(
    "a write the control plane acknowledges but drops fails the read-back; a second withdraw finishes it",
    async () => {
      s = await servedWithLanes(kind);
      const { h } = s;
      h.cp.faults.arm({ mode: "lie", match: "ks1:withdraw:g1:ranker-b" });
      const off = await baton(["kill-switch", "ranker", "chat", "--reason", "leak"], env());
      expect(off.code).toBe(1);
      expect(off.stdout).toContain(
        "not verified: ranker-b still advertise chat at the control plane",
      );
      expect(h.cp.lane("ranker-b")?.capabilities).toEqual(["chat"]);
      const again = await baton(["kill-switch", "ranker", "chat", "--reason", "again"], env());
      expect(again.code, again.stdout + again.stderr).toBe(0);
      expect(again.stdout).toContain("kill switch ks1: withdrew chat from ranker-b of ranker");
      expect(atControlPlane(h)).toMatchObject({ "ranker-a": ["search"], "ranker-b": [] });
    },
  );

  it.skipIf(skip)(
    "without $USER, the restore command it suggests carries --actor and runs as written",
    async () => {
      s = await servedWithLanes(kind);
      const noUser = { ...env(), USER: undefined, LOGNAME: undefined };
      const off = await baton(
        ["kill-switch", "ranker", "chat", "--reason", "leak", "--actor", "dana"],
        noUser,
      );
      expect(off.code, off.stderr).toBe(0);
      const line = /restore it with: (baton .*)/.exec(off.stdout)?.[1];
      expect(line).toBe('baton kill-switch ranker chat --restore --reason "<why>" --actor dana');
      // The engine's refusal of a second withdraw suggests the same command, with --actor.
      const twice = await baton(
        ["kill-switch", "ranker", "chat", "--reason", "again", "--actor", "dana"],
        noUser,
      );
      expect(twice.code).toBe(1);
      expect(twice.stderr).toContain(`restore it with: ${line}`);
      const args = (line ?? "").replace('"<why>"', "fixed").split(" ").slice(1);
      const on = await baton(args, noUser);
      expect(on.code, on.stderr).toBe(0);
      expect(atControlPlane(s.h)).toEqual(SEEDED);
      // The example a missing --reason gives names --actor too.
      const noReason = await baton(["kill-switch", "ranker", "chat"], noUser);
      expect(noReason.code).toBe(2);
      expect(noReason.stderr).toContain('--reason "chat answers leak PII" --actor <name>');
      // With $USER set, the suggestion stays short.
      const withUser = await baton(["kill-switch", "ranker", "chat", "--reason", "leak"], env());
      expect(withUser.stdout).toContain(
        'restore it with: baton kill-switch ranker chat --restore --reason "<why>"\n',
      );
    },
  );

  it.skipIf(skip)("bad input: every refusal names the field or flag and the fix", async () => {
    s = await servedWithLanes(kind);
    const { h } = s;
    const noReason = await baton(["kill-switch", "ranker", "chat"], env());
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toContain("--reason is required");
    const badCap = await baton(["kill-switch", "ranker", "ch at", "--reason", "x"], env());
    expect(badCap.code).toBe(2);
    expect(badCap.stderr).toContain('"ch at" is not a capability name');
    const model = await baton(["kill-switch", "rankr", "chat", "--reason", "x"], env());
    expect(model.code).toBe(1);
    expect(model.stderr).toContain("model rankr has no lane at the control plane");
    const cap = await baton(["kill-switch", "ranker", "translate", "--reason", "x"], env());
    expect(cap.code).toBe(1);
    expect(cap.stderr).toContain("no lane of ranker advertises capability translate");
    expect(cap.stderr).toContain("its lanes advertise chat, search");
    noStack(noReason.stderr + badCap.stderr + model.stderr + cap.stderr);

    const empty = await op(h, "POST", "/v1/models/ranker/kill-switch", { capability: "chat" });
    expect(empty.status).toBe(400);
    expect(await empty.text()).toContain("reason");
    const blank = await op(h, "POST", "/v1/models/ranker/kill-switch", {
      capability: "chat",
      reason: "  ",
      actor: "dana",
    });
    expect(blank.status).toBe(400);
    expect(await blank.text()).toContain("must say why");
    const anon = await op(h, "POST", "/v1/models/ranker/kill-switch", {
      capability: "chat",
      reason: "leak",
    });
    expect(anon.status).toBe(400);
    expect(await anon.text()).toContain("body.actor");
    const viewer = await h.engine.app.request("/v1/models/ranker/kill-switch", {
      method: "POST",
      body: JSON.stringify({ capability: "chat", reason: "leak", actor: "dana" }),
    });
    expect(viewer.status).toBe(401);
    // Nothing was written at the control plane by any refusal.
    expect(atControlPlane(h)).toEqual(SEEDED);
    expect(h.cp.history()).toEqual([]);
  });
});
