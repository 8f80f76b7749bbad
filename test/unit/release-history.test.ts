/**
 * The history a release is created with, an owner's acceptance entry and the request count of
 * a bounded refusal row: pure domain text and data, checked without a store.
 */
import { describe, expect, it } from "vitest";
import type { AdmissionReport } from "../../engine/src/domain/admission.ts";
import type { PrerequisiteReport } from "../../engine/src/domain/prerequisites.ts";
import {
  ACCEPT_KIND,
  acceptanceEntry,
  admissionMessage,
  type CreationFacts,
  creationHistory,
  withRequests,
} from "../../engine/src/domain/release-history.ts";
import type { ObservedBaseline } from "../../engine/src/domain/types.ts";

const off: AdmissionReport = { ok: true, mode: "off" } as unknown as AdmissionReport;
const enforced = {
  ok: true,
  mode: "enforce",
  rollback: true,
  checks: [
    { check: "signature", outcome: "pass" },
    { check: "freshness", outcome: "skip" },
  ],
} as unknown as AdmissionReport;

const facts = (over: Partial<CreationFacts> = {}): CreationFacts => ({
  release: { id: "r7", manifest_digest: "abc" },
  actor: "alice",
  recipe: { name: "svc" },
  admitted: { recipe_name: "svc" },
  plan: {
    model: "m",
    image: "img@sha256:new",
    previous_image: "img@sha256:old",
    steps: [{}, {}, {}] as never,
  },
  admission: off,
  signer: null,
  now: 1000,
  ...over,
});

describe("creation history", () => {
  it("a plain start: created (with the recipe kept) and admission", () => {
    const h = creationHistory(facts());
    expect(h.map((e) => e.kind)).toEqual(["created", "admission"]);
    expect(h[0]).toMatchObject({
      release_id: "r7",
      at: 1000,
      outcome: "accepted",
      step_run_id: null,
      message: "[engine] release r7 created by alice from recipe svc (3 steps)",
      data: { actor: "alice", manifest_digest: "abc", hold: false, recipe: { name: "svc" } },
    });
    expect(h[1]?.message).toBe("[admission] off (BATON_ADMISSION=off): no check ran");
  });

  it("counts the plan's steps, not the recipe's: a switch back's plan is its own", () => {
    const plan = { ...facts().plan, steps: [{}, {}] as never };
    const h = creationHistory(
      facts({ plan, lineage: { verb: "rollback", of: "r6", switch_back: true } }),
    );
    expect(h[0]?.message).toMatch(
      /^\[engine\] release r7 created by alice from recipe svc \(2 steps\); a rollback of r6 by a switch back to r6's old environment/,
    );
  });

  it("held, dark, a rollback's lineage, bundles, prerequisites and the observed baseline", () => {
    const prerequisites = {
      ok: true,
      at: 1,
      image: "img@sha256:old",
      checks: [],
      asked_by: "runner",
    } as PrerequisiteReport;
    const baseline: ObservedBaseline = {
      read_at: 1,
      recipe_manifest_digest: "abc",
      lanes: [
        {
          id: "a",
          weight: 60,
          excluded: false,
          advertised: true,
          capabilities: ["x"],
          image: "i@1",
        },
        { id: "b", weight: 0, excluded: true, advertised: false, capabilities: [], image: null },
      ],
    } as unknown as ObservedBaseline;
    const h = creationHistory(
      facts({
        hold: true,
        exposure: "dark",
        lineage: { verb: "rollback", of: "r6", manifest_of: "r5" },
        bundle: { b: 1 },
        attestations: [{ a: 1 }],
        admission: enforced,
        signer: "key k1",
        prerequisites,
        baseline,
      }),
    );
    expect(h.map((e) => e.kind)).toEqual(["created", "admission", "prerequisites", "baseline"]);
    expect(h[0]?.message).toBe(
      "[engine] release r7 created by alice from recipe svc (3 steps); an explicit rollback of r6: r5's admitted manifest runs again (image img@sha256:new), its undo restores img@sha256:old; held pending until resumed; deployed dark: it waits at 0% exposure before its first traffic write until released",
    );
    expect(h[0]?.data).toMatchObject({
      hold: true,
      exposure: "dark",
      lineage: { verb: "rollback", of: "r6" },
      bundle: { b: 1 },
      attestations: [{ a: 1 }],
    });
    expect(h[1]?.message).toBe(
      "[admission] passed 1 checks (signature pass, freshness skip); signed by key k1; explicit rollback",
    );
    expect(h[2]?.message).toMatch(
      /^\[engine\] rollback prerequisites: each lane's machine is asked by a read-only runner step \(inspect-lane\)/,
    );
    expect(h[3]?.message).toBe(
      "[engine] observed baseline of model m at the control plane: a 60% advertising x running i@1, b 0% excluded running an image the control plane does not report; compensation restores exactly this (a lane whose image is unknown gets img@sha256:old)",
    );
  });

  it("a roll forward's lineage, and an unsigned enforce report names nobody", () => {
    const h = creationHistory(facts({ lineage: { verb: "roll_forward", of: "r6" } }));
    expect(h[0]?.message).toContain(
      "; a roll forward past r6 (image img@sha256:new, no going back to r6's manifest)",
    );
    expect(admissionMessage({ ...enforced, rollback: false } as AdmissionReport, null)).toBe(
      "[admission] passed 1 checks (signature pass, freshness skip); signed by nobody",
    );
  });
});

describe("acceptance and refusal rows", () => {
  it("an acceptance names who, the state, the digest, the expiry and the note", () => {
    const e = acceptanceEntry(
      { id: "r3", state: "succeeded" },
      {
        by: "bob",
        digest: "0123456789abcdef",
        expires_at: Date.UTC(2027, 0, 1),
        note: "ok",
        now: 5,
      },
    );
    expect(e).toMatchObject({ release_id: "r3", at: 5, kind: ACCEPT_KIND, outcome: "accepted" });
    expect(e.message).toBe(
      "[engine] bob accepted the final state of r3 (succeeded, record sha256:0123456789ab…) until 2027-01-01T00:00:00.000Z: ok",
    );
    expect(e.data).toEqual({
      actor: "bob",
      expires_at: Date.UTC(2027, 0, 1),
      note: "ok",
      record_digest: "0123456789abcdef",
    });
    const bare = acceptanceEntry(
      { id: "r3", state: "rolled_back" },
      { by: "bob", digest: "ff", expires_at: null, note: "", now: 5 },
    );
    expect(bare.message).toBe(
      "[engine] bob accepted the final state of r3 (rolled_back, record sha256:ff…)",
    );
  });

  it("a refusal row carries how many requests it stands for, whatever its data's shape", () => {
    const h = {
      release_id: "r1",
      at: 0,
      kind: "callback",
      step_run_id: "r1-s1",
      outcome: "refused" as const,
      message: "m",
    };
    expect(withRequests({ ...h, data: { a: 1 } }, 3).data).toEqual({ a: 1, requests: 3 });
    expect(withRequests({ ...h, data: "x" }, 2).data).toEqual({ value: "x", requests: 2 });
    expect(withRequests({ ...h, data: null }, 1).data).toEqual({ value: null, requests: 1 });
  });
});
