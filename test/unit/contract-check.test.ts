import { describe, expect, it } from "vitest";
import { type RunnerLane, runnerArgs } from "../../engine/src/domain/catalogue.ts";
import { checkRecipe } from "../../engine/src/domain/contract-check.ts";
import type { Problem } from "../../engine/src/domain/errors.ts";
import { parseHostKeyPin } from "../../scripts/lib/hostkey.ts";
import { goodRecipe, HOST_KEY, NEW_DIGEST } from "./recipe-fixture.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests break recipes in arbitrary ways
type Mutable = Record<string, any>;

/** Runs the check on a mutated copy of the good recipe and returns the problems. */
function problemsOf(mutate: (r: Mutable) => void): Problem[] {
  const r = structuredClone(goodRecipe()) as Mutable;
  mutate(r);
  const res = checkRecipe(r);
  if (res.ok) throw new Error("expected the contract check to fail");
  return res.problems;
}

function expectProblem(problems: Problem[], path: string, message: RegExp, fix: RegExp): void {
  const p = problems.find((x) => x.path === path && message.test(x.message));
  expect(
    p,
    `no problem at ${path} matching ${message}; got ${JSON.stringify(problems, null, 1)}`,
  ).toBeDefined();
  expect(p?.fix).toMatch(fix);
}

describe("checkRecipe accepts", () => {
  it("the good recipe, filling defaults", () => {
    const res = checkRecipe(goodRecipe());
    expect(res.ok).toBe(true);
    if (!res.ok) return;
    expect(res.recipe.lanes[0]?.port).toBe(22);
    expect(res.recipe.policy).toEqual({
      on_failure: "compensate",
      rerun_window_minutes: 30,
      steps: {},
    });
    expect(res.recipe.deadlines).toEqual({ start_ms: 600_000, callback_ms: 1_800_000 });
  });

  it("a known_hosts line as host key, and a tag before the digest", () => {
    const r = goodRecipe() as Mutable;
    r.lanes[0].host_key =
      "[gpu-0.serving.acme.internal]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
    r.image = `ghcr.io/acme/summarizer:v7@sha256:${NEW_DIGEST}`;
    expect(checkRecipe(r)).toMatchObject({ ok: true });
  });

  it.each([["ssh-rsa"], ["ssh-ed25519"], ["ecdsa-sha2-nistp256"]])(
    "a typed fingerprint pin (%s SHA256:…), which the SSH tool accepts too",
    (type) => {
      const r = goodRecipe() as Mutable;
      r.lanes[0].host_key = `${type} ${HOST_KEY}`;
      expect(checkRecipe(r)).toMatchObject({ ok: true });
      expect(parseHostKeyPin(r.lanes[0].host_key)).toEqual({
        fingerprint: HOST_KEY,
        keyType: type,
      });
    },
  );

  it("a lane behind a jump host, carried into the runner step args", () => {
    const r = goodRecipe() as Mutable;
    r.lanes[0].jump = {
      host: "bastion.acme.internal",
      user: "jump",
      host_key: `ssh-rsa ${HOST_KEY}`,
    };
    const res = checkRecipe(r);
    expect(res).toMatchObject({ ok: true });
    if (!res.ok) return;
    expect(res.recipe.lanes[0]?.jump).toEqual({ ...r.lanes[0].jump, port: 22 });
    const args = runnerArgs(
      { ...(res.recipe.lanes[0] as RunnerLane) },
      `img@sha256:${NEW_DIGEST}`,
      `img@sha256:${NEW_DIGEST}`,
    ) as { lane: Record<string, unknown> };
    expect(args.lane.jump).toEqual({ ...r.lanes[0].jump, port: 22 });
  });

  it("waves with equal consecutive traffic", () => {
    const r = goodRecipe() as Mutable;
    r.rollout.waves[1].traffic = 10;
    expect(checkRecipe(r)).toMatchObject({ ok: true });
  });
});

describe("checkRecipe refuses, naming the path and the fix", () => {
  it("a tag-only image", () => {
    const ps = problemsOf((r) => {
      r.image = "ghcr.io/acme/summarizer:v7";
    });
    expectProblem(ps, "image", /pinned by digest/, /@sha256:<64 hex>/);
  });

  it("a tag-only previous_image", () => {
    const ps = problemsOf((r) => {
      r.previous_image = "ghcr.io/acme/summarizer:latest";
    });
    expectProblem(ps, "previous_image", /pinned by digest/, /imagetools inspect/);
  });

  it("a digest that is not 64 lowercase hex", () => {
    const ps = problemsOf((r) => {
      r.image = `ghcr.io/acme/summarizer@sha256:${NEW_DIGEST.slice(0, 40).toUpperCase()}`;
    });
    expectProblem(ps, "image", /pinned by digest/, /sha256/);
  });

  it("duplicate lane ids", () => {
    const ps = problemsOf((r) => {
      r.lanes[2].id = "lane-a";
    });
    expectProblem(ps, "lanes.2.id", /duplicate lane id `lane-a`/, /own id/);
  });

  it("a wave naming an unknown lane", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves[1].lanes = ["lane-x"];
    });
    expectProblem(ps, "rollout.waves.1.lanes.0", /unknown lane `lane-x`/, /lane-a, lane-b, lane-c/);
    // lane-b is then in no wave: reported too.
    expectProblem(ps, "lanes.1.id", /`lane-b` is in no wave/, /Add `lane-b` to a wave/);
  });

  it("a lane in two waves", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves[2].lanes = ["lane-c", "lane-a"];
    });
    expectProblem(ps, "rollout.waves.2.lanes.1", /already in wave 1/, /exactly one wave/);
  });

  it("a lane in no wave", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves[2].lanes = ["lane-b"];
      r.rollout.waves[1].lanes = ["lane-a"];
      r.rollout.waves[0].lanes = ["lane-b"];
    });
    expectProblem(ps, "lanes.2.id", /`lane-c` is in no wave/, /rollout\.waves/);
  });

  it("traffic over 100 and under 0", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves[0].traffic = -5;
      r.rollout.waves[1].traffic = 150;
    });
    expectProblem(ps, "rollout.waves.0.traffic", /0\.\.100/, /absolute percent from 0 to 100/);
    expectProblem(ps, "rollout.waves.1.traffic", /0\.\.100/, /absolute percent from 0 to 100/);
  });

  it("traffic that goes down across waves", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves[1].traffic = 5;
    });
    expectProblem(
      ps,
      "rollout.waves.1.traffic",
      /goes down from 10% \(wave 1\) to 5% \(wave 2\)/,
      /use 10 or more/,
    );
  });

  it("a last wave that is not 100", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves[2].traffic = 90;
    });
    expectProblem(ps, "rollout.waves.2.traffic", /never completes/, /traffic: 100/);
  });

  it("a wave whose traffic needs a stable lane when none remain", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves = [
        { lanes: ["lane-a"], traffic: 10 },
        { lanes: ["lane-b", "lane-c"], traffic: 50 },
        { lanes: [], traffic: 100 },
      ];
    });
    expectProblem(ps, "rollout.waves.1.traffic", /none remain/, /traffic: 100/);
    expectProblem(ps, "rollout.waves.2.lanes", /at least one lane/, /.+/);
  });

  it("a lane without a host key pin", () => {
    const ps = problemsOf((r) => {
      delete r.lanes[1].host_key;
    });
    expectProblem(ps, "lanes.1.host_key", /no host key pin/, /ssh-keyscan.*SHA256/);
  });

  it.each([
    ["an MD5 fingerprint", "MD5:4f:2b:9a:11:0c:77:13:5e:aa:10:02:9b:6e:ff:01:33"],
    ["a truncated SHA256 fingerprint", HOST_KEY.slice(0, 30)],
    ["a padded SHA256 fingerprint", `${HOST_KEY}=`],
    [
      "a revoked-marker known_hosts line",
      "@revoked * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0",
    ],
    ["a bare word", "yes"],
  ])("a malformed host key pin: %s", (_label, hostKey) => {
    const ps = problemsOf((r) => {
      r.lanes[0].host_key = hostKey;
    });
    expectProblem(
      ps,
      "lanes.0.host_key",
      /SHA256:… fingerprint or a known_hosts line/,
      /ssh-keygen -lf/,
    );
  });

  it("a jump host with a malformed pin or an unknown key", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].jump = { host: "bastion", user: "jump", host_key: "yes" };
      r.lanes[1].jump = { host: "bastion", user: "jump", host_key: HOST_KEY, proxy: "x" };
    });
    expectProblem(
      ps,
      "lanes.0.jump.host_key",
      /SHA256:… fingerprint or a known_hosts line/,
      /ssh-keygen -lf/,
    );
    expect(ps.some((p) => p.path.startsWith("lanes.1.jump"))).toBe(true);
  });

  it("a jump host without its own host key pin: names the jump host, not the lane", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].jump = { host: "bastion.example", port: 2222, user: "jump" };
    });
    const p = ps.find((x) => x.path === "lanes.0.jump.host_key");
    expect(p, JSON.stringify(ps)).toBeDefined();
    expect(p?.message).toMatch(
      /jump host \(bastion\) bastion\.example of lane lane-a has no host key pin/,
    );
    expect(p?.message).not.toMatch(/^lane has no host key pin/);
    expect(p?.fix).toMatch(/`lanes\.0\.jump\.host_key`/);
    expect(p?.fix).toMatch(/ssh-keyscan -p 2222 bastion\.example \| ssh-keygen -lf - -E sha256/);
    expect(p?.fix).toMatch(/not the lane's/);
  });

  it("a jump host's malformed pin: the fix is about the bastion's key", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].jump = { host: "bastion.example", user: "jump", host_key: "yes" };
    });
    expectProblem(
      ps,
      "lanes.0.jump.host_key",
      /SHA256:… fingerprint or a known_hosts line/,
      /jump host's \(bastion's\).*ssh-keyscan -p 22 bastion\.example/,
    );
  });

  it.each([
    [
      "a 40-digit port",
      (r: Mutable) => {
        r.lanes[0].port = Number("1234567890123456789012345678901234567890");
      },
      "lanes.0.port",
      /port must be 1\.\.65535/,
    ],
    [
      "traffic 1e26",
      (r: Mutable) => {
        r.rollout.waves[0].traffic = 1e26;
      },
      "rollout.waves.0.traffic",
      /traffic must be 0\.\.100/,
    ],
    [
      "traffic Infinity (YAML 1e400 or .inf)",
      (r: Mutable) => {
        r.rollout.waves[0].traffic = Number.POSITIVE_INFINITY;
      },
      "rollout.waves.0.traffic",
      /must be a finite number; got Infinity/,
    ],
    [
      "traffic NaN (YAML .nan)",
      (r: Mutable) => {
        r.rollout.waves[0].traffic = Number.NaN;
      },
      "rollout.waves.0.traffic",
      /must be a finite number; got NaN/,
    ],
  ])("%s: one plain problem for the field, naming the limit", (_name, set, path, msg) => {
    const ps = problemsOf(set);
    const atPath = ps.filter((x) => x.path === path);
    expect(atPath, JSON.stringify(ps)).toHaveLength(1);
    expect(atPath[0]?.message).toMatch(msg);
    expect(atPath[0]?.message).not.toMatch(/expected number|received/);
  });

  it.each([
    [5000, /at most 1440/],
    [-3, /0 \(compensate at once\) or more/],
    [2.5, /whole number of minutes/],
  ])("rerun_window_minutes %s: the fix gives the accepted range and an example", (value, msg) => {
    for (const set of [
      (r: Mutable) => {
        r.policy = { rerun_window_minutes: value };
      },
      (r: Mutable) => {
        r.policy = { steps: { attach_queue_lane: { rerun_window_minutes: value } } };
      },
    ]) {
      const ps = problemsOf(set);
      const p = ps.find((x) => x.path.endsWith("rerun_window_minutes"));
      expect(p, JSON.stringify(ps)).toBeDefined();
      expect(p?.message).toMatch(msg);
      expect(p?.fix).toMatch(/from 0 .* to 1440/);
      expect(p?.fix).toMatch(/e\.g\. `rerun_window_minutes: 30`/);
      // The fix says what to write, not the problem again.
      expect(p?.fix).not.toContain(p?.message ?? "\u0000");
    }
  });

  it.each([
    ["policy.drill_every_days", 2.5, /from 1 to 3650 \(How often \(days\)/],
    ["policy.drill_max_age_days", 7.25, /from 1 to 3650 \(How old \(days\)/],
    ["deadlines.start_ms", 20_000.5, /Use milliseconds from 10000/],
  ])(
    "a fraction for a whole-number field (%s = %s): told in plain words, with the range to write",
    (at, value, fix) => {
      const [group, key] = at.split(".") as [string, string];
      const ps = problemsOf((r) => {
        r[group] = { ...(r[group] ?? {}), [key]: value };
      });
      expect(ps, JSON.stringify(ps)).toHaveLength(1);
      expect(ps[0]?.path).toBe(at);
      expect(ps[0]?.message).toBe(`\`${at}\` must be a whole number; got ${value}`);
      expect(ps[0]?.fix).toMatch(fix);
      expect(`${ps[0]?.message} ${ps[0]?.fix}`).not.toMatch(/expected int|received|an int\b/);
    },
  );

  it("a fraction where a field has its own words: the words once, the value, no repeated path", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves[0].traffic = 12.5;
    });
    const p = ps.find((x) => x.path === "rollout.waves.0.traffic");
    expect(p?.message, JSON.stringify(ps)).toBe("traffic must be a whole percent; got 12.5");
  });

  it("baseline weights not summing to 100", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].weight = 50;
      r.lanes[1].weight = 30;
      r.lanes[2].weight = 10;
    });
    expectProblem(ps, "lanes", /sum to 90, not 100/, /add up to 100/);
  });

  it("weights on some lanes only", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].weight = 50;
    });
    expectProblem(ps, "lanes", /1 of 3 lanes/, /every lane or on none/);
  });

  it("an unknown field, suggesting the near one", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].helth_url = r.lanes[0].health_url;
      delete r.lanes[0].health_url;
    });
    expectProblem(
      ps,
      "lanes.0.helth_url",
      /unknown field `helth_url`/,
      /Did you mean `health_url`\?/,
    );
    expectProblem(ps, "lanes.0.health_url", /is required/, /Add `health_url`: URL the smoke check/);
  });

  it("a wrong type and a bad enum value", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].port = "22";
      r.policy = { on_failure: "retry" };
    });
    expectProblem(ps, "lanes.0.port", /expected number, received string/, /port number/);
    expectProblem(ps, "policy.on_failure", /compensate|pause/, /Use one of: compensate, pause/);
  });

  it("a per-step policy for a step not in the catalogue", () => {
    const ps = problemsOf((r) => {
      r.policy = { steps: { set_trafic: { retries: 1 } } };
    });
    expectProblem(ps, "policy.steps.set_trafic", /unknown field/, /Did you mean `set_traffic`/);
  });

  it("input that is not a mapping", () => {
    for (const input of [null, "name: x", 42, []]) {
      const res = checkRecipe(input);
      expect(res.ok).toBe(false);
      if (!res.ok) expect(res.problems[0]?.path).toBe("");
    }
  });
});

describe("checkRecipe reports every problem at once", () => {
  it("several bad inputs give all their problems in one list", () => {
    const ps = problemsOf((r) => {
      r.image = "ghcr.io/acme/summarizer:v7";
      r.lanes[2].id = "lane-a";
      delete r.lanes[1].host_key;
      r.rollout.waves[1].traffic = 5;
      r.rollout.waves[2].traffic = 120;
      r.tool_revision = "abc";
    });
    const paths = ps.map((p) => p.path).sort();
    expect(paths).toEqual(
      expect.arrayContaining([
        "image",
        "lanes.1.host_key",
        "lanes.2.id",
        "rollout.waves.1.traffic",
        "rollout.waves.2.traffic",
        "tool_revision",
      ]),
    );
    for (const p of ps) {
      expect(p.message.length).toBeGreaterThan(0);
      expect(p.fix.length).toBeGreaterThan(0);
    }
  });
});

describe("checkRecipe: more refusals", () => {
  it("the same digest as image and previous_image", () => {
    const ps = problemsOf((r) => {
      r.previous_image = r.image.replace("summarizer@", "summarizer:v6@");
    });
    expectProblem(ps, "previous_image", /same digest/, /digest the lanes run now/);
  });

  it("a short tool_revision, and accepts a 64-hex one", () => {
    const ps = problemsOf((r) => {
      r.tool_revision = "34f9bae";
    });
    expectProblem(ps, "tool_revision", /full commit sha/, /git rev-parse HEAD/);
    const r = goodRecipe();
    r.tool_revision = NEW_DIGEST;
    expect(checkRecipe(r).ok).toBe(true);
  });

  it("a host with user or brackets", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].host = "deploy@gpu-0";
      r.lanes[1].host = "[::1]";
    });
    expectProblem(ps, "lanes.0.host", /DNS name or an IP address/, /without user or port/);
    expectProblem(ps, "lanes.1.host", /DNS name or an IP address/, /.+/);
  });
});

describe("checkRecipe: fixes say what to do", () => {
  it("no fix repeats its problem: ranges say the value to write, other rules point at the rule and the field's purpose", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves = [];
      r.policy = { rollback_window: "-1h" };
      r.credentials = [
        { ref: "vault://kv/x/key", revoke_tool: "run-smoke" },
        { ref: "vault://kv/x/key", revoke_tool: "run-smoke" },
      ];
    });
    for (const p of ps) {
      expect(p.fix).not.toMatch(/^Correct /);
      expect(p.fix.includes(p.message.replace(/^`[^`]*`: /, ""))).toBe(false);
    }
    expectProblem(
      ps,
      "rollout.waves",
      /at least one wave/,
      /^Give `rollout.waves` at least 1 entry\.$/,
    );
    expectProblem(ps, "credentials.1.ref", /listed twice/, /remove entry 1/);
    expectProblem(
      ps,
      "policy.rollback_window",
      /30m, 12h or 7d/,
      /How long after a release succeeded/,
    );
  });

  it("a migration's id and a dependency's name are not told the lane id's rule ('.' allowed, e.g. lane-a)", () => {
    const ps = problemsOf((r) => {
      r.migration = { id: "customers.email-norm", contract: { forward: "migrate-table" } };
      r.mutable_dependencies = [{ name: "a.b" }];
    });
    for (const path of ["migration.id", "mutable_dependencies.0.name"]) {
      const p = ps.find((x) => x.path === path);
      expect(p, path).toBeDefined();
      expect(p?.fix).not.toMatch(/lane-a|summarizer-v7-rollout|'\.'/);
    }
  });

  it("a strategy that is not a name is the one problem: the waves are not judged as canary waves", () => {
    const ps = problemsOf((r) => {
      r.strategy = "Rolling";
      for (const w of r.rollout.waves) delete w.traffic;
    });
    expect(ps.map((p) => p.path)).toEqual(["strategy"]);
  });
});

describe("checkRecipe: the drill policy", () => {
  it("refuses drill_stale without drill_max_age_days, naming the field and the fix", () => {
    const ps = problemsOf((r) => {
      r.policy = { ...(r.policy ?? {}), drill_stale: "refuse" };
    });
    expectProblem(
      ps,
      "policy.drill_stale",
      /sets no drill_max_age_days, so it would never apply/,
      /Set policy\.drill_max_age_days .* or remove policy\.drill_stale/,
    );
    expect(ps).toHaveLength(1);
  });

  it("refuses drill_every_days longer than drill_max_age_days", () => {
    const ps = problemsOf((r) => {
      r.policy = { ...(r.policy ?? {}), drill_max_age_days: 30, drill_every_days: 45 };
    });
    expectProblem(
      ps,
      "policy.drill_every_days",
      /drill_every_days \(45\) is longer than drill_max_age_days \(30\)/,
      /at most 30, or raise policy\.drill_max_age_days to at least 45/,
    );
  });

  it("accepts drill_stale with drill_max_age_days, and drill_every_days alone or within it", () => {
    for (const policy of [
      { drill_max_age_days: 30, drill_stale: "refuse" },
      { drill_every_days: 14 },
      { drill_max_age_days: 30, drill_every_days: 30 },
    ]) {
      const r = goodRecipe() as Mutable;
      r.policy = { ...(r.policy ?? {}), ...policy };
      const res = checkRecipe(r);
      expect(res.ok, JSON.stringify(res)).toBe(true);
    }
  });
});
