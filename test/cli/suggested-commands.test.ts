/**
 * Every command Baton suggests runs as written. Releases are made in the states an operator
 * meets (paused on a lost dispatch, held at a gate, paused at an inconclusive gate, paused by
 * an operator at a gate and between steps, waiting for promote or release, pending,
 * compensating, needs_operator, waiting for a restore, held for roll forward, rolled back,
 * succeeded, superseded); the `baton …` commands are collected from what each shows: the API's
 * reason, `available_actions`, `lifecycle_actions` and `lifecycle_note`, the API's refusals of
 * the verbs it does not accept, the dashboard's release page and confirmation pages, and
 * `baton status`. Each command, its marked placeholders filled in (`"<why>"`, the fixed
 * recipe, the bundle, `lane=<image|none>`), is run by the CLI in process against a twin of the
 * release (the same state, built again in a fresh engine): it must be accepted, or refused by
 * the engine with a 409 that says why; never a usage error (missing flag, unknown option) nor
 * a 400/422 for a field the suggestion left out.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { serve } from "@hono/node-server";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { runCli } from "../../engine/src/cli/program.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { VERB_NAMES, VERBS } from "../../engine/src/domain/verbs.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  createRelease,
  drive,
  type Harness,
  makeHarness,
  OPERATOR,
  op,
  pumpOnce,
  recipe,
  STORE_KINDS,
  type StoreKind,
  skipStore,
} from "../integration/service-harness.ts";
import { gatedRecipe, holdAtGate, type Rig, rig, run } from "../support/gate-rig.ts";
import { compensatedRelease, pausedRelease } from "./live-engine.ts";

const OTHER_IMAGE = `ghcr.io/acme/summarizer@sha256:${"f0".repeat(32)}`;

/** A release made in one state, in its own engine. */
interface Built {
  h: Harness;
  /** The release whose suggestions are collected (and, for superseded, the one that replaced it). */
  ids: string[];
  rig?: Rig;
}

/** Runner outcome: every runner step fails, forward and backward (needs_operator). */
const failRunners = (p: DispatchPayload) => (p.tool.includes("smoke") ? "pass" : "fail");

async function fresh(kind: StoreKind): Promise<Harness> {
  return makeHarness({ kind });
}

async function runningWithStepInFlight(h: Harness, r: RecipeInput): Promise<string> {
  const id = await createRelease(h, r);
  for (let i = 0; i < 100; i++) {
    const { fresh: sent } = await pumpOnce(h, () => "skip");
    if (sent.length > 0) return id;
  }
  throw new Error("[test] no dispatch went out");
}

/** A gated release held at its first wave's gate (evaluated at least once, still waiting). */
async function heldAtGate(kind: StoreKind, minSamples: number): Promise<Built> {
  const g = await rig(kind);
  const r = gatedRecipe({ min_samples: minSamples, max_wait_ms: 600_000, bake_ms: 300_000 });
  const id = await createRelease(g.h, r);
  await holdAtGate(g, id);
  return { h: g.h, ids: [id], rig: g };
}

const SCENARIOS: Record<string, (kind: StoreKind) => Promise<Built>> = {
  "paused on a lost dispatch": async (kind) => {
    const h = await fresh(kind);
    return { h, ids: [await pausedRelease(h)] };
  },
  "rolled back": async (kind) => {
    const h = await fresh(kind);
    return { h, ids: [await compensatedRelease(h)] };
  },
  needs_operator: async (kind) => {
    const h = await fresh(kind);
    const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
    await drive(h, failRunners);
    return { h, ids: [id] };
  },
  compensating: async (kind) => {
    const h = await fresh(kind);
    const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
    let held = false;
    await drive(h, (p) => {
      if (p.tool === "run-smoke") return "fail";
      if (p.step_run_id.endsWith("_b") && !held) {
        held = true;
        return "skip";
      }
      return "pass";
    });
    return { h, ids: [id] };
  },
  "paused by an operator between steps": async (kind) => {
    const h = await fresh(kind);
    const id = await runningWithStepInFlight(h, recipe(2));
    const res = await op(h, "POST", `/v1/releases/${id}/pause`, { reason: "checking GPU memory" });
    if (res.status !== 200) throw new Error(`[test] pause answered ${res.status}`);
    return { h, ids: [id] };
  },
  "waiting for promote": async (kind) => {
    const h = await fresh(kind);
    const id = await createRelease(h, recipe(2, { promotion: "manual" }));
    await drive(h);
    return { h, ids: [id] };
  },
  "deployed dark": async (kind) => {
    const h = await fresh(kind);
    const res = await op(h, "POST", "/v1/releases?exposure=dark", recipe(2));
    const id = ((await res.json()) as { id: string }).id;
    await drive(h);
    return { h, ids: [id] };
  },
  pending: async (kind) => {
    const h = await fresh(kind);
    const res = await op(h, "POST", "/v1/releases?start=false", recipe(2));
    return { h, ids: [((await res.json()) as { id: string }).id] };
  },
  "held for roll forward": async (kind) => {
    const h = await fresh(kind);
    const id = await createRelease(
      h,
      recipe(2, {
        recovery_class: "roll_forward_only",
        unsafe_after: { step: "attach_queue_lane", lane: "lane-a" },
        policy: { rerun_window_minutes: 0 },
      }),
    );
    await drive(h, (p) =>
      p.tool === "attach-queue-lane" &&
      (p.args as { lane: { id: string } }).lane.id === "lane-b" &&
      p.step_run_id.endsWith("_f")
        ? "fail"
        : "pass",
    );
    return { h, ids: [id] };
  },
  "waiting for its restore action": async (kind) => {
    const h = await fresh(kind);
    const id = await createRelease(
      h,
      recipe(2, {
        recovery_class: "recoverable",
        restore: "run the cache rebuild job",
        policy: { rerun_window_minutes: 0 },
      }),
    );
    await drive(h, (p) => (p.tool === "run-smoke" ? "fail" : "pass"));
    return { h, ids: [id] };
  },
  "succeeded, then superseded": async (kind) => {
    const h = await fresh(kind);
    const first = await createRelease(h, recipe(2));
    await drive(h);
    const second = await createRelease(
      h,
      recipe(2, { image: OTHER_IMAGE, previous_image: recipe().image as string }),
    );
    await drive(h);
    return { h, ids: [second, first] };
  },
  "held at a gate": (kind) => heldAtGate(kind, 400),
  "paused by an operator at a gate": async (kind) => {
    const b = await heldAtGate(kind, 400);
    const res = await op(b.h, "POST", `/v1/releases/${b.ids[0]}/pause`, {
      reason: "checking GPU memory",
    });
    if (res.status !== 200) throw new Error(`[test] pause answered ${res.status}`);
    return b;
  },
  "paused at an inconclusive gate": async (kind) => {
    const g = await rig(kind);
    const id = await createRelease(
      g.h,
      gatedRecipe({ min_samples: 1_000_000, max_wait_ms: 30_000, bake_ms: 10_000 }),
    );
    await run(g);
    return { h: g.h, ids: [id], rig: g };
  },
};

async function close(b: Built): Promise<void> {
  b.rig?.traffic.stop();
  await b.h.close();
}

/** The POSTs an engine answered (path, status, error code), newest last. */
interface Served {
  url: string;
  posts: { path: string; status: number; code: string | null }[];
  close(): Promise<void>;
}

async function served(h: Harness): Promise<Served> {
  const posts: Served["posts"] = [];
  const server = serve({
    fetch: async (req: Request) => {
      const res = await h.engine.app.fetch(req);
      if (req.method === "POST") {
        const body = (await res
          .clone()
          .json()
          .catch(() => null)) as { error?: { code?: string } } | null;
        posts.push({
          path: new URL(req.url).pathname,
          status: res.status,
          code: body?.error?.code ?? null,
        });
      }
      return res;
    },
    port: 0,
    hostname: "127.0.0.1",
  });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    posts,
    close: () =>
      new Promise<void>((resolve) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

async function cli(
  url: string,
  argv: string[],
): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runCli(["--engine", url, "--token", OPERATOR, ...argv], {
    out: { write: (s: string) => (out += s) },
    err: { write: (s: string) => (err += s) },
  });
  return { code, out, err };
}

const COMMANDS = new Set([...VERB_NAMES.map((v) => VERBS[v].command), "status", "watch"]);
const ID = /^(r\d+|sr_\d+_\d+_[fb]|<[a-z-]+>)$/;

/**
 * The `baton <command> <id> …` lines in `text`: from `baton` to the end of its arguments (a
 * `)`, backtick, `;`, `,`, newline or two spaces outside quotes), for the verbs, `status` and
 * `watch`, with an id or an id placeholder (a verb named in prose, `baton resume`, is not a
 * suggestion).
 */
function commandsIn(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/\bbaton ([a-z-]+) /g)) {
    if (!COMMANDS.has(m[1] as string)) continue;
    let cmd = "";
    let quoted = false;
    for (let i = m.index; i < text.length; i++) {
      const c = text[i] as string;
      if (c === '"') quoted = !quoted;
      else if (!quoted && (c === ")" || c === "`" || c === ";" || c === "," || c === "\n")) break;
      else if (!quoted && c === " " && text[i + 1] === " ") break;
      cmd += c;
    }
    cmd = cmd.trim().replace(/\.$/, "");
    const id = cmd.split(" ")[2] ?? "";
    if (ID.test(id)) out.push(cmd);
  }
  return out;
}

/** Splits a command line as a shell would (double quotes group; no escapes are suggested). */
function argv(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"([^"]*)"|(\S+)/g)) out.push(m[1] ?? (m[2] as string));
  return out;
}

/** The files a suggestion's placeholders are filled with. */
interface Files {
  recipe: string;
  bundle: string;
}

/**
 * `line` with its placeholders filled: a quoted one (`"<why>"`) with plain text, the recipe and
 * bundle files, a lane's image with `none`. @throws on a placeholder it does not know.
 */
function filled(line: string, files: Files, release: string): string[] {
  return argv(line)
    .slice(1)
    .map((a) => {
      if (!a.includes("<")) return a;
      if (/^<[^<>]*>$/.test(a) && line.includes(`"${a}"`))
        return "written by the suggested-commands test";
      if (/^<[a-z-]*recipe[a-z.-]*>$/.test(a)) return files.recipe;
      if (a === "<bundle.json>") return files.bundle;
      if (a === "<id>") return release;
      const lane = /^([a-z0-9-]+)=<image\|none>$/.exec(a);
      if (lane) return `${lane[1]}=none`;
      throw new Error(`[test] unknown placeholder ${a} in: ${line}`);
    });
}

/** The text of an HTML page as a person reads it (tags dropped, entities decoded). */
function text(html: string): string {
  return (
    html
      .replace(/<script[\s\S]*?<\/script>/g, "")
      .replace(/<style[\s\S]*?<\/style>/g, "")
      // A tag ends a line of text: a command never spans elements (it sits in one <code>).
      .replace(/<[^>]+>/g, "\n")
      .replace(/&lt;/g, "<")
      .replace(/&gt;/g, ">")
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&amp;/g, "&")
  );
}

/** Every suggestion the release `id` shows through the API, its refusals, the dashboard and the CLI. */
async function suggestions(h: Harness, url: string, id: string): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  const add = (where: string, t: string | null | undefined) => {
    for (const c of commandsIn(t ?? "")) if (!found.has(c)) found.set(c, where);
  };
  const rec = (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as {
    reason: string | null;
    lifecycle_note: string | null;
    available_actions: { command: string; effect: string }[];
    lifecycle_actions: { command: string; effect: string }[];
  };
  add("API reason", rec.reason);
  add("API lifecycle_note", rec.lifecycle_note);
  for (const a of rec.available_actions) add("API available_actions", `${a.command}\n${a.effect}`);
  for (const a of rec.lifecycle_actions) add("API lifecycle_actions", `${a.command}\n${a.effect}`);
  const page = await fetch(`${url}/releases/${id}`, {
    headers: { authorization: `Bearer ${OPERATOR}` },
  });
  const html = await page.text();
  add("dashboard release page", text(html));
  // The confirmation pages of the actions it offers (not its live stream or other links).
  for (const m of html.matchAll(/href="(\/(?:releases|step-runs)\/[^"/]+\/([a-z-]+))"/g)) {
    if (!COMMANDS.has(m[2] as string)) continue;
    const confirm = await fetch(`${url}${m[1]}`, {
      headers: { authorization: `Bearer ${OPERATOR}` },
    });
    add(`dashboard ${m[1]}`, text(await confirm.text()));
  }
  const status = await cli(url, ["status", id]);
  add("baton status", status.out);
  // Last, as they may change the release: the verbs it does not offer, refused, say what it
  // accepts instead.
  const offered = new Set(
    [...rec.available_actions, ...rec.lifecycle_actions].map((a) => a.command.split(" ")[1]),
  );
  for (const v of [
    "resume",
    "promote",
    "release",
    "pause",
    "abort",
    "rollback",
    "confirm-restore",
  ]) {
    if (offered.has(v)) continue;
    const res = await op(h, "POST", `/v1/releases/${id}/${v}`, { reason: "probing refusals" });
    if (res.status >= 400) {
      const body = (await res.json()) as { error?: { message?: string } };
      add(`API refusal of ${v}`, body.error?.message);
    }
  }
  return found;
}

describe.each(STORE_KINDS)("every suggested command runs as written, on %s", (kind) => {
  const dir = mkdtempSync(path.join(tmpdir(), "baton-suggest-"));
  const files: Files = {
    recipe: path.join(dir, "fixed-recipe.yaml"),
    bundle: path.join(dir, "bundle.json"),
  };
  // The fix: a new image for both lanes in one wave at 100% (a roll forward replaces the
  // candidate on lanes that may run it, so no lane on the old image has to keep serving).
  const fixed = recipe(2, { image: OTHER_IMAGE });
  fixed.rollout = { waves: [{ lanes: ["lane-a", "lane-b"], traffic: 100 }] };
  writeFileSync(files.recipe, stringify(fixed));
  writeFileSync(files.bundle, "{}\n");
  const seen: string[] = [];
  afterAll(() => {
    // What was run, for the log of a CI run.
    console.log(`[test] suggestions run:\n${seen.join("\n")}`);
  });

  it.skipIf(skipStore(kind)).each(Object.keys(SCENARIOS))(
    "%s",
    { timeout: 240_000 },
    async (name) => {
      const build = () => (SCENARIOS[name] as (k: StoreKind) => Promise<Built>)(kind);
      const first = await build();
      const found = new Map<string, { where: string; id: string }>();
      try {
        const s = await served(first.h);
        try {
          for (const id of first.ids) {
            for (const [c, where] of await suggestions(first.h, s.url, id)) {
              if (!found.has(c)) found.set(c, { where, id });
            }
          }
        } finally {
          await s.close();
        }
      } finally {
        await close(first);
      }
      expect(found.size, `${name}: no suggestion found`).toBeGreaterThan(0);
      const bad: string[] = [];
      for (const [line, { where, id }] of found) {
        const twin = await build();
        const s = await served(twin.h);
        try {
          const args = filled(line, files, id);
          // watch follows until the release ends or waits; bound it here.
          if (args[0] === "watch") args.push("--timeout", "2", "--interval", "100");
          // verify waits for the engine's verdict; this twin runs no reconciler: bound the wait
          // (what is checked is that the engine accepts it, 202).
          if (args[0] === "verify") args.push("--timeout", "1", "--interval", "100");
          const r = await cli(s.url, args);
          const post = s.posts.at(-1);
          const outcome = post
            ? `${post.status}${post.code ? ` ${post.code}` : ""}`
            : `exit ${r.code}`;
          seen.push(`${name} | ${where} | ${line} -> ${outcome}`);
          const ok =
            r.code !== 2 &&
            (post ? [200, 201, 202, 409].includes(post.status) : true) &&
            !/unknown option|missing required|required option|is required/i.test(r.err);
          if (!ok)
            bad.push(`${line} (from ${where}) -> ${outcome}, exit ${r.code}: ${r.err.trim()}`);
        } finally {
          await s.close();
          await close(twin);
        }
      }
      expect(bad).toEqual([]);
    },
  );
});
