/**
 * Mixed-version conformance checks (docs/recipes.md "Conformance checks") on both stores, with
 * the reference router's traffic generator over the control-plane double the engine writes to
 * and a fake clock. A passing pair (old reader × new writer, new reader × old writer) runs
 * through the runner protocol before anything else and lets the release reach traffic; one
 * failing check stops the release before any exposure: the router served the candidate 0
 * requests, the control plane saw no write, no lane was deployed, and the reason names the
 * check and what to do. The record carries each check's outcome.
 */
import { expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  compensationReason,
  gatedRecipe,
  IMAGE_UNDER_TEST,
  MODEL,
  type Rig,
  runner,
} from "../support/gate-rig.ts";
import { drive, op } from "./service-harness.ts";
import { describeEachRig } from "./store-suites.ts";

const BASELINE = { "lane-a": 34, "lane-b": 33, "lane-c": 33 };

/** The rig's three-wave recipe, ungated, with a conformance pair and no re-run window. */
function recipe(): RecipeInput {
  const { analysis: _none, ...r } = gatedRecipe() as RecipeInput & { analysis?: unknown };
  return {
    ...r,
    conformance: [
      { name: "old-reader-new-writer", reader: "old", writer: "new", tool: "run-smoke" },
      {
        name: "new-reader-old-writer",
        reader: "new",
        writer: "old",
        tool: "inspect-lane",
        args: { table: "sessions" },
      },
    ],
    policy: { steps: { assert_conformance_passed: { rerun_window_minutes: 0 } } },
  } as RecipeInput;
}

async function startRelease(g: Rig, r: RecipeInput): Promise<string> {
  const res = await op(g.h, "POST", "/v1/releases", r);
  expect(res.status, await res.clone().text()).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

/** Requests the router served from the candidate image, and from every other image. */
function served(g: Rig): { candidate: number; control: number } {
  let candidate = 0;
  let control = 0;
  for (const c of g.traffic.snapshot()) {
    if (c.image === IMAGE_UNDER_TEST) candidate += c.requests;
    else control += c.requests;
  }
  return { candidate, control };
}

/**
 * Drives the release with the gate rig's runner (a lane's image follows its attach and
 * restore steps), answering conformance dispatches with `verdict(name)`; the router sends 200
 * units every round. Returns the conformance dispatches, in order.
 */
async function driveWith(
  g: Rig,
  verdict: (name: string) => "pass" | "fail",
): Promise<{ conformance: DispatchPayload[]; all: DispatchPayload[] }> {
  const conformance: DispatchPayload[] = [];
  const all: DispatchPayload[] = [];
  const base = runner(g);
  await drive(
    g.h,
    (p) => {
      all.push(p);
      const c = (p.args as { conformance?: { name: string } }).conformance;
      if (c) {
        conformance.push(p);
        return verdict(c.name);
      }
      return base(p);
    },
    600,
    () => g.traffic.send(200),
  );
  return { conformance, all };
}

async function recordOf(g: Rig, id: string) {
  const res = await op(g.h, "GET", `/v1/releases/${id}/record`);
  expect(res.status).toBe(200);
  return (await res.json()) as {
    evidence: { conformance?: { name: string; outcome: string; message: string | null }[] };
  };
}

describeEachRig("mixed-version conformance on %s", ({ skip, open }) => {
  it.skipIf(skip)(
    "a passing pair runs before any lane changes and the release reaches traffic",
    async () => {
      const g = await open();
      const id = await startRelease(g, recipe());
      const { conformance, all } = await driveWith(g, () => "pass");
      expect((await g.h.store.getRelease(id))?.state).toBe("succeeded");
      // Both checks ran first, through the runner protocol, with both images and their sides.
      expect(all.slice(0, 2)).toEqual(conformance);
      expect(conformance.map((p) => [p.tool, p.args.conformance])).toEqual([
        [
          "run-smoke",
          expect.objectContaining({ reader: "old", writer: "new", writer_image: IMAGE_UNDER_TEST }),
        ],
        [
          "inspect-lane",
          expect.objectContaining({
            reader: "new",
            writer: "old",
            reader_image: IMAGE_UNDER_TEST,
            args: { table: "sessions" },
          }),
        ],
      ]);
      expect(served(g).candidate).toBeGreaterThan(0);
      const record = await recordOf(g, id);
      expect(record.evidence.conformance?.map((c) => [c.name, c.outcome])).toEqual([
        ["old-reader-new-writer", "pass"],
        ["new-reader-old-writer", "pass"],
      ]);
    },
  );

  it.skipIf(skip)(
    "one failing check blocks exposure: 0 candidate requests at the router, no control-plane write",
    async () => {
      const g = await open();
      const id = await startRelease(g, recipe());
      const { conformance, all } = await driveWith(g, (name) =>
        name === "new-reader-old-writer" ? "fail" : "pass",
      );
      const release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("rolled_back");
      // The first check passed, the second failed; nothing after them was dispatched.
      expect(conformance).toHaveLength(2);
      expect(all).toEqual(conformance);
      // At the router: requests were served all along, none of them by the candidate.
      const s = served(g);
      expect(s.control).toBeGreaterThan(0);
      expect(s.candidate).toBe(0);
      // At the control plane: not one write, the baseline weights in place.
      expect(g.h.cp.history().filter((c) => c.release_id === id)).toEqual([]);
      expect(g.h.cp.weights(MODEL)).toEqual(BASELINE);
      // The reason names the check, its pair, exposure 0 and what to do.
      expect(await compensationReason(g.h, id)).toMatch(
        /conformance check `new-reader-old-writer` \(new reader × old writer\) did not pass, so no traffic reached the candidate: step 2 assert_conformance_passed `new-reader-old-writer` \(new reader × old writer\), forward .* ended failed: .*To go on, make the candidate read what the previous version writes, then start a new release/,
      );
      // The step history names each check with its runner's result.
      const history = (await g.h.store.getHistory(id)).map((x) => x.message);
      expect(
        history.some((m) =>
          /step 1 assert_conformance_passed `old-reader-new-writer` \(old reader × new writer\), forward .* reported succeeded \(pass\)/.test(
            m,
          ),
        ),
        history.join("\n"),
      ).toBe(true);
      expect(
        history.some((m) =>
          /step 2 assert_conformance_passed `new-reader-old-writer` \(new reader × old writer\), forward .* reported .* \(fail\)/.test(
            m,
          ),
        ),
      ).toBe(true);
      const record = await recordOf(g, id);
      expect(record.evidence.conformance?.map((c) => [c.name, c.outcome])).toEqual([
        ["old-reader-new-writer", "pass"],
        ["new-reader-old-writer", "fail"],
      ]);
    },
  );
});
