/**
 * Hostile input from outside, as a stranger sends it: the engine runs as its own process
 * (test/chaos/fuzz-engine.ts) on a real socket and a real store, and this harness sends every
 * route it serves (API, callbacks, dashboard pages and forms, `/login`) every content type
 * (JSON, YAML, multipart with good and bad boundaries, urlencoded, none, garbage types, binary),
 * with and without the operator token, and from a second loopback address (127.0.0.2) with
 * wrong tokens (sign-ins come from a third, 127.0.0.3: failed credentials are throttled per
 * address, and the operator's own requests must keep reaching the routes). Besides the fixed cases: recipes nested by indentation (`- `, `? `) and by
 * brackets at and past the nesting limit, tens of thousands of keys in JSON and YAML, wrapped
 * as a signed start and sent to `/roll-forward` of a release that does not exist; then
 * fast-check cases (`runs` each) over recipes, YAML text, forms, signed callbacks and random
 * route × content type × body.
 *
 * Counted: `cases` (requests sent), `serverErrors` (5xx answers, and connections dropped by a
 * live engine), `crashes` (the engine process exiting; it is restarted on the same store and
 * the run goes on), `maxHealthzMs` (a concurrent `/healthz`, polled every 50 ms from its own
 * connection, slowest answer or longest wait while the engine was up), `stuckReleases`
 * (releases not in a terminal state that offer no exit at all: neither an available action
 * nor a lifecycle action) and `halfWritten` (read from the store after the engine stopped:
 * releases that do not read back whole, attempt results without their callback).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { stringify as toYaml } from "yaml";
import type { ReleaseState } from "../../engine/src/domain/states.ts";
import { TERMINAL_RELEASE_STATES } from "../../engine/src/domain/states.ts";
import type { Store } from "../../engine/src/ports/store.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import { OPERATOR, recipe, SECRET, SHA } from "../integration/service-harness.ts";
import { bundledNodeArgs } from "../support/bundles.ts";

/** What one store's run found. */
export interface OutsideReport {
  cases: number;
  serverErrors: number;
  crashes: number;
  halfWritten: number;
  stuckReleases: number;
  maxHealthzMs: number;
  healthzPolls: number;
  /** Up to 40 descriptions of what went wrong (5xx bodies, crashes with the case that did it). */
  problems: string[];
  /** Answers by status (`"200"`, `"400"`, …, `"drop"` for a connection closed with no answer). */
  statuses: Record<string, number>;
}

const REPO = new URL("../..", import.meta.url).pathname;
const STRANGER = "127.0.0.2";
const SIGN_IN = "127.0.0.3";
const WRONG = "Bearer wrong-token-0123456789abcdefgh";

interface Answer {
  status: number | "drop";
  body: string;
}

interface Proc {
  child: ChildProcess;
  port: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  alive: () => boolean;
  output: () => string;
}

/** Starts the fuzz engine; resolves once it prints its port (or rejects with its output). */
async function startEngine(env: Record<string, string>): Promise<{ proc: Proc; routes: Route[] }> {
  // The fuzz engine's bundle (test/support/bundles.ts): one file to load instead of tsx.
  const child = spawn(process.execPath, await bundledNodeArgs("test/chaos/fuzz-engine.ts"), {
    cwd: REPO,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let gone = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) =>
    child.once("exit", (code, signal) => {
      gone = true;
      ok({ code, signal });
    }),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`[fuzz] the engine did not start in 120 s:\n${out.slice(-2000)}`));
    }, 120_000);
    let routes: Route[] = [];
    const keep = (d: Buffer) => {
      out = (out + d.toString()).slice(-65_536);
      const r = /^ROUTES (.*)$/m.exec(out);
      if (r?.[1] && routes.length === 0) routes = JSON.parse(r[1]) as Route[];
      const m = /^PORT (\d+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({
          proc: { child, port: Number(m[1]), exited, alive: () => !gone, output: () => out },
          routes,
        });
      }
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", (d: Buffer) => {
      out = (out + d.toString()).slice(-65_536);
    });
    void exited.then((e) => {
      clearTimeout(timer);
      reject(
        new Error(
          `[fuzz] the engine exited (${e.code ?? e.signal}) while starting:\n${out.slice(-2000)}`,
        ),
      );
    });
  });
}

interface Route {
  method: string;
  path: string;
}

/** One request over its own connection (no keep-alive). */
function send(
  port: number,
  method: string,
  path: string,
  o: {
    headers?: Record<string, string>;
    body?: string | Uint8Array;
    from?: string;
    timeoutMs?: number;
  } = {},
): Promise<Answer> {
  return new Promise((resolve) => {
    const body =
      o.body === undefined
        ? undefined
        : typeof o.body === "string"
          ? Buffer.from(o.body)
          : Buffer.from(o.body);
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        agent: false,
        ...(o.from ? { localAddress: o.from } : {}),
        headers: {
          ...(body ? { "content-length": String(body.length) } : {}),
          ...o.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (d: Buffer) => {
          if (size < 4096) chunks.push(d);
          size += d.length;
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString("utf8").slice(0, 4096),
          }),
        );
        res.on("error", () => resolve({ status: res.statusCode ?? 0, body: "" }));
      },
    );
    req.setTimeout(o.timeoutMs ?? 60_000, () => req.destroy(new Error("timeout")));
    req.on("error", (e) => resolve({ status: "drop", body: String(e.message) }));
    if (body) req.end(body);
    else req.end();
  });
}

/** The bodies each route gets, by content type: [label, content-type or null, body]. */
function bodyKinds(): [string, string | null, string | Uint8Array][] {
  const yamlRecipe = toYaml(recipe(2));
  return [
    ["none", null, ""],
    ["no type, garbage", null, "\u0000\u00ff garbage {[("],
    ["json object", "application/json", '{"reason":"fuzz","actor":"fuzz"}'],
    ["json broken", "application/json", '{"reason":'],
    ["json array", "application/json", "[1,2,3]"],
    ["json deep", "application/json", `${"[".repeat(5000)}${"]".repeat(5000)}`],
    ["yaml recipe", "application/yaml", yamlRecipe],
    ["yaml seq nest 1000", "application/yaml", `${"- ".repeat(1000)}x`],
    ["yaml key nest 1000", "application/yaml", `${"? ".repeat(1000)}x`],
    ["multipart bad boundary", "multipart/form-data; boundary=zz", "x"],
    ["multipart no boundary", "multipart/form-data", "x"],
    [
      "multipart fields",
      "multipart/form-data; boundary=BATONFUZZ",
      '--BATONFUZZ\r\nContent-Disposition: form-data; name="token"\r\n\r\nnot-a-token\r\n--BATONFUZZ\r\nContent-Disposition: form-data; name="confirm"\r\n\r\nyes\r\n--BATONFUZZ--\r\n',
    ],
    [
      "multipart truncated",
      "multipart/form-data; boundary=BATONFUZZ",
      '--BATONFUZZ\r\nContent-Disposition: form-data; name="token"\r\n\r\nabc',
    ],
    ["urlencoded garbage", "application/x-www-form-urlencoded", "%%%&&==%ZZ&\u0000=\uffff"],
    [
      "urlencoded fields",
      "application/x-www-form-urlencoded",
      "token=abc&next=%2Freleases&confirm=yes&reason=fuzz",
    ],
    ["text", "text/plain", "hello"],
    ["binary", "application/octet-stream", new Uint8Array([0xff, 0xfe, 0x00, 0xc3, 0x28, 0x80])],
    ["bad type", "a/b; ;;; boundary=", "x=y"],
  ];
}

/** Recipes that are too complex to read, at and past the limits, and the largest allowed. */
function limitBodies(): [string, string, string][] {
  const valid = recipe(2) as unknown as Record<string, unknown>;
  const many = (n: number) => {
    const o: Record<string, unknown> = { ...valid };
    for (let i = 0; i < n; i++) o[`k${i}`] = i;
    return o;
  };
  const nestSeq = (n: number) => `${"- ".repeat(n)}x`;
  const nestKey = (n: number) => `${"? ".repeat(n)}x`;
  const nestIndent = (n: number) =>
    `${Array.from({ length: n }, (_, i) => `${" ".repeat(i)}k${i}:`).join("\n")} x\n`;
  const nestFlow = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
  const out: [string, string, string][] = [];
  for (const n of [63, 64, 65, 1000]) {
    out.push([`yaml "- " x${n}`, "application/yaml", nestSeq(n)]);
    out.push([`yaml "? " x${n}`, "application/yaml", nestKey(n)]);
    out.push([`yaml indented keys x${n}`, "application/yaml", nestIndent(n)]);
    out.push([`brackets x${n}`, "application/json", nestFlow(n)]);
  }
  for (const n of [5_000, 9_990, 10_010, 40_000, 60_000]) {
    const big = many(n);
    out.push([`json ${n} keys`, "application/json", JSON.stringify(big)]);
    out.push([`yaml ${n} keys`, "application/yaml", toYaml(big)]);
  }
  // The largest body under the recipe limit: one flat mapping padded to ~1 MiB.
  out.push([
    "1 MiB of lines",
    "application/yaml",
    `${toYaml(valid)}${Array.from({ length: 9_000 }, (_, i) => `# ${"p".repeat(100)} ${i}`).join("\n")}\n`,
  ]);
  out.push([
    "over 1 MiB",
    "application/json",
    JSON.stringify({ ...valid, pad: "x".repeat(1_100_000) }),
  ]);
  out.push(["wrapped seq nest", "application/json", JSON.stringify({ recipe: nestSeq(1000) })]);
  out.push(["wrapped key nest", "application/json", JSON.stringify({ recipe: nestKey(1000) })]);
  return out;
}

/**
 * Runs every case against a fresh engine process on `kind` (Postgres needs `pgUrl`), `runs`
 * fast-check cases per property.
 */
export async function fuzzFromOutside(
  kind: "sqlite" | "postgres",
  runs: number,
  pgUrl?: string,
): Promise<OutsideReport> {
  const dir = mkdtempSync(join(tmpdir(), "baton-fuzz-out-"));
  const schema = `fuzz_${process.pid}_${Date.now() % 1e8}`;
  const env: Record<string, string> = { FUZZ_DATA_DIR: dir };
  if (kind === "postgres") {
    if (!pgUrl) throw new Error("[fuzz] Postgres needs BATON_TEST_DATABASE_URL");
    env.FUZZ_DATABASE_URL = pgUrl;
    env.FUZZ_PG_SCHEMA = schema;
  }
  const r: OutsideReport = {
    cases: 0,
    serverErrors: 0,
    crashes: 0,
    halfWritten: 0,
    stuckReleases: 0,
    maxHealthzMs: 0,
    healthzPolls: 0,
    problems: [],
    statuses: {},
  };
  const t0 = Date.now();
  const problem = (p: string) => {
    if (r.problems.length < 40) r.problems.push(p.slice(0, 400));
    // A crash is said as it happens: a run cut short still shows what killed the engine.
    if (p.startsWith("CRASH")) console.log(`[fuzz] ${kind} ${p.slice(0, 400)}`);
  };
  const phase = (name: string) =>
    console.log(
      `[fuzz] ${kind}: ${name} at +${((Date.now() - t0) / 1000).toFixed(1)} s (${r.cases} cases so far, ${r.crashes} crashes, /healthz slowest ${r.maxHealthzMs} ms)`,
    );

  let { proc, routes } = await startEngine(env);
  let up = true;
  // The concurrent health poll: every 50 ms, on its own connection; a poll still unanswered
  // when the next is due counts its wait so far.
  let pollSince: number | null = null;
  const poll = setInterval(() => {
    if (!up) return;
    if (pollSince !== null) {
      r.maxHealthzMs = Math.max(r.maxHealthzMs, Date.now() - pollSince);
      return;
    }
    const since = Date.now();
    pollSince = since;
    const port = proc.port;
    void send(port, "GET", "/healthz", { timeoutMs: 30_000 }).then((a) => {
      if (pollSince !== since) return;
      pollSince = null;
      if (a.status === 200 && up && port === proc.port) {
        r.healthzPolls++;
        r.maxHealthzMs = Math.max(r.maxHealthzMs, Date.now() - since);
      }
    });
  }, 50);

  /** After a dropped connection: did the engine die? Then count it and start it again. */
  const checkAlive = async (what: string): Promise<boolean> => {
    const probe = await send(proc.port, "GET", "/healthz", { timeoutMs: 30_000 });
    if (probe.status === 200) return true;
    const e = await Promise.race([
      proc.exited,
      new Promise<null>((ok) => setTimeout(() => ok(null), 30_000)),
    ]);
    if (e === null) {
      problem(`${what}: the engine does not answer /healthz and did not exit; killing it`);
      proc.child.kill("SIGKILL");
      await proc.exited;
    }
    up = false;
    pollSince = null;
    r.crashes++;
    const last = proc.output().trim().split("\n").slice(-3).join(" | ");
    problem(`CRASH after ${what}: exit ${e ? (e.code ?? e.signal) : "killed"}: ${last}`);
    ({ proc } = await startEngine(env));
    up = true;
    return false;
  };

  const hit = async (
    what: string,
    method: string,
    path: string,
    o: Parameters<typeof send>[3] = {},
    expectDrop = false,
  ): Promise<Answer> => {
    r.cases++;
    // Sign-ins come from their own address: failed ones are throttled per address, and the
    // operator's requests from 127.0.0.1 must keep reaching the routes.
    const a = await send(proc.port, method, path, {
      ...(method === "POST" && path === "/login" && !o.from ? { from: SIGN_IN } : {}),
      ...o,
    });
    const key = String(a.status);
    r.statuses[key] = (r.statuses[key] ?? 0) + 1;
    if (a.status === "drop") {
      const alive = await checkAlive(`${what} (${method} ${path})`);
      if (alive && !expectDrop) {
        r.serverErrors++;
        problem(`${what}: ${method} ${path}: connection dropped: ${a.body}`);
      }
    } else if (a.status >= 500) {
      r.serverErrors++;
      problem(`${what}: ${method} ${path}: HTTP ${a.status} ${a.body.slice(0, 200)}`);
    }
    return a;
  };
  const operator = { authorization: `Bearer ${OPERATOR}` };
  const withType = (t: string | null): Record<string, string> => (t ? { "content-type": t } : {});

  try {
    // Set-up through the API: a held release and a started one with a dispatched runner step.
    const mk = async (start: boolean) => {
      const a = await hit("set-up", "POST", `/v1/releases${start ? "" : "?start=false"}`, {
        headers: { ...operator, "content-type": "application/json" },
        body: JSON.stringify(recipe(2)),
      });
      const id = /"id":"(r\d+)"/.exec(a.body)?.[1];
      if (!id) throw new Error(`[fuzz] set-up release not created: ${a.status} ${a.body}`);
      return id;
    };
    const held = await mk(false);
    const running = await mk(true);
    let stepRun = "sr_999_1_f";
    for (let i = 0; i < 100 && stepRun === "sr_999_1_f"; i++) {
      const rec = await fetchJson(proc.port, `/v1/releases/${running}`);
      const runs = (rec?.step_runs ?? []) as { id: string; state: string }[];
      const d = runs.find((s) => s.state === "dispatched" || s.state === "running");
      if (d) stepRun = d.id;
      // The reconciler (every 200 ms) dispatches the first runner step after the control-plane ones.
      else await new Promise((ok) => setTimeout(ok, 200));
    }
    const releaseIds = [held, running, "r999999", "..%2f..", "x".repeat(300)];
    const stepRunIds = [stepRun, "sr_999999_1_f", "sr_..", "%00"];
    const concrete = (p: string): string[] => {
      if (!p.includes(":")) return [p];
      const ids = p.includes("step-runs") ? stepRunIds : releaseIds;
      return ids.map((id) =>
        p
          .replace(/:id\b/, id)
          .replace(/:n\b/, "1")
          .replace(/:[a-z]+/g, "x"),
      );
    };
    const seen = new Set<string>();
    const targets: Route[] = [];
    for (const rt of routes) {
      if (rt.path.includes("/events")) continue; // live streams stay open by design
      for (const path of concrete(rt.path)) {
        const k = `${rt.method} ${path}`;
        if (seen.has(k)) continue;
        seen.add(k);
        targets.push({ method: rt.method, path });
      }
    }
    console.log(`[fuzz] ${kind}: ${routes.length} routes, ${targets.length} concrete targets`);

    // 1. Every route × every body kind, as the operator and with no credential; every route once
    //    with a wrong token from the stranger's address.
    for (const t of targets) {
      const bodies = t.method === "GET" ? bodyKinds().slice(0, 2) : bodyKinds();
      for (const [label, type, body] of bodies) {
        for (const auth of [operator, {}]) {
          await hit(`${label}`, t.method, t.path, {
            headers: { ...auth, ...withType(type) },
            ...(body === "" || t.method === "GET" ? {} : { body }),
          });
        }
      }
      await hit("wrong token", t.method, t.path, {
        headers: { authorization: WRONG, "content-type": "application/json" },
        ...(t.method === "GET" ? {} : { body: "{}" }),
        from: STRANGER,
      });
    }

    phase("every route × every body done");
    // 2. Too complex to read: at and past the limits, to the recipe routes.
    for (const [label, type, body] of limitBodies()) {
      for (const path of [
        "/v1/releases?start=false",
        "/v1/releases/r999999/roll-forward",
        `/v1/releases/${held}/roll-forward`,
      ]) {
        await hit(
          label,
          "POST",
          path,
          { headers: { ...operator, "content-type": type }, body },
          label === "over 1 MiB",
        );
      }
    }

    phase("limit bodies done");
    // 3. fast-check: recipes, YAML text, forms, signed callbacks, random route × type × body.
    const valid = recipe(2) as unknown as Record<string, unknown>;
    const mutated = fc
      .tuple(fc.constantFrom(...Object.keys(valid)), fc.jsonValue())
      .map(([k, v]) => ({ ...valid, [k]: v }));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.jsonValue(), mutated, fc.anything()),
        fc.boolean(),
        async (v, yaml) => {
          let text: string;
          try {
            text = yaml ? toYaml(v) : (JSON.stringify(v) ?? "null");
          } catch {
            text = String(v);
          }
          await hit("recipe property", "POST", "/v1/releases?start=false", {
            headers: {
              ...operator,
              "content-type": yaml ? "application/yaml" : "application/json",
            },
            body: text,
          });
          return true;
        },
      ),
      { numRuns: runs * 2 },
    );
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 400 }), async (text) => {
        await hit("yaml text property", "POST", "/v1/releases", {
          headers: { ...operator, "content-type": "application/yaml" },
          body: text,
        });
        return true;
      }),
      { numRuns: runs },
    );
    const forms = targets.filter((t) => t.method === "POST" && !t.path.startsWith("/v1/"));
    const formBody = fc.oneof(
      fc
        .dictionary(fc.string({ maxLength: 20 }), fc.string({ maxLength: 60 }), { maxKeys: 8 })
        .map(
          (d) => ["application/x-www-form-urlencoded", new URLSearchParams(d).toString()] as const,
        ),
      fc
        .tuple(fc.string({ maxLength: 40 }), fc.string({ maxLength: 200 }))
        .map(([b, x]) => [`multipart/form-data; boundary=${b}`, x] as const),
      fc.string({ maxLength: 200 }).map((x) => ["application/x-www-form-urlencoded", x] as const),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...forms),
        formBody,
        fc.boolean(),
        async (t, [type, body], signed) => {
          await hit("form property", t.method, t.path, {
            headers: { ...(signed ? operator : {}), "content-type": type },
            body,
          });
          return true;
        },
      ),
      { numRuns: runs * 2 },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("preflight", "callback"),
        fc.oneof(
          fc.jsonValue().map((v) => JSON.stringify(v) ?? "null"),
          fc
            .record({ run_id: fc.string(), run_attempt: fc.jsonValue(), sha: fc.constant(SHA) })
            .map((o) => JSON.stringify(o)),
        ),
        async (which, body) => {
          const url = `/v1/releases/step-runs/${stepRun}/${which}`;
          await hit("signed runner property", "POST", url, {
            headers: { "content-type": "application/json", ...signBody(SECRET, body, Date.now()) },
            body,
          });
          return true;
        },
      ),
      { numRuns: runs },
    );
    const types = [
      null,
      "application/json",
      "application/yaml",
      "multipart/form-data; boundary=zz",
      "multipart/form-data",
      "application/x-www-form-urlencoded",
      "text/plain",
      "x/y; boundary",
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...targets),
        fc.constantFrom(...types),
        fc.oneof(
          fc.string({ maxLength: 300 }),
          fc.uint8Array({ maxLength: 300 }),
          fc.jsonValue().map((v) => JSON.stringify(v) ?? "null"),
        ),
        fc.boolean(),
        async (t, type, body, signed) => {
          await hit("random property", t.method, t.path, {
            headers: { ...(signed ? operator : {}), ...withType(type) },
            ...(t.method === "GET" ? {} : { body }),
          });
          return true;
        },
      ),
      { numRuns: runs * 4 },
    );

    phase("properties done");
    // Stuck releases: not terminal, and no exit offered at all.
    const ids: string[] = [];
    let before: number | undefined;
    for (let page = 0; page < 100; page++) {
      const q = `/v1/releases?limit=200${before ? `&before=${before}` : ""}`;
      const list = ((await fetchJson(proc.port, q))?.releases ?? []) as {
        id: string;
        state: ReleaseState;
        created_at: number;
      }[];
      for (const x of list) if (!TERMINAL_RELEASE_STATES.has(x.state)) ids.push(x.id);
      if (list.length < 200) break;
      before = list.at(-1)?.created_at;
    }
    for (const id of ids) {
      const rec = (await fetchJson(proc.port, `/v1/releases/${id}`)) as {
        state?: ReleaseState;
        available_actions?: unknown[];
        lifecycle_actions?: unknown[];
      } | null;
      if (!rec) continue;
      if (rec.state && TERMINAL_RELEASE_STATES.has(rec.state)) continue;
      if ((rec.available_actions?.length ?? 0) + (rec.lifecycle_actions?.length ?? 0) === 0) {
        r.stuckReleases++;
        problem(`release ${id} is ${rec.state} and offers no exit`);
      }
    }
  } finally {
    clearInterval(poll);
    up = false;
    if (proc.alive()) {
      proc.child.kill("SIGTERM");
      const t = setTimeout(() => proc.child.kill("SIGKILL"), 10_000);
      await proc.exited;
      clearTimeout(t);
    }
  }
  try {
    r.halfWritten = await halfWritten(kind, dir, pgUrl, schema, problem);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    if (kind === "postgres" && pgUrl) await dropSchema(pgUrl, schema);
  }
  return r;
}

async function fetchJson(port: number, path: string): Promise<Record<string, unknown> | null> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    headers: { authorization: `Bearer ${OPERATOR}` },
  });
  if (res.status !== 200) return null;
  return (await res.json()) as Record<string, unknown>;
}

/** Reads the store after the run: releases that do not read back whole, orphan attempt results. */
async function halfWritten(
  kind: "sqlite" | "postgres",
  dir: string,
  pgUrl: string | undefined,
  schema: string,
  problem: (p: string) => void,
): Promise<number> {
  let store: Store;
  if (kind === "postgres" && pgUrl) {
    const { openPostgresStore } = await import(
      "../../engine/src/adapters/postgres/postgres-store.ts"
    );
    store = openPostgresStore({ connectionString: pgUrl, schema });
  } else {
    const { openStore } = await import("../../engine/src/adapters/store-factory.ts");
    store = await openStore({ dataDir: dir });
  }
  let n = 0;
  try {
    for (const s of await store.listReleases({ limit: 100_000 })) {
      const rel = await store.getRelease(s.id);
      if (!rel || rel.manifest.steps.length !== s.step_count) {
        n++;
        problem(`release ${s.id} does not read back whole`);
        continue;
      }
      const called = new Set(
        rel.step_runs.flatMap((sr) =>
          sr.attempts.filter((a) => a.callback_at !== null).map((a) => `${sr.id}#${a.n}`),
        ),
      );
      for (const ar of await store.listAttemptResults(s.id)) {
        if (called.has(`${ar.step_run_id}#${ar.attempt}`)) continue;
        n++;
        problem(`attempt result ${ar.step_run_id}#${ar.attempt} has no callback in its release`);
      }
    }
  } finally {
    await store.close();
  }
  return n;
}

async function dropSchema(pgUrl: string, schema: string): Promise<void> {
  const { default: pg } = await import("pg");
  const c = new pg.Client({ connectionString: pgUrl });
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await c.end();
  }
}
