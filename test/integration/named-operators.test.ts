/**
 * Named operators (BATON_OPERATORS): a token per person. An action sent with a person's own
 * token is recorded as theirs (`operator:<name>`), whatever name the body gives (the CLI sends
 * $USER); the shared operator token keeps the caller's own `actor`.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
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

      // lee resumes (a verb with no body): recorded as lee's, not a bare "operator".
      const resumed = await op(h, "POST", `/v1/releases/${id}/resume`, undefined, as(LEE));
      expect(resumed.status).toBe(200);
      rec = await full(h, id);
      expect(
        rec.history.find((e) => e.kind === "resume" && e.outcome === "accepted")?.data,
      ).toMatchObject({ actor: "operator:lee" });

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
});
