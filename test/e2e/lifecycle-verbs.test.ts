/**
 * The lifecycle verbs `deploy`, `release` and `promote` end to end on the embedded stack
 * (engine, reference control plane, SSH target running deploy.sh, local runner), on both
 * stores (docs/lifecycle.md). One release of a two-lane recipe with `promotion: manual`,
 * started dark (`POST /v1/releases?exposure=dark`, what `baton deploy` sends):
 * - deployed dark it waits `paused` (hold `dark`): lane-a's container runs the candidate
 *   (its health URL says so), the control plane holds weight 0 for it and the router sends
 *   it nothing; nothing more is written while it waits;
 * - `release` is its first exposure: the first wave's weight is written, then it waits
 *   (hold `promotion`) with lane-b untouched (still the previous image, never excluded);
 * - `promote` widens to the next wave: lane-b runs the candidate, the last wave's weights.
 * Each verb is refused (409 naming what the release accepts) in the states where it makes no
 * sense, before and after.
 */
import { expect, it } from "vitest";
import {
  type CpChange,
  cpHistory,
  cpTraffic,
  describeInProcess,
  ended,
  type InProcess,
  postJson as post,
  type RecordJson,
  readJson,
  reconcilerRounds,
  refused,
  routed,
  servedImage,
  settled,
  summarize,
  twoLaneRecipe,
  waitsForPromote,
} from "../support/e2e-harness.ts";

const T = 300_000;

type Full = RecordJson & {
  hold: { kind: string; actor: string; reason: string; wave?: number } | null;
  exposure: string | null;
  available_actions: { action: string }[];
};

const full = (e: InProcess, id: string) => readJson<Full>(e, `/v1/releases/${id}`);

/** Lanes the control plane history ever took out of service. */
const everExcluded = (h: CpChange[]) =>
  new Set(
    h
      .filter((c) => c.kind === "set_marker" && (c.after as { excluded?: boolean })?.excluded)
      .map((c) => c.lane),
  );

describeInProcess(
  (kind) => `lifecycle verbs on the embedded stack on ${kind}`,
  (start) => {
    it(
      "deploy runs the candidate dark at 0%, release exposes its first wave, promote widens to the next; each refused out of turn",
      async () => {
        const e = await start({ recipe: { ...twoLaneRecipe(), promotion: "manual" } });
        const m = e.manifest;
        const [a, b] = m.lanes.map((l) => l.id) as [string, string];
        expect(await servedImage(e, a)).toBe(m.previous_image);

        // deploy: a start with exposure dark.
        const res = await e.api("/v1/releases?exposure=dark", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(e.recipe),
        });
        expect(res.status, await res.clone().text()).toBe(201);
        const id = ((await res.json()) as { id: string }).id;
        let r = (await e.waitFor(
          id,
          (x) => (x.state === "paused" && settled(x)) || !["running", "pending"].includes(x.state),
          `${id} to wait at 0% exposure`,
          T,
        )) as Full;
        r = await full(e, id);
        expect(r.state, summarize(r)).toBe("paused");
        expect(r.hold?.kind).toBe("dark");
        expect(r.exposure).toBe("dark");
        expect(r.reason).toContain(`release (baton release ${id} --reason "<why it is ready>")`);
        expect(r.available_actions.map((x) => x.action)).toEqual(["release", "abort"]);
        // The environment: lane-a runs the candidate, in service at weight 0; the router sends
        // it nothing; lane-b was not touched.
        let cp = await cpTraffic(e, m.model);
        expect(cp.weights[a]).toBe(0);
        expect(cp.excluded).toEqual([]);
        expect(await servedImage(e, a)).toBe(m.image);
        expect(await servedImage(e, b)).toBe(m.previous_image);
        expect((await routed(e, m.model, 1000))[a] ?? 0).toBe(0);
        const darkWrites = await cpHistory(e, id);
        expect([...everExcluded(darkWrites)]).toEqual([a]);

        // Out of turn while dark: resume, promote and pause name release.
        expect(await refused(e, id, "resume")).toMatch(/waits for release \(baton release/);
        expect(await refused(e, id, "promote", { reason: "x" })).toMatch(/waits for release/);
        expect(await refused(e, id, "pause", { reason: "x" })).toMatch(
          /already paused.*release \(baton release/,
        );
        // It stays dark: a few reconciler rounds later nothing more was written.
        await reconcilerRounds(e, 5);
        expect((await cpHistory(e, id)).length).toBe(darkWrites.length);
        expect((await e.record(id)).state).toBe("paused");

        // release: the first exposure; then it waits for promote after wave 1.
        const rel = await post(e, `/v1/releases/${id}/release`, {
          reason: "smoke on lane-a is clean",
          actor: "carol",
        });
        expect(rel.status, await rel.clone().text()).toBe(200);
        await e.waitFor(
          id,
          (x) => waitsForPromote(x) || (x.state !== "running" && x.state !== "paused"),
          `${id} to wait for promote`,
          T,
        );
        r = await full(e, id);
        expect(r.state, summarize(r)).toBe("paused");
        expect(r.hold).toMatchObject({ kind: "promotion", wave: 1 });
        expect(r.exposure).toBe("released");
        expect(r.reason).toContain(
          `promote (baton promote ${id} --reason "<why the wave is good>")`,
        );
        expect(r.available_actions.map((x) => x.action)).toEqual(["promote", "abort"]);
        cp = await cpTraffic(e, m.model);
        expect(cp.weights).toEqual({ [a]: 50, [b]: 50 });
        expect((await routed(e, m.model, 1000))[a]).toBe(500);
        expect(await servedImage(e, a)).toBe(m.image);
        expect(await servedImage(e, b)).toBe(m.previous_image);
        const waveOneWrites = await cpHistory(e, id);
        expect(everExcluded(waveOneWrites).has(b)).toBe(false);
        expect(await refused(e, id, "resume")).toMatch(/waits for promote \(baton promote/);
        expect(await refused(e, id, "release", { reason: "x" })).toMatch(/released already/);

        // promote: wave 2 begins; the release succeeds with lane-b on the candidate.
        const pro = await post(e, `/v1/releases/${id}/promote`, {
          reason: "wave 1 is healthy",
          actor: "dan",
        });
        expect(pro.status, await pro.clone().text()).toBe(200);
        r = (await e.waitFor(id, ended, `${id} to end`, T)) as Full;
        expect(r.state, summarize(r)).toBe("succeeded");
        expect(await servedImage(e, a)).toBe(m.image);
        expect(await servedImage(e, b)).toBe(m.image);
        cp = await cpTraffic(e, m.model);
        expect(cp.excluded).toEqual([]);
        expect(Object.values(cp.weights).reduce((x, y) => x + y, 0)).toBe(100);
        expect(everExcluded(await cpHistory(e, id)).has(b)).toBe(true);
        const msgs = r.history.map((h) => h.message);
        expect(
          msgs.some((x) => /released by operator:carol: smoke on lane-a is clean/.test(x)),
        ).toBe(true);
        expect(msgs.some((x) => /promoted by operator:dan: wave 1 is healthy/.test(x))).toBe(true);

        // After the end: every hold verb is refused naming what a succeeded release accepts.
        for (const verb of ["release", "promote", "pause"]) {
          // The model's first release: no earlier manifest, so a new release is what it offers.
          expect(await refused(e, id, verb, { reason: "late" }), verb).toMatch(
            /no earlier admitted manifest of model .* roll forward with a new recipe/,
          );
        }
        const rec = (await (await e.api(`/v1/releases/${id}/record`)).json()) as {
          decisions: { kind: string; by: string; automatic: boolean }[];
        };
        for (const [k, by] of [
          ["release", "operator:carol"],
          ["promote", "operator:dan"],
        ]) {
          expect(
            rec.decisions.find((d) => d.kind === k),
            k,
          ).toMatchObject({
            by,
            automatic: false,
          });
        }
      },
      4 * T,
    );
  },
);
