/**
 * One schema per field (engine/src/protocol/fields.ts): the contract check refuses what a release
 * tool, deploy.sh or the control plane would refuse, naming the field and the fix, so a recipe
 * that passes `baton check` never strands a release with a lane excluded. Each case runs the
 * real consumers: the tool's argument parser, deploy.sh's own patterns through `grep -E`, and the
 * reference control plane's write path.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ControlPlaneCore } from "../../engine/src/control-plane/core.ts";
import { CpError } from "../../engine/src/control-plane/errors.ts";
import { MemoryCpStore } from "../../engine/src/control-plane/memory-store.ts";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import type { Problem } from "../../engine/src/domain/errors.ts";
import { actionOf } from "../../engine/src/protocol/control-plane.ts";
import {
  CONTROL_PLANE_NAME_PATTERN,
  HEALTH_URL_PATTERN,
  IMAGE_PATTERN,
  LANE_ID_PATTERN,
} from "../../engine/src/protocol/fields.ts";
import { ToolArgs } from "../../scripts/lib/tool-args.ts";
import { goodRecipe, NEW_DIGEST } from "./recipe-fixture.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests break recipes in arbitrary ways
type Mutable = Record<string, any>;

const DEPLOY_SH = readFileSync("scripts/target/deploy.sh", "utf8");
/** deploy.sh's pattern assigned to `name` (e.g. IMAGE_RE). */
function shellPattern(name: string): string {
  const m = new RegExp(`^${name}='([^']*)'$`, "m").exec(DEPLOY_SH);
  if (!m?.[1]) throw new Error(`deploy.sh has no ${name}`);
  return m[1];
}
/** JS source of a pattern as ERE text (no anchors, `\/` unescaped). */
const ere = (re: RegExp) => re.source.replace(/^\^/, "").replace(/\$$/, "").replaceAll("\\/", "/");

/** Whether deploy.sh's check (`grep -Eqx <pattern>`, plus the URL length limit) accepts `value`. */
function deployShAccepts(kind: "LANE_RE" | "IMAGE_RE" | "URL_RE", value: string): boolean {
  if (kind === "URL_RE" && value.length > Number(/^URL_MAX=(\d+)$/m.exec(DEPLOY_SH)?.[1]))
    return false;
  const r = spawnSync("grep", ["-Eqx", shellPattern(kind)], { input: `${value}\n` });
  return r.status === 0;
}

/** The contract check over a mutated good recipe: the compiled manifest or the problems. */
function check(mutate: (r: Mutable) => void) {
  const r = structuredClone(goodRecipe()) as Mutable;
  mutate(r);
  return checkAndCompile(r);
}

/** Every runner step's args through the tool's own parser; the messages of the refusals. */
function toolRefusals(manifest: { steps: { forward: unknown; backward: unknown }[] }): string[] {
  const out: string[] = [];
  for (const s of manifest.steps) {
    for (const a of [s.forward, s.backward] as { kind?: string; args?: unknown }[]) {
      if (a?.kind !== "runner") continue;
      const p = ToolArgs.safeParse(a.args);
      if (!p.success) out.push(p.error.issues.map((i) => i.message).join("; "));
    }
  }
  return out;
}

/** Writes the model and each lane to the reference control plane; the refusals. */
function controlPlaneRefusals(model: string, lanes: string[]): string[] {
  const core = new ControlPlaneCore(new MemoryCpStore());
  const out: string[] = [];
  const writes = [
    ...lanes.map((lane) => ({ kind: "declare_lane" as const, lane, model })),
    actionOf(
      {
        op: "set_traffic",
        weights: Object.fromEntries(lanes.map((l, i) => [l, i === 0 ? 100 : 0])),
        percent: 100,
      },
      model,
    ),
  ];
  writes.forEach((w, i) => {
    try {
      if (w) core.write({ operation_key: `k${i}`, release_id: "r1", generation: 1 }, w);
    } catch (e) {
      if (!(e instanceof CpError)) throw e;
      out.push(e.message);
    }
  });
  return out;
}

function problemAt(problems: Problem[], path: string): Problem {
  const p = problems.find((x) => x.path === path);
  if (!p) throw new Error(`no problem at ${path}: ${JSON.stringify(problems)}`);
  return p;
}

describe("deploy.sh checks the fields with the protocol's patterns verbatim", () => {
  it("lane id, image and health URL patterns equal protocol/fields.ts", () => {
    expect(shellPattern("LANE_RE")).toBe(ere(LANE_ID_PATTERN));
    expect(shellPattern("IMAGE_RE")).toBe(ere(IMAGE_PATTERN));
    expect(shellPattern("URL_RE")).toBe(ere(HEALTH_URL_PATTERN));
    expect(DEPLOY_SH).toMatch(/^URL_MAX=400$/m);
  });

  it("the control plane's OpenAPI Name is the protocol's control-plane name pattern", () => {
    const doc = readFileSync("docs/control-plane.openapi.yaml", "utf8");
    expect(doc).toContain(`pattern: "${CONTROL_PLANE_NAME_PATTERN.source}"`);
  });
});

const IMG = (name: string) => `${name}@sha256:${NEW_DIGEST}`;

describe("the contract check refuses what a tool, deploy.sh or the control plane refuses", () => {
  type Case = {
    name: string;
    mutate: (r: Mutable) => void;
    path: string;
    message: RegExp;
    fix: RegExp;
    /** What the consumer would say about the value (it must refuse it too). */
    consumer: () => boolean;
  };
  const longUrl = `http://gpu-0.example/${"x".repeat(400)}`;
  const cases: Case[] = [
    {
      name: "image with an uppercase repository name",
      mutate: (r) => (r.image = IMG("ghcr.io/Acme/summarizer:v7")),
      path: "image",
      message: /uppercase letters in its name/,
      fix: /name lowercase/,
      consumer: () =>
        !ToolArgs.shape.image.safeParse(IMG("ghcr.io/Acme/summarizer:v7")).success &&
        !deployShAccepts("IMAGE_RE", IMG("ghcr.io/Acme/summarizer:v7")),
    },
    {
      name: "model with a space",
      mutate: (r) => (r.model = "summarizer v7"),
      path: "model",
      message: /model must be a control-plane name/,
      fix: /no spaces/,
      consumer: () => controlPlaneRefusals("summarizer v7", ["lane-a"]).length > 0,
    },
    {
      name: "model over 64 characters",
      mutate: (r) => (r.model = "m".repeat(65)),
      path: "model",
      message: /at most 64 characters/,
      fix: /1–64/,
      consumer: () => controlPlaneRefusals("m".repeat(65), ["lane-a"]).length > 0,
    },
    {
      name: "health URL with an IPv6 literal",
      mutate: (r) => (r.lanes[0].health_url = "http://[fd00::5]:8080/healthz"),
      path: "lanes.0.health_url",
      message: /IPv6 literal/,
      fix: /IPv4 address/,
      consumer: () => !deployShAccepts("URL_RE", "http://[fd00::5]:8080/healthz"),
    },
    {
      name: "health URL with a comma",
      mutate: (r) => (r.lanes[0].health_url = "http://gpu-0.example:8080/healthz?a=1,2"),
      path: "lanes.0.health_url",
      message: /must not hold ','/,
      fix: /%2C/,
      consumer: () => !deployShAccepts("URL_RE", "http://gpu-0.example:8080/healthz?a=1,2"),
    },
    {
      name: "health URL over 400 characters",
      mutate: (r) => (r.lanes[0].health_url = longUrl),
      path: "lanes.0.health_url",
      message: /at most 400 characters/,
      fix: /at most 400/,
      consumer: () => !deployShAccepts("URL_RE", longUrl),
    },
    {
      name: "health URL with a space",
      mutate: (r) => (r.lanes[0].health_url = "http://gpu-0.example/health z"),
      path: "lanes.0.health_url",
      message: /only letters, digits/,
      fix: /percent-encode/,
      consumer: () => !deployShAccepts("URL_RE", "http://gpu-0.example/health z"),
    },
    {
      name: "lane id of 65 characters",
      mutate: (r) => {
        const id = "l".repeat(65);
        r.lanes[0].id = id;
        r.rollout.waves[0].lanes = [id];
      },
      path: "lanes.0.id",
      message: /at most 64 characters/,
      fix: /1–64 lowercase/,
      consumer: () => !deployShAccepts("LANE_RE", "l".repeat(65)),
    },
    {
      name: "lane id with uppercase",
      mutate: (r) => {
        r.lanes[0].id = "Lane-A";
        r.rollout.waves[0].lanes = ["Lane-A"];
      },
      path: "lanes.0.id",
      message:
        /lane id "Lane-A" has "L" \(U\+004C\) at position 1; lane ids must be ASCII: lowercase letters/,
      fix: /lowercase letters/,
      consumer: () => !deployShAccepts("LANE_RE", "Lane-A"),
    },
    {
      name: "lane id with a look-alike (Cyrillic а)",
      mutate: (r) => {
        r.lanes[0].id = "l\u0430ne-a";
        r.rollout.waves[0].lanes = ["l\u0430ne-a"];
      },
      path: "lanes.0.id",
      message:
        /lane id "l\u0430ne-a" has U\+0430 CYRILLIC SMALL LETTER A, not an ASCII character, at position 2; lane ids must be ASCII/,
      fix: /lowercase letters/,
      consumer: () => !deployShAccepts("LANE_RE", "l\u0430ne-a"),
    },
  ];

  it.each(cases)("$name: refused naming the field and the fix", (c) => {
    expect(c.consumer()).toBe(true);
    const res = check(c.mutate);
    expect(res.ok).toBe(false);
    if (res.ok) return;
    const p = problemAt(res.problems, c.path);
    expect(p.message).toMatch(c.message);
    expect(p.fix).toMatch(c.fix);
  });

  it("a capability with a look-alike (Cyrillic ѕ) or a space is refused naming the character, its code point and position", () => {
    const cases: [string, RegExp][] = [
      [
        "\u0455ummarize",
        /capability "\u0455ummarize" has U\+0455 CYRILLIC SMALL LETTER DZE, not an ASCII character, at position 1; capabilities must be ASCII: letters, digits, '\.', '_', ':' or '-' \(starting with a letter or digit\)/,
      ],
      [
        "summarize long",
        /capability "summarize long" has " " \(U\+0020\) at position 10; capabilities must be ASCII/,
      ],
      ["-chat", /capability "-chat" has "-" \(U\+002D\) at position 1; capabilities must be ASCII/],
    ];
    for (const [cap, message] of cases) {
      const res = check((r) => {
        r.lanes[1].capabilities = ["summarize", cap];
      });
      expect(res.ok, cap).toBe(false);
      if (res.ok) continue;
      const p = problemAt(res.problems, "lanes.1.capabilities.1");
      expect(p.message).toMatch(message);
      expect(p.fix).toMatch(/letters, digits, '\.', '_', ':' or '-'.*e\.g\. `summarize-long`/);
    }
    // What the examples and the docs use passes.
    const ok = check((r) => {
      r.lanes[0].capabilities = ["summarize", "summarize-long", "long-context", "chat:v2", "x.y_z"];
    });
    expect(ok.ok).toBe(true);
  });

  it("an uppercase tag before the digest passes everywhere (the tool and deploy.sh too)", () => {
    const image = IMG("ghcr.io/acme/summarizer:V7");
    const res = check((r) => (r.image = image));
    expect(res.ok, JSON.stringify(res)).toBe(true);
    if (!res.ok) return;
    expect(toolRefusals(res.manifest)).toEqual([]);
    expect(deployShAccepts("IMAGE_RE", image)).toBe(true);
  });

  it("a lane id of 64 characters and a 400-character health URL pass everywhere", () => {
    const id = "l".repeat(64);
    const url = `http://gpu-0.example/${"x".repeat(400 - 21)}`;
    expect(url).toHaveLength(400);
    const res = check((r) => {
      r.lanes[0].id = id;
      r.rollout.waves[0].lanes = [id];
      r.lanes[0].health_url = url;
    });
    expect(res.ok, JSON.stringify(res)).toBe(true);
    if (!res.ok) return;
    expect(toolRefusals(res.manifest)).toEqual([]);
    expect(deployShAccepts("LANE_RE", id)).toBe(true);
    expect(deployShAccepts("URL_RE", url)).toBe(true);
    expect(controlPlaneRefusals("summarizer-v7", [id])).toEqual([]);
  });
});

describe("whatever the contract check passes, every consumer accepts (property)", () => {
  // Characters chosen to hit the edges: case, separators, brackets, comma, space, control.
  const piece = fc.oneof(
    { weight: 30, arbitrary: fc.constantFrom("a", "b", "7", "-") },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        "Z",
        "0",
        ".",
        "_",
        "-",
        ":",
        "/",
        "?",
        "=",
        "%",
        ",",
        " ",
        "[",
        "]",
        "@",
        "\u0000",
        "é",
      ),
    },
  );
  const text = (max: number) =>
    fc.array(piece, { minLength: 1, maxLength: max }).map((a) => a.join(""));

  it("model, lane id, host, user, image and health URL", () => {
    let passed = 0;
    fc.assert(
      fc.property(
        fc.record({
          model: text(8),
          lane: text(6),
          host: text(6),
          user: text(5),
          tag: text(5),
          path: text(8),
          long: fc.integer({ min: 0, max: 420 }),
        }),
        (v) => {
          const id = v.lane;
          const res = check((r) => {
            r.model = v.model;
            r.lanes[0].id = id;
            r.rollout.waves[0].lanes = [id];
            r.lanes[0].host = v.host;
            r.lanes[0].user = v.user;
            r.image = IMG(`ghcr.io/acme/summarizer:${v.tag}`);
            r.lanes[0].health_url = `http://gpu-0.example/${v.path}${"x".repeat(v.long)}`;
          });
          if (!res.ok) return;
          passed++;
          expect(toolRefusals(res.manifest)).toEqual([]);
          expect(
            controlPlaneRefusals(
              res.manifest.model,
              res.manifest.lanes.map((l) => l.id),
            ),
          ).toEqual([]);
          for (const l of res.manifest.lanes) {
            expect(LANE_ID_PATTERN.test(l.id)).toBe(true);
            expect(HEALTH_URL_PATTERN.test(l.health_url) && l.health_url.length <= 400).toBe(true);
          }
        },
      ),
      { numRuns: 300, seed: 14 },
    );
    // The property is not vacuous: a share of the generated recipes passes the check.
    expect(passed).toBeGreaterThan(10);
  });

  it("deploy.sh's grep -E agrees with the JS patterns on edge values", () => {
    const values = [
      IMG("ghcr.io/acme/summarizer:V7"),
      IMG("localhost:5000/acme/s"),
      IMG("ghcr.io/Acme/s"),
      IMG("ghcr.io/acme/s:"),
      `ghcr.io/acme/s@sha256:${NEW_DIGEST.toUpperCase()}`,
    ];
    for (const v of values) expect(deployShAccepts("IMAGE_RE", v)).toBe(IMAGE_PATTERN.test(v));
    for (const v of ["lane-a", "a", "-a", "a:b", "A", "l".repeat(64), "l".repeat(65)])
      expect(deployShAccepts("LANE_RE", v)).toBe(LANE_ID_PATTERN.test(v));
  });
});
