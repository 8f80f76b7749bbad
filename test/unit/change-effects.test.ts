/**
 * What a committed change deserves besides its transition's effects (notices per channel, the
 * deployment status) and what a drift deserves (its notices), decided by pure domain code from
 * the release before and after, the event and the engine's settings: no store, no service.
 */
import { describe, expect, it } from "vitest";
import {
  changeDeploymentStatus,
  changeEffects,
  changeNotices,
  driftNotices,
  type EffectsPolicy,
  NO_EFFECTS_POLICY,
} from "../../engine/src/domain/change-effects.ts";
import type { Release } from "../../engine/src/domain/types.ts";
import { runningRecord } from "../support/dashboard-fixtures.ts";

const was = (): Release => ({ ...runningRecord().release, uid: "u1" }) as Release;
const now = (state: Release["state"], extra: Partial<Release> = {}): Release =>
  ({ ...was(), state, resource_version: 7, ...extra }) as Release;

const everything: EffectsPolicy = {
  notify: {
    channels: ["webhook", "slack"],
    events: new Set(["succeeded", "failed", "drift"]),
    url: "https://baton.example",
  },
  deployments: { environment: "production", ref: "main", url: "https://baton.example" },
};

describe("what a change deserves", () => {
  it("nothing when notices and deployments are off", () => {
    expect(changeEffects(was(), now("succeeded"), { type: "start" }, 5, NO_EFFECTS_POLICY)).toEqual(
      [],
    );
  });

  it("one notice per configured channel, then the deployment status, keyed by the new version", () => {
    const b = was();
    const out = changeEffects(b, now("succeeded"), { type: "start" }, 1234, everything);
    const rows = out.map((e) =>
      e.type === "notify"
        ? [e.type, e.channel, e.delivery]
        : e.type === "deployment"
          ? [e.type, null, e.delivery]
          : [e.type],
    );
    expect(rows).toEqual([
      ["notify", "webhook", `${b.id}.u1.v7.succeeded.webhook`],
      ["notify", "slack", `${b.id}.u1.v7.succeeded.slack`],
      ["deployment", null, `${b.id}.u1.v7.success`],
    ]);
    const notice = out[0]?.type === "notify" ? out[0].notice : null;
    expect(notice?.kind).toBe("succeeded");
    expect(notice?.url).toBe(`https://baton.example/releases/${b.id}`);
    expect(notice?.at).toBe(1234);
    const status = out[2]?.type === "deployment" ? out[2].report : null;
    expect(status).toMatchObject({ state: "success", environment: "production", at: 1234 });
    expect(status?.log_url).toBe(`https://baton.example/releases/${b.id}`);
  });

  it("no notice for a kind the engine does not send, nor for an unchanged state", () => {
    expect(changeNotices(was(), now("aborted"), { type: "start" }, 0, everything)).toEqual([]);
    expect(changeNotices(was(), now("running"), { type: "start" }, 0, everything)).toEqual([]);
    expect(changeDeploymentStatus(was(), now("running"), null, 0, everything)).toEqual([]);
  });

  it("a recipe's notify narrows the kinds and the channels", () => {
    const manifest = {
      ...was().manifest,
      notify: { on: ["aborted" as const], channels: ["slack" as const] },
    };
    const b = { ...was(), manifest } as Release;
    const a = { ...now("aborted"), manifest } as Release;
    const out = changeNotices(b, a, { type: "start" }, 0, everything);
    expect(out.map((e) => [e.channel, e.notice.kind])).toEqual([["slack", "aborted"]]);
    const ok = { ...now("succeeded"), manifest } as Release;
    expect(changeNotices(b, ok, { type: "start" }, 0, everything)).toEqual([]);
  });

  it("an operator's abort into compensation is not a failure notice", () => {
    const abort = { type: "abort", actor: "alice", reason: "why" } as const;
    expect(changeNotices(was(), now("compensating"), abort, 0, everything)).toEqual([]);
    expect(
      changeNotices(was(), now("compensating"), { type: "start" }, 0, everything),
    ).toHaveLength(2);
  });

  it("a drift's notices: one per channel, keyed by the time, only when drift is sent", () => {
    const r = was();
    const out = driftNotices(
      r,
      "[drift] model m: lane-1 weight desired 10 observed 0",
      99,
      everything,
    );
    expect(out.map((e) => e.delivery)).toEqual([
      `${r.id}.u1.drift.99.webhook`,
      `${r.id}.u1.drift.99.slack`,
    ]);
    expect(out[0]?.notice.summary).toContain("model m: lane-1 weight desired 10 observed 0");
    const quiet = { ...everything, notify: { ...everything.notify!, events: new Set<never>() } };
    expect(driftNotices(r, "[drift] x", 99, quiet)).toEqual([]);
    expect(driftNotices(r, "[drift] x", 99, NO_EFFECTS_POLICY)).toEqual([]);
  });
});
