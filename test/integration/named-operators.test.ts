/**
 * Named operators (BATON_OPERATORS): a token per person. An action sent with a person's own
 * token is recorded as theirs (`operator:<name>`), whatever name the body gives (the CLI sends
 * $USER); the shared operator token keeps the caller's own `actor`.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  pumpOnce,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const MARIA = "maria-token-0123456789abcdef";
const LEE = "lee-token-0123456789abcdefgh";

interface Full {
  state: string;
  hold?: { actor: string } | null;
  history: { kind: string; outcome: string; data: unknown }[];
}

const as = (token: string) => ({ authorization: `Bearer ${token}` });
const full = async (h: Harness, id: string) =>
  (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as Full;

describe.each(STORE_KINDS)("named operators on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it.skipIf(skip)(
    "each action is recorded as the person whose token sent it, whatever name the body gives",
    async () => {
      h = await makeHarness({
        kind,
        config: {
          operators: [
            { name: "maria", token: MARIA },
            { name: "lee", token: LEE },
          ],
        },
      });
      const started = await op(h, "POST", "/v1/releases", recipe(2), as(MARIA));
      expect(started.status).toBe(201);
      const id = ((await started.json()) as { id: string }).id;
      for (let i = 0; i < 5; i++) await pumpOnce(h, () => "skip");

      // maria pauses with her token; the body names lee (say her $USER): recorded as hers.
      const paused = await op(
        h,
        "POST",
        `/v1/releases/${id}/pause`,
        { actor: "lee", reason: "checking GPU memory" },
        as(MARIA),
      );
      expect(paused.status).toBe(200);
      let rec = await full(h, id);
      expect(rec.hold?.actor).toBe("operator:maria");
      expect(
        rec.history.find((e) => e.kind === "pause" && e.outcome === "accepted")?.data,
      ).toMatchObject({ actor: "operator:maria" });

      // lee resumes, saying why (resume's reason is optional): recorded as lee's, with it.
      const resumed = await op(
        h,
        "POST",
        `/v1/releases/${id}/resume`,
        { reason: "GPU memory is fine" },
        as(LEE),
      );
      expect(resumed.status).toBe(200);
      rec = await full(h, id);
      expect(
        rec.history.find((e) => e.kind === "resume" && e.outcome === "accepted")?.data,
      ).toMatchObject({ actor: "operator:lee", reason: "GPU memory is fine" });

      // The shared operator token still records the name the caller gives.
      const shared = await op(h, "POST", `/v1/releases/${id}/abort`, {
        actor: "alice",
        reason: "done checking",
      });
      expect(shared.status).toBe(200);
      rec = await full(h, id);
      expect(
        rec.history.find((e) => e.kind === "abort" && e.outcome === "accepted")?.data,
      ).toMatchObject({ actor: "operator:alice" });
      // The start, too, names who started it.
      expect(JSON.stringify(rec.history)).toContain("operator:maria");
    },
    60_000,
  );

  it.skipIf(skip)(
    "retry and resume record who and why: the person's token, and the optional reason the verb table declares",
    async () => {
      h = await makeHarness({
        kind,
        config: { operators: [{ name: "maria", token: MARIA }] },
      });
      const hh = h;
      const id = await createRelease(
        hh,
        recipe(2, { policy: { rerun_window_minutes: 0, on_failure: "pause" } }),
      );
      const bad = (await getRecord(hh, id)).manifest.steps.find((x) => x.kind === "runner")!.index;
      let failures = 1;
      const decide = (p: { step_run_id: string }) =>
        p.step_run_id.endsWith(`_${bad}_f`) && failures-- > 0 ? "fail" : "pass";
      await drive(hh, decide);
      expect((await getRecord(hh, id)).state).toBe("paused");
      const sr = `sr_${id.slice(1)}_${bad}_f`;
      // The body's fields are the verb's declared ones: an unknown one is named.
      const typo = await op(
        hh,
        "POST",
        `/v1/releases/step-runs/${sr}/retry`,
        { reson: "x" },
        as(MARIA),
      );
      expect(typo.status).toBe(400);
      expect(JSON.stringify(await typo.json())).toContain('unknown field \\"reson');
      const retried = await op(
        hh,
        "POST",
        `/v1/releases/step-runs/${sr}/retry`,
        { reason: "runner image fixed", actor: "somebody" },
        as(MARIA),
      );
      expect(retried.status).toBe(200);
      const rec = await full(hh, id);
      const entry = rec.history.find((e) => e.kind === "retry" && e.outcome === "accepted") as
        | { data: unknown; message: string }
        | undefined;
      expect(entry?.data).toMatchObject({ actor: "operator:maria", reason: "runner image fixed" });
      expect(entry?.message).toContain("retried by operator:maria: runner image fixed");
      // The release record's decisions name who retried (not the engine) and why.
      const record = (await (await op(hh, "GET", `/v1/releases/${id}/record`)).json()) as {
        decisions: { kind: string; by: string; automatic: boolean; why: string }[];
      };
      expect(record.decisions.find((x) => x.kind === "retry")).toMatchObject({
        by: "operator:maria",
        automatic: false,
        why: expect.stringContaining("runner image fixed"),
      });
    },
    60_000,
  );

  it.skipIf(skip)(
    "a person's own token is a known token: using it many times is never throttled as guessing",
    async () => {
      h = await makeHarness({ kind, config: { operators: [{ name: "maria", token: MARIA }] } });
      for (let i = 0; i < 15; i++) {
        const res = await op(h, "GET", "/v1/releases", undefined, as(MARIA));
        expect(res.status, `request ${i + 1}`).toBe(200);
      }
    },
    60_000,
  );
});
