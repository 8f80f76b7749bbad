/**
 * Incident mode (docs/incidents.md) through `baton incident …` (in process) against a real
 * engine on each store, served over HTTP on 127.0.0.1: bad input first (exit 2 naming the
 * flag, 400 naming the field, 404 for an unknown incident), then an open incident freezes the
 * start and the first exposure of a model it does not name, with nothing written; only the
 * commander may allow that model; recovery (abort) is never frozen; resolving thaws; the timeline
 * holds the incident's events and its models' release history with who did what.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import {
  drive,
  getRecord,
  OPERATOR,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "../integration/service-harness.ts";
import { PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import { baton } from "./run-baton.ts";
import { type Served, served } from "./served-engine.ts";

const MODEL = "summarizer-v7";
const noStack = (s: string) => expect(s).not.toMatch(/\n\s+at .+:\d+:\d+/);

describe.each(STORE_KINDS)("baton incident on %s", (kind) => {
  const skip = skipStore(kind);
  let s: Served | null = null;
  afterEach(async () => {
    await s?.close();
    s = null;
  });
  const env = () => ({ BATON_ENGINE_URL: s?.url, BATON_TOKEN: OPERATOR, USER: "dana" });

  it.skipIf(skip)("bad input: every refusal names the flag or field and the fix", async () => {
    s = await served(kind, "baton-cli-incident-");
    const noCommander = await baton(
      ["incident", "declare", "--severity", "sev2", "--summary", "x", "--model", "ranker"],
      env(),
    );
    expect(noCommander.code).toBe(2);
    expect(noCommander.stderr).toContain("--commander");
    const badSev = await baton(
      [
        "incident",
        "declare",
        "--severity",
        "high",
        "--summary",
        "x",
        "--model",
        "ranker",
        "--commander",
        "maria",
      ],
      env(),
    );
    expect(badSev.code).toBe(2);
    expect(badSev.stderr).toContain("--severity must be one of sev1, sev2, sev3, sev4");
    const notId = await baton(["incident", "show", "latest"], env());
    expect(notId.code).toBe(2);
    expect(notId.stderr).toContain('"latest" is not an incident id');
    const unknown = await baton(["incident", "show", "inc42"], env());
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("incident inc42 does not exist");
    noStack(noCommander.stderr + badSev.stderr + notId.stderr + unknown.stderr);

    const empty = await op(s.h, "POST", "/v1/incidents", {});
    expect(empty.status).toBe(400);
    const fields = JSON.stringify(await empty.json());
    for (const f of ["severity", "summary", "models", "commander"]) expect(fields).toContain(f);
    const bomb = await op(s.h, "POST", "/v1/incidents", {
      severity: "sev1",
      summary: "a\u202eb",
      models: ["ranker"],
      commander: "maria",
    });
    expect(bomb.status).toBe(400);
    expect(await bomb.text()).toContain("U+202E");
    const viewer = await s.h.engine.app.request("/v1/incidents", { method: "GET" });
    expect(viewer.status).toBe(401);
    expect((await baton(["incident", "list"], env())).stdout).toContain("no incidents");

    // The engine's refusal of an empty field names the flag that set it.
    const declared = await op(s.h, "POST", "/v1/incidents", {
      severity: "sev3",
      summary: "slow",
      models: ["ranker"],
      commander: "maria",
    });
    expect(declared.status).toBe(201);
    // Empty flags are refused before anything is sent (exit 2), naming the flag.
    const blankNote = await baton(["incident", "note", "inc1", "--text", ""], env());
    expect(blankNote.code).toBe(2);
    expect(blankNote.stderr).toContain("--text must not be empty");
    expect(blankNote.stderr).not.toContain("body.text");
    for (const [flag, args] of [
      ["--summary", ["--summary", "", "--model", "ranker", "--commander", "maria"]],
      ["--commander", ["--summary", "x", "--model", "ranker", "--commander", " "]],
    ] as const) {
      const r = await baton(["incident", "declare", "--severity", "sev2", ...args], env());
      expect(r.code, flag).toBe(2);
      expect(r.stderr).toContain(`${flag} must not be empty`);
    }
    const blankSummary = await baton(
      ["incident", "resolve", "inc1", "--summary", " ", "--actor", "maria"],
      env(),
    );
    expect(blankSummary.stderr).toContain("--summary");
    expect(blankSummary.stderr).not.toContain("body.summary");
  });

  it.skipIf(skip)(
    "an open incident freezes other models' starts, first exposures and promotes; only the commander allows and resolves; abort goes through",
    async () => {
      s = await served(kind, "baton-cli-incident-");
      const { h } = s;
      const file = path.join(s.dir, "recipe.yaml");
      writeFileSync(file, stringify(recipe(2)));
      // Before the incident: a release deployed dark (it waits for `baton release`).
      const dep = await baton(["deploy", file], env());
      expect(dep.code, dep.stderr).toBe(0);
      const dark = /^deployed (r\d+)/m.exec(dep.stdout)?.[1] as string;
      await drive(h);
      expect((await getRecord(h, dark)).state).toBe("paused");

      const dec = await baton(
        [
          "incident",
          "declare",
          "--severity",
          "sev2",
          "--summary",
          "ranker answers 5xx",
          "--model",
          "ranker",
          "--commander",
          "maria",
          "--recorder",
          "lee",
        ],
        env(),
      );
      expect(dec.code, dec.stderr).toBe(0);
      expect(dec.stdout).toContain("declared inc1  OPEN  SEV2  ranker answers 5xx");

      // Frozen: a new release of the model the incident does not name; nothing is written.
      const before = (await h.store.listReleases({ limit: 50 })).length;
      const st = await baton(["start", file], env());
      expect(st.code).toBe(1);
      expect(st.stderr).toContain(`releases of ${MODEL} are frozen by incident inc1`);
      expect(st.stderr).toContain("commander maria may allow it");
      expect(st.stderr).toContain(`baton incident allow inc1 --model ${MODEL}`);
      noStack(st.stderr);
      expect((await h.store.listReleases({ limit: 50 })).length).toBe(before);
      // Frozen: the first exposure of the dark release; it stays where it was.
      const rel = await baton(["release", dark, "--reason", "smoke is clean"], env());
      expect(rel.code).toBe(1);
      expect(rel.stderr).toContain("frozen by incident inc1");
      expect((await getRecord(h, dark)).state).toBe("paused");
      // Frozen: a promote, refused before anything else is looked at.
      const pro = await baton(["promote", dark, "--reason", "looks fine"], env());
      expect(pro.code).toBe(1);
      expect(pro.stderr).toContain(`a promote of ${MODEL} is refused while it is open`);
      expect((await getRecord(h, dark)).state).toBe("paused");
      // Recovery is not frozen: the dark release is aborted (its undo runs).
      const abort = await baton(["abort", dark, "--reason", "incident: hold everything"], env());
      expect(abort.code, abort.stderr).toBe(0);
      await drive(h);
      expect((await getRecord(h, dark)).state).toBe("rolled_back");

      // Only the commander may allow.
      const notHim = await baton(["incident", "allow", "inc1", "--model", MODEL], env());
      expect(notHim.code).toBe(1);
      expect(notHim.stderr).toContain("only incident inc1's commander (maria)");
      expect(notHim.stderr).toContain("if you are maria, name yourself with --actor maria");
      const allowed = await baton(
        ["incident", "allow", "inc1", "--model", MODEL, "--reason", "the fix", "--actor", "maria"],
        env(),
      );
      expect(allowed.code, allowed.stderr).toBe(0);
      const st2 = await baton(["start", file], env());
      expect(st2.code, st2.stderr).toBe(0);
      const fix = /^started (r\d+)/m.exec(st2.stdout)?.[1] as string;
      await drive(h);
      expect((await getRecord(h, fix)).state).toBe("succeeded");

      const noted = await baton(
        ["incident", "note", "inc1", "--text", "p99 back to normal"],
        env(),
      );
      expect(noted.code, noted.stderr).toBe(0);
      // Only the commander may resolve (it thaws every model).
      const notHers = await baton(["incident", "resolve", "inc1", "--summary", "dana's"], env());
      expect(notHers.code).toBe(1);
      expect(notHers.stderr).toContain("only incident inc1's commander (maria) may resolve it");
      const res = await baton(
        [
          "incident",
          "resolve",
          "inc1",
          "--summary",
          "bad tokenizer; rolled back",
          "--actor",
          "maria",
        ],
        env(),
      );
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toContain("inc1  resolved  SEV2");
      const again = await baton(
        ["incident", "resolve", "inc1", "--summary", "x", "--actor", "maria"],
        env(),
      );
      expect(again.code).toBe(1);
      expect(again.stderr).toContain("incident inc1 was resolved");

      // The timeline: the incident's own events with who, in order.
      const show = await baton(["incident", "show", "inc1"], env());
      expect(show.code, show.stderr).toBe(0);
      const lines = show.stdout.split("\n");
      const at = (re: RegExp) => lines.findIndex((l) => re.test(l));
      expect(at(/operator:dana: declared SEV2: ranker answers 5xx/)).toBeGreaterThan(0);
      expect(at(/operator:maria: allowed releases of summarizer-v7: the fix/)).toBeGreaterThan(
        at(/declared SEV2/),
      );
      expect(at(/operator:dana: p99 back to normal/)).toBeGreaterThan(at(/allowed releases/));
      expect(at(/operator:maria: resolved: bad tokenizer; rolled back/)).toBeGreaterThan(
        at(/p99 back/),
      );
      expect(show.stdout).toContain("roles: commander maria, recorder lee");

      // Thawed: another release of the model starts.
      const st3 = await baton(["start", file], env());
      expect(st3.code, st3.stderr).toBe(0);
    },
  );

  it.skipIf(skip)("a rollback is never frozen", async () => {
    s = await served(kind, "baton-cli-incident-");
    const { h } = s;
    const file = path.join(s.dir, "recipe.yaml");
    const older = `ghcr.io/acme/summarizer@sha256:${"a1".repeat(32)}`;
    const ids: string[] = [];
    for (const r of [recipe(2, { image: PREVIOUS_IMAGE, previous_image: older }), recipe(2)]) {
      writeFileSync(file, stringify(r));
      const st = await baton(["start", file], env());
      expect(st.code, st.stderr).toBe(0);
      ids.push(/^started (r\d+)/m.exec(st.stdout)?.[1] as string);
      await drive(h);
    }
    const dec = await op(h, "POST", "/v1/incidents", {
      severity: "sev1",
      summary: "ranker down",
      models: ["ranker"],
      commander: "maria",
    });
    expect(dec.status).toBe(201);
    expect((await baton(["start", file], env())).code).toBe(1);
    const rb = await baton(
      ["rollback", ids[1] as string, "--reason", "back to the last good"],
      env(),
    );
    expect(rb.code, rb.stderr).toBe(0);
    await drive(h);
    const back = (await h.store.listReleases({ limit: 5 }))[0];
    expect(back?.id).not.toBe(ids[1]);
    expect(back?.state).toBe("succeeded");
  });

  it.skipIf(skip)(
    "the timeline collects the affected model's release history; concurrent notes are all kept",
    async () => {
      s = await served(kind, "baton-cli-incident-");
      const { h } = s;
      const file = path.join(s.dir, "recipe.yaml");
      writeFileSync(file, stringify(recipe(2)));
      const dec = await op(h, "POST", "/v1/incidents", {
        severity: "sev3",
        summary: "summarizer latency",
        models: [MODEL],
        commander: "maria",
      });
      expect(dec.status).toBe(201);
      // The named model is not frozen.
      const st = await baton(["start", file], env());
      expect(st.code, st.stderr).toBe(0);
      const id = /^started (r\d+)/m.exec(st.stdout)?.[1] as string;
      await drive(h);
      // Concurrent notes (each a compare-and-set of the incident book): none is lost.
      const notes = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          op(h, "POST", "/v1/incidents/inc1/note", { text: `note ${i}` }),
        ),
      );
      expect(notes.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
      const t = (await (await op(h, "GET", "/v1/incidents/inc1")).json()) as {
        incident: { open: boolean; events: { text: string }[] };
        timeline: { source: string; kind: string; text: string; actor: string | null }[];
      };
      expect(t.incident.open).toBe(true);
      for (let i = 0; i < 6; i++)
        expect(t.incident.events.map((e) => e.text)).toContain(`note ${i}`);
      const fromRelease = t.timeline.filter((e) => e.source === id);
      expect(fromRelease.length).toBeGreaterThan(3);
      expect(fromRelease.find((e) => e.kind === "created")?.text).toContain(
        `release ${id} created by operator`,
      );
      expect(fromRelease.at(-1)?.text).toContain("succeeded");
      const list = await baton(["incident", "list", "--json"], env());
      expect(JSON.parse(list.stdout).incidents[0].id).toBe("inc1");

      // The dashboard: the list and the incident's page with its timeline, text escaped.
      await op(h, "POST", "/v1/incidents/inc1/note", { text: "<script>alert(1)</script>" });
      const page = await op(h, "GET", "/incidents");
      expect(page.status).toBe(200);
      const listHtml = await page.text();
      expect(listHtml).toContain('<a href="/incidents/inc1">inc1</a>');
      expect(listHtml).toContain("OPEN · SEV3 · summarizer latency");
      const one = await op(h, "GET", "/incidents/inc1");
      const oneHtml = await one.text();
      expect(oneHtml).toContain(`<a href="/releases/${id}">${id}</a>`);
      expect(oneHtml).toContain("note 5");
      expect(oneHtml).not.toContain("<script>alert(1)</script>");
      expect(oneHtml).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
      const missing = await op(h, "GET", "/incidents/inc9");
      expect(missing.status).toBe(404);
      expect(await missing.text()).toContain("incident inc9 does not exist");
      expect((await op(h, "GET", "/incidents/..%2Fx")).status).toBe(404);
    },
  );
});
