/**
 * `baton drill <model>` on both stores (docs/recovery-actions.md "Drill records and the drill
 * policy"): `--record <file>` records the drill `npm run drill` writes (BATON_DRILL_RECORD)
 * with who recorded it and why (`--reason`), and `baton drill <model>` lists it; a bad model name or an unreadable
 * file is refused before anything is sent (exit 2). `--rehearse --reason` has the engine rehearse
 * on the drill lanes and prints the drill it recorded.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  createRelease,
  drive,
  OPERATOR,
  recipe,
  STORE_KINDS,
  skipStore,
} from "../integration/service-harness.ts";
import { baton } from "./run-baton.ts";
import { type Served, served } from "./served-engine.ts";

describe.each(STORE_KINDS)("baton drill on %s", (kind) => {
  const skip = skipStore(kind);
  let s: Served | null = null;
  const dir = mkdtempSync(join(tmpdir(), "baton-cli-drill-"));
  afterEach(async () => {
    await s?.close();
    s = null;
  });
  const env = () => ({ BATON_ENGINE_URL: s?.url, BATON_TOKEN: OPERATOR, USER: "dana" });

  it.skipIf(skip)("records a drill from its file and lists it", async () => {
    s = await served(kind, "baton-cli-drill-");
    const file = join(dir, `${kind}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        drill: "d42",
        model: "ranker",
        rto_ms: 1830,
        rpo_ms: 3156,
        rows_lost: 151,
        restored: true,
        verified: true,
        passed: true,
        problems: [],
      }),
    );
    const rec = await baton(
      ["drill", "ranker", "--record", file, "--reason", "quarterly rehearsal"],
      env(),
    );
    expect(rec.code, rec.stderr).toBe(0);
    expect(rec.stdout).toContain("recorded drill of ranker");
    expect(rec.stdout).toMatch(
      /d42 {2}passed {2}rto 1830 ms {2}rpo 3156 ms {2}rows_lost 151 {2}operator:dana {2}reason: quarterly rehearsal/,
    );
    const list = await baton(["drill", "ranker"], env());
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain("d42  passed");
    expect(list.stdout).toContain("operator:dana  reason: quarterly rehearsal");
    const listing = await baton(["drill", "ranker", "--reason", "why"], env());
    expect(listing.code).toBe(2);
    expect(listing.stderr).toContain("--reason goes with --record <file>");
    const none = await baton(["drill", "other"], env());
    expect(none.stdout).toContain("no drills of other");
    expect(none.stdout).toContain("no drill lanes: other has no succeeded release");
    const bad = await baton(["drill", "no such model"], env());
    expect(bad.code).toBe(2);
    const missing = await baton(["drill", "ranker", "--record", join(dir, "absent.json")], env());
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("not a readable JSON file");
    rmSync(file, { force: true });
  });

  it.skipIf(skip)("a drill file's time is when the drill ran: its record keeps it", async () => {
    s = await served(kind, "baton-cli-drill-");
    const file = join(dir, `${kind}-at.json`);
    const at = Date.parse("2026-09-01T10:00:00Z");
    writeFileSync(
      file,
      JSON.stringify({
        drill: "d-sept",
        at,
        rto_ms: 1830,
        rpo_ms: 3156,
        rows_lost: 151,
        restored: true,
        verified: true,
        passed: true,
      }),
    );
    const rec = await baton(["drill", "ranker", "--record", file, "--json"], env());
    expect(rec.code, rec.stderr).toBe(0);
    expect((JSON.parse(rec.stdout) as { drill: { at: number } }).drill.at).toBe(at);
    rmSync(file, { force: true });
  });

  it.skipIf(skip)(
    "a drill file that is not a regular file, too large, of another model or with a bad reason is refused before anything is sent",
    async () => {
      s = await served(kind, "baton-cli-drill-");
      const good = {
        drill: "d7",
        model: "ranker",
        rto_ms: 1830,
        rpo_ms: 3156,
        rows_lost: 151,
        restored: true,
        verified: true,
        passed: true,
        reason: "from the file",
      };
      const file = join(dir, `${kind}-checks.json`);
      // A device (endless) and a directory: refused at once, naming the file and the fix.
      const zero = await baton(["drill", "ranker", "--record", "/dev/zero"], env(), {
        timeoutMs: 10_000,
      });
      expect(zero.code).toBe(2);
      expect(zero.stderr).toContain("--record /dev/zero: not a regular file (a device)");
      expect(zero.stderr).toContain("npm run drill writes one");
      const folder = await baton(["drill", "ranker", "--record", dir], env());
      expect(folder.code).toBe(2);
      expect(folder.stderr).toContain("not a regular file (a directory)");
      // Larger than the engine's body limit: refused naming the file and the limit.
      writeFileSync(file, JSON.stringify({ ...good, reason: "x".repeat(100_000) }));
      const big = await baton(["drill", "ranker", "--record", file], env());
      expect(big.code).toBe(2);
      expect(big.stderr).toContain(`--record ${file}: the file is over 65536 bytes`);
      // The file's drill is of another model: refused naming both and the fix.
      writeFileSync(file, JSON.stringify({ ...good, model: "summarizer-v7" }));
      const other = await baton(["drill", "ranker", "--record", file], env());
      expect(other.code).toBe(2);
      expect(other.stderr).toContain('the drill is of model "summarizer-v7", not ranker');
      expect(other.stderr).toContain(`baton drill summarizer-v7 --record ${file}`);
      // An empty --reason is refused (it would drop the file's reason); a too long one names --reason.
      writeFileSync(file, JSON.stringify(good));
      const empty = await baton(["drill", "ranker", "--record", file, "--reason", ""], env());
      expect(empty.code).toBe(2);
      expect(empty.stderr).toContain("--reason must not be empty");
      const long = await baton(
        ["drill", "ranker", "--record", file, "--reason", "y".repeat(100_000)],
        env(),
      );
      expect(long.code).toBe(2);
      expect(long.stderr).toContain("--reason: must be at most 1000 characters");
      writeFileSync(file, JSON.stringify({ ...good, reason: "z".repeat(2000) }));
      const longInFile = await baton(["drill", "ranker", "--record", file], env());
      expect(longInFile.code).toBe(2);
      expect(longInFile.stderr).toContain(
        `--record ${file}: reason: must be at most 1000 characters`,
      );
      // 1e400 reads as Infinity, which would be sent as null: refused naming the field.
      writeFileSync(file, JSON.stringify(good).replace('"rto_ms":1830', '"rto_ms":1e400'));
      const huge = await baton(["drill", "ranker", "--record", file], env());
      expect(huge.code).toBe(2);
      expect(huge.stderr).toContain("rto_ms is a number too large to be finite");
      writeFileSync(file, JSON.stringify(good));
      const none = await baton(["drill", "ranker"], env());
      expect(none.stdout).toContain("no drills of ranker");
      // Recorded with the file's reason; again with another reason: recorded already, said so.
      const rec = await baton(["drill", "ranker", "--record", file], env());
      expect(rec.code, rec.stderr).toBe(0);
      expect(rec.stdout).toContain("reason: from the file");
      const again = await baton(["drill", "ranker", "--record", file, "--reason", "new"], env());
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toContain(
        'drill d7 of ranker is recorded already (by operator:dana); the record is unchanged; the reason given ("new") is not kept: the stored reason is "from the file"',
      );
      rmSync(file, { force: true });
    },
  );

  it.skipIf(skip)(
    "--rehearse: the engine rehearses on the drill lanes and the drill is printed; without a reason, refused before anything is sent",
    async () => {
      s = await served(kind, "baton-cli-drill-");
      const h = s.h;
      const model = String(recipe().model);
      const noReason = await baton(["drill", model, "--rehearse"], env());
      expect(noReason.code).toBe(2);
      expect(noReason.stderr).toContain("--rehearse needs --reason <why>");
      const both = await baton(
        ["drill", model, "--rehearse", "--reason", "why", "--record", "x.json"],
        env(),
      );
      expect(both.code).toBe(2);
      // An --actor that does not fit the rule is refused naming it, not dropped.
      const badActor = await baton(
        ["drill", model, "--rehearse", "--reason", "why", "--actor", "bad;actor"],
        env(),
      );
      expect(badActor.code).toBe(2);
      expect(badActor.stderr).toContain(`--actor must be 1-64 letters, digits`);
      expect(badActor.stderr).toContain(`not "bad;actor"`);
      // No drill lanes yet: the engine's refusal, with the fix.
      const refused = await baton(["drill", model, "--rehearse", "--reason", "why"], env());
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`${model} has no succeeded release`);

      // Mark the lane with the least traffic, so another lane takes its share.
      await createRelease(h, recipe());
      await drive(h);
      const w = h.cp.weights(model);
      const ids = (recipe().lanes ?? []).map((l) => l.id);
      const least = [...ids].sort((a, b) => (w[a] ?? 0) - (w[b] ?? 0))[0] as string;
      const r = recipe();
      await createRelease(h, {
        ...r,
        lanes: (r.lanes ?? []).map((l) => (l.id === least ? { ...l, drill: true } : l)),
      });
      await drive(h);
      const calls = h.cp.calls.length;
      const run = await baton(
        ["drill", model, "--rehearse", "--reason", "quarterly rehearsal"],
        env(),
      );
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain(
        `rehearsed an evacuation of ${model}'s drill lanes (last known good r2): ${least}`,
      );
      expect(run.stdout).toContain("out of routing: verified, RTO 0 ms");
      expect(run.stdout).toContain("put back: verified");
      expect(run.stdout).toMatch(
        /rh\d+ {2}passed {2}rto 0 ms {2}rpo 0 ms {2}rows_lost 0 {2}operator:dana {2}reason: quarterly rehearsal/,
      );
      // Only the drill lane was written.
      expect(
        h.cp.calls
          .slice(calls)
          .filter((c) => c.method === "apply")
          .map((c) => (c.op.op === "set_marker" ? c.op.lane : c.op.op)),
      ).toEqual([least, least]);
      // A reason's newline is shown as \n: it cannot start a line that reads as another drill.
      h.clock.advance(60_000);
      const forged = "routine\n2026-12-07T12:00:00Z  rh1  passed  operator:ceo";
      expect((await baton(["drill", model, "--rehearse", "--reason", forged], env())).code).toBe(0);
      const listed = await baton(["drill", model], env());
      expect(listed.stdout).toContain("reason: routine\\n2026-12-07T12:00:00Z  rh1  passed");
      expect(listed.stdout.split("\n").some((l) => l.startsWith("2026-12-07T12:00:00Z  rh1"))).toBe(
        false,
      );
    },
  );
});
