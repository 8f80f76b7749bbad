/**
 * The fleet view: desired (what Baton's releases declared) against observed (the
 * control plane's lanes, the target's image report), differences and mixed versions marked,
 * a control plane that does not answer said so; served at /fleet through the real in-memory
 * control plane and its HTTP adapter against the reference server.
 */
import { describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { fleetFacts } from "../../engine/src/domain/fleet.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import type { ReleaseRecord } from "../../engine/src/service/api.ts";
import { compensatedRecord, fakeApi, succeededRecord } from "../support/dashboard-fixtures.ts";

const NEW = succeededRecord().release.manifest.image;
const PREV = succeededRecord().release.manifest.previous_image;

/** r2 succeeded on lane-1 (traffic 100%), and the target reported the new image in its deploy. */
function succeeded(): ReleaseRecord {
  const rec = succeededRecord();
  const deploy = rec.release.step_runs.find(
    (s) =>
      s.kind === "runner" && rec.release.manifest.steps[s.step_index]!.name === "attach_queue_lane",
  )!;
  rec.attempt_results.push({
    step_run_id: deploy.id,
    attempt: 1,
    release_id: rec.release.id,
    received_at: deploy.finished_at!,
    status: "succeeded",
    overall: "pass",
    checks: [
      { phase: "start", status: "ok", exit_code: 0, image: NEW },
      { phase: "health", status: "ok", exit_code: 0 },
    ],
    log: "",
    log_truncated: false,
    raw_callback: "{}",
    preflight: {},
  });
  return rec;
}

function seeded(): MemoryControlPlane {
  const cp = new MemoryControlPlane({ model: "chat-model" });
  cp.seed([
    { id: "lane-1", weight: 90, excluded: false, capabilities: ["chat"], advertised: true },
    { id: "lane-2", weight: 10, excluded: false, image: PREV },
  ]);
  return cp;
}

describe("fleet facts", () => {
  it("desired from the release, observed from the control plane and the target; differences and mixed versions", async () => {
    const cp = seeded();
    const read = await cp.lanes("chat-model");
    const [m] = fleetFacts([succeeded()], new Map([["chat-model", read]]));
    expect(m!.model).toBe("chat-model");
    const l1 = m!.lanes.find((l) => l.id === "lane-1")!;
    const l2 = m!.lanes.find((l) => l.id === "lane-2")!;
    expect(l1.desired).toMatchObject({
      release_id: "r2",
      image: NEW,
      image_is: "new",
      weight: 100,
    });
    expect(l1.observed).toMatchObject({ weight: 90, excluded: false });
    expect(l1.observed!.image).toMatchObject({ ref: NEW, source: "target" });
    expect(l1.differs).toEqual(["weight"]);
    expect(l2.desired).toMatchObject({ image: PREV, image_is: "previous", weight: 0 });
    expect(l2.observed!.image).toMatchObject({ ref: PREV, source: "control_plane" });
    expect(l2.differs).toEqual(["weight"]);
    expect(m!.mixed).toBe(true);
    expect(m!.images.map((i) => [i.lanes, i.weight])).toEqual([
      [["lane-1"], 90],
      [["lane-2"], 10],
    ]);
  });

  it("in step: nothing differs, one version", async () => {
    const cp = new MemoryControlPlane({ model: "chat-model" });
    cp.seed([
      { id: "lane-1", weight: 100, excluded: false, capabilities: ["chat"], advertised: true },
      { id: "lane-2", weight: 0 },
    ]);
    const [m] = fleetFacts([succeeded()], new Map([["chat-model", await cp.lanes("chat-model")]]));
    expect(m!.lanes.map((l) => l.differs)).toEqual([[], []]);
    expect(m!.mixed).toBe(false);
  });

  it("a control plane that does not answer: observed unknown, the message kept", () => {
    const [m] = fleetFacts(
      [succeeded()],
      new Map([
        ["chat-model", { ok: false as const, message: "[control-plane] GET /v1/lanes timed out" }],
      ]),
    );
    expect(m!.readError).toContain("timed out");
    expect(m!.lanes.every((l) => l.observed === null && l.differs.length === 0)).toBe(true);
  });

  it("an abandoned release's desired image is the one the operator confirmed; the newest release that ran decides", () => {
    const older = succeeded();
    const rb = compensatedRecord();
    rb.release.state = "abandoned";
    rb.release.abandoned = {
      actor: "alice",
      reason: "fixed by hand",
      at: rb.release.updated_at,
      lanes: { "lane-1": "ghcr.io/acme/model@sha256:" + "d".repeat(64), "lane-2": "none" },
    };
    const [m] = fleetFacts([older, rb], new Map());
    const l1 = m!.lanes.find((l) => l.id === "lane-1")!;
    expect(l1.desired).toMatchObject({ release_id: "r3", image_is: "confirmed" });
    expect(l1.desired!.image).toContain("ddddd");
  });
});

describe("fleet facts of a rollback that was undone", () => {
  // r3 rolls back to an older manifest: its recipe's previous_image (PREV) is that recipe's own
  // predecessor, not what the lanes ran when the rollback started (RAN, in its baseline).
  const RAN = `ghcr.io/acme/model@sha256:${"e".repeat(64)}`;
  const HOTFIX = `ghcr.io/acme/model@sha256:${"f".repeat(64)}`;
  const BY_HAND = `ghcr.io/acme/model@sha256:${"9".repeat(64)}`;
  function undoneRollback(images: Record<string, string | null>): ReleaseRecord {
    const rb = compensatedRecord();
    rb.release.lineage = { verb: "rollback", of: "r2", manifest_of: "r1" };
    rb.release.baseline = {
      read_at: rb.release.created_at,
      recipe_manifest_digest: "d".repeat(64),
      lanes: rb.release.manifest.lanes.map((l) => ({
        id: l.id,
        weight: 50,
        excluded: false,
        capabilities: ["chat"],
        advertised: true,
        image: images[l.id] ?? null,
      })),
    };
    return rb;
  }
  const read = async (images: Record<string, string>) => {
    const cp = new MemoryControlPlane({ model: "chat-model" });
    cp.seed(Object.entries(images).map(([id, image]) => ({ id, weight: 50, image })));
    return new Map([["chat-model", await cp.lanes("chat-model")]]);
  };

  it("an undone lane wants what compensation restored (the baseline's image), an untouched lane what it ran; a later change by hand still differs", async () => {
    const rb = undoneRollback({ "lane-1": RAN, "lane-2": HOTFIX });
    expect(rb.release.manifest.previous_image).toBe(PREV);
    const [m] = fleetFacts([succeeded(), rb], await read({ "lane-1": RAN, "lane-2": HOTFIX }));
    const l1 = m!.lanes.find((l) => l.id === "lane-1")!;
    const l2 = m!.lanes.find((l) => l.id === "lane-2")!;
    expect(l1.desired).toMatchObject({ release_id: "r3", image: RAN, image_is: "previous" });
    expect(l2.desired).toMatchObject({ release_id: "r3", image: HOTFIX, image_is: "previous" });
    expect(l1.differs).not.toContain("image");
    expect(l2.differs).not.toContain("image");

    const [changed] = fleetFacts(
      [succeeded(), rb],
      await read({ "lane-1": BY_HAND, "lane-2": HOTFIX }),
    );
    const c1 = changed!.lanes.find((l) => l.id === "lane-1")!;
    expect(c1.differs).toContain("image");
    expect(c1.desired!.image).toBe(RAN);
    expect(c1.observed!.image!.ref).toBe(BY_HAND);
  });

  it("previous_image only when the baseline could not tell the image", async () => {
    const rb = undoneRollback({ "lane-1": null });
    const [m] = fleetFacts([rb], await read({ "lane-1": PREV }));
    const l1 = m!.lanes.find((l) => l.id === "lane-1")!;
    expect(l1.desired).toMatchObject({ image: PREV, image_is: "previous" });
    expect(l1.differs).not.toContain("image");
  });
});

describe("/fleet", () => {
  it("renders desired and observed, marks differences and mixed versions, and a dead control plane", async () => {
    const app = dashboardApp({
      api: fakeApi([succeeded()]),
      tokens: {},
      publicUrl: "http://127.0.0.1",
      controlPlane: seeded(),
    });
    const res = await app.request("/fleet?model=chat-model");
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain("Model chat-model");
    expect(html).toContain("mixed versions");
    expect(html).toContain("2 lane(s) differ");
    expect(html).toContain("want </span>100%");
    expect(html).toContain("now </span>90%");
    expect(html).toContain('data-events="/fleet/events?model=chat-model"');
    // Each image named and marked as the release's candidate or the lane's baseline.
    expect(html).toContain("model@sha256:bbbbbbbbbbbb… (candidate)");
    expect(html).toContain("model@sha256:cccccccccccc… (baseline)");
    expect(html).not.toContain("new image");

    // The release page's Live now names them too.
    const page = await (await app.request("/releases/r2")).text();
    const live = page.slice(
      page.indexOf('id="live-now-part"'),
      page.indexOf("</section>", page.indexOf('id="live-now-part"')),
    );
    expect(live).toContain("Traffic 100% on the candidate model@sha256:bbbbbbbbbbbb…");
    expect(live).toMatch(/model@sha256:bbbbbbbbbbbb…<\/span> <span class="tag cand">candidate/);
    expect(live).toMatch(/model@sha256:cccccccccccc…<\/span> <span class="tag base">baseline/);

    const dead = new MemoryControlPlane();
    dead.faults.arm({ mode: "error", count: 1, on: "read" });
    const app2 = dashboardApp({
      api: fakeApi([succeeded()]),
      tokens: {},
      publicUrl: "http://127.0.0.1",
      controlPlane: dead,
    });
    const html2 = await (await app2.request("/fleet")).text();
    expect(html2).toContain("The control plane did not answer");
  });
});
