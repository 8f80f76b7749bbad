// Pure parts of the action and tools, table-driven: phase outcomes (F08), the allowlist (F05),
// payload validation, log tail cutting, retry bounds.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  AllowlistError,
  resolveTool,
  toolProblem,
} from "../../actions/release-step/src/allowlist.ts";
import { postSigned } from "../../actions/release-step/src/engine-client.ts";
import { PayloadError, readDispatch } from "../../actions/release-step/src/event.ts";
import { logTail, redact } from "../../actions/release-step/src/report.ts";
import { LOG_TRUNCATED_MARKER } from "../../engine/src/protocol/messages.ts";
import { phaseCheck, remoteCommand } from "../../scripts/lib/deploy-tool.ts";
import type { ExecResult } from "../../scripts/lib/ssh.ts";

const dir = mkdtempSync(join(tmpdir(), "baton-units-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const exec = (p: Partial<ExecResult>): ExecResult => ({
  exit_code: 0,
  signal: null,
  stdout: "",
  stderr: "",
  timed_out: false,
  duration_ms: 5,
  ...p,
});
const line = (status: string, extra = "") =>
  `{"phase":"pull","status":"${status}","exit_code":0,"duration_ms":3,"message":"m"${extra}}\n`;

describe("phaseCheck: no falsy value turns into success (F08)", () => {
  it.each([
    ["ok line, exit 0", exec({ stdout: line("ok") }), "ok"],
    ["skipped line, exit 0", exec({ stdout: line("skipped") }), "skipped"],
    ["ok line but exit 1", exec({ stdout: line("ok"), exit_code: 1 }), "failed"],
    ["failed line, exit 0", exec({ stdout: line("failed") }), "failed"],
    ["killed by TERM", exec({ exit_code: null, signal: "TERM", stdout: line("ok") }), "failed"],
    [
      "no exit status at all",
      exec({ exit_code: null, signal: null, stdout: line("ok") }),
      "failed",
    ],
    ["deadline passed", exec({ exit_code: null, timed_out: true }), "timeout"],
    ["no JSON line", exec({ stdout: "garbage\n" }), "failed"],
    [
      "a line for another phase",
      exec({ stdout: line("ok").replace('"pull"', '"start"') }),
      "failed",
    ],
  ])("%s -> %s", (_n, r, status) => {
    const c = phaseCheck("pull", r);
    expect(c.status).toBe(status);
    expect(c.exit_code).toBe(r.exit_code);
    expect(c.signal).toBe(r.signal);
  });
  it("records exit_code null and signal TERM verbatim", () => {
    expect(phaseCheck("start", exec({ exit_code: null, signal: "TERM" }))).toMatchObject({
      exit_code: null,
      signal: "TERM",
      status: "failed",
    });
  });
});

describe("remoteCommand", () => {
  it("single-quotes every argument and execs deploy.sh for one phase", () => {
    const args = {
      lane: {
        id: "lane-a",
        host: "h",
        port: 22,
        user: "deploy",
        host_key: "x",
        health_url: "http://127.0.0.1:1/h",
      },
      image: `a/b@sha256:${"1".repeat(64)}`,
      previous_image: `a/b@sha256:${"2".repeat(64)}`,
    };
    const cmd = remoteCommand(
      { name: "t", subcommand: "deploy", phases: [] },
      "/opt/it's/deploy.sh",
      args,
      "r1:2:fwd:lane-a",
      "pull",
      undefined,
    );
    expect(cmd).toBe(
      `exec '/opt/it'\\''s/deploy.sh' 'deploy' '--lane' 'lane-a' '--image' '${args.image}' '--health-url' 'http://127.0.0.1:1/h' '--operation-key' 'r1:2:fwd:lane-a' '--previous-image' '${args.previous_image}' '--phase' 'pull'`,
    );
  });
});

describe("remoteCommand: declared environment", () => {
  it("passes a deploy's env (a shadow-safe lane's) to deploy.sh as --env NAME=VALUE, sorted; never to a restore", () => {
    const args = {
      lane: {
        id: "lane-a",
        host: "h",
        port: 22,
        user: "deploy",
        host_key: "x",
        health_url: "http://127.0.0.1:1/h",
      },
      image: `a/b@sha256:${"1".repeat(64)}`,
      env: { BATON_TOOLS: "sandboxed", BATON_CACHE_NAMESPACE: "shadow-x" },
    };
    const cmd = (subcommand: "deploy" | "restore") =>
      remoteCommand({ name: "t", subcommand, phases: [] }, "/d.sh", args, "k", "start", undefined);
    expect(cmd("deploy")).toContain(
      `'--env' 'BATON_CACHE_NAMESPACE=shadow-x' '--env' 'BATON_TOOLS=sandboxed' '--phase' 'start'`,
    );
    expect(cmd("restore")).not.toContain("--env");
  });
});

describe("allowlist (F05, F06)", () => {
  const ws = join(dir, "ws");
  mkdirSync(join(ws, "tools"), { recursive: true });
  writeFileSync(join(ws, "allow.json"), JSON.stringify({ "attach-queue-lane": "tools/a" }));
  writeFileSync(join(ws, "allow-escape.json"), JSON.stringify({ escape: "../outside" }));
  writeFileSync(join(ws, "tools/a"), "#!/bin/sh\n", { mode: 0o755 });
  writeFileSync(join(ws, "tools/b"), "#!/bin/sh\n", { mode: 0o644 });

  it("resolves an exact name inside the workspace", () => {
    expect(resolveTool(ws, "allow.json", "attach-queue-lane")).toEqual({
      path: join(ws, "tools/a"),
    });
  });
  it.each([
    "attach-queue-lane ",
    "ATTACH-QUEUE-LANE",
    "__proto__",
    "constructor",
    "toString",
    "attach",
    "",
  ])("refuses %j", (name) => {
    expect(() => resolveTool(ws, "allow.json", name)).toThrow(/not in the allowlist/);
  });
  it("refuses an entry that points outside the workspace", () => {
    let err: unknown;
    try {
      resolveTool(ws, "allow-escape.json", "escape");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AllowlistError);
    expect((err as AllowlistError).problems).toEqual([
      expect.stringMatching(/^escape: the file of `escape` leaves its root with `\.\.`/),
    ]);
  });
  it("tells missing from not executable", () => {
    expect(toolProblem(join(ws, "tools/a"))).toBeNull();
    expect(toolProblem(join(ws, "tools/missing"))).toMatch(/missing/);
    expect(toolProblem(join(ws, "tools/b"))).toMatch(/not executable/);
    expect(toolProblem(join(ws, "tools"))).toMatch(/not a regular file/);
  });
});

describe("readDispatch (F02b, F05)", () => {
  const engine = "https://baton.example.org";
  const good = {
    v: 1,
    step_run_id: "sr_17_6_f",
    tool: "attach-queue-lane",
    args: {},
    callback_url: `${engine}/v1/releases/step-runs/sr_17_6_f/callback`,
    release: {
      id: "r17",
      generation: 2,
      manifest_digest: "e".repeat(64),
      dispatch: 1,
      operation_key: "r17:6:fwd:lane-a",
    },
  };
  const read = (name: string, event: unknown) => {
    const p = join(dir, `event-${Math.random()}.json`);
    writeFileSync(p, JSON.stringify(event));
    return readDispatch({ GITHUB_EVENT_NAME: name, GITHUB_EVENT_PATH: p }, engine, engine);
  };
  it("accepts repository_dispatch release-step and a matching workflow_dispatch", () => {
    expect(
      read("repository_dispatch", { action: "release-step", client_payload: good }).step_run_id,
    ).toBe("sr_17_6_f");
    expect(
      read("workflow_dispatch", {
        inputs: { step_run_id: "sr_17_6_f", payload: JSON.stringify(good) },
      }).tool,
    ).toBe("attach-queue-lane");
  });
  it.each([
    ["push", { client_payload: good }],
    ["repository_dispatch", { action: "nightly-report", client_payload: good }],
    ["workflow_dispatch", { inputs: { step_run_id: "sr_17_7_f", payload: JSON.stringify(good) } }],
    ["workflow_dispatch", { inputs: { step_run_id: "sr_17_6_f", payload: "{not json" } }],
    ["repository_dispatch", { action: "release-step", client_payload: { ...good, extra: 1 } }],
    [
      "repository_dispatch",
      {
        action: "release-step",
        client_payload: {
          ...good,
          callback_url: `${engine}/v1/releases/step-runs/sr_17_6_f/callback?x=1`,
        },
      },
    ],
    [
      "repository_dispatch",
      {
        action: "release-step",
        client_payload: {
          ...good,
          callback_url: `http://baton.example.org/v1/releases/step-runs/sr_17_6_f/callback`,
        },
      },
    ],
    [
      "repository_dispatch",
      {
        action: "release-step",
        client_payload: { ...good, release: { ...good.release, manifest_digest: "zz" } },
      },
    ],
  ])("refuses %s %j", (name, event) => {
    expect(() => read(name, event)).toThrow(PayloadError);
  });
  it("names each bad payload field with what it must be, in words", () => {
    let problems: string[] = [];
    try {
      read("repository_dispatch", {
        action: "release-step",
        client_payload: { tool: "deploy", step_run_id: "sr_1$(id)", callback_url: 7 },
      });
    } catch (e) {
      problems = (e as PayloadError).problems;
    }
    expect(problems).toEqual(
      expect.arrayContaining([
        "client_payload.v: must be 1",
        "client_payload.args: is missing; it must be a JSON object",
        "client_payload.release: is missing; it must be a JSON object",
      ]),
    );
    for (const p of problems) expect(p).not.toMatch(/Invalid|received undefined/);
  });
});

describe("logTail and redact", () => {
  it("keeps short logs, cuts long ones at a character boundary with the marker first", () => {
    expect(logTail("short", 100)).toEqual({ log: "short", truncated: false });
    const long = `${"é".repeat(200)}END`;
    const cut = logTail(long, 101);
    expect(cut.truncated).toBe(true);
    expect(cut.log.startsWith(LOG_TRUNCATED_MARKER)).toBe(true);
    expect(cut.log.endsWith("END")).toBe(true);
    expect(Buffer.byteLength(cut.log)).toBeLessThanOrEqual(101);
    expect(cut.log).not.toContain("\uFFFD");
  });
  it("replaces secrets", () => {
    expect(redact("key=abcd1234 pass=hunter22", ["abcd1234", "hunter22", "xy"])).toBe(
      "key=*** pass=***",
    );
  });
});

describe("postSigned retry bounds", () => {
  it("retries 5xx up to the attempt bound, never a 4xx, and keeps the body bytes", async () => {
    const seen: { status: number; body: string }[] = [];
    let answer = 503;
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => {
        body += d;
      });
      req.on("end", () => {
        seen.push({ status: answer, body });
        res.writeHead(answer).end("{}");
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/cb`;
    const policy = { attempts: 3, totalMs: 10_000, baseDelayMs: 10, requestTimeoutMs: 2_000 };
    try {
      const r = await postSigned(url, '{"a": "caf\\u00e9"}', "s", policy, () => {});
      expect(r).toMatchObject({ status: 503, attempts: 3 });
      expect(seen.map((s) => s.body)).toEqual(Array(3).fill('{"a": "caf\\u00e9"}'));
      seen.length = 0;
      answer = 400;
      expect((await postSigned(url, "{}", "s", policy, () => {})).attempts).toBe(1);
      expect(seen).toHaveLength(1);
      // The time budget bounds retries too: a budget below the first backoff allows one attempt.
      seen.length = 0;
      answer = 500;
      await postSigned(
        url,
        "{}",
        "s",
        { ...policy, attempts: 10, baseDelayMs: 500, totalMs: 100 },
        () => {},
      );
      expect(seen).toHaveLength(1);
    } finally {
      server.close();
    }
    // Network errors count as retryable: nothing listens on the closed port.
    const down = await postSigned(url, "{}", "s", policy, () => {});
    expect(down.status).toBe(0);
    expect(down.attempts).toBe(3);
  });
});

describe("network errors name the URL and the cause", () => {
  /** Listens on 127.0.0.1, port 0; returns the port. */
  const listen = async (srv: import("node:net").Server): Promise<number> => {
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
    return (srv.address() as { port: number }).port;
  };

  /** One signed POST of "{}" to `url`: one try (unless `attempts`), `requestTimeoutMs` (ms). */
  const postOnce = (url: string, requestTimeoutMs: number, attempts = 1) =>
    postSigned(
      url,
      "{}",
      "s".repeat(32),
      { attempts, baseDelayMs: 1, totalMs: 1000, requestTimeoutMs },
      () => {},
    );

  it("names the refused connection, spells out a wrapped cause chain and the request timeout", async () => {
    const { networkError } = await import("../../actions/release-step/src/engine-client.ts");
    // A port nothing listens on: bound, then closed.
    const srv = createServer();
    const port = await listen(srv);
    await new Promise((r) => srv.close(r));
    const res = await postOnce(
      `http://127.0.0.1:${port}/v1/releases/step-runs/sr_1_1_f/preflight`,
      5000,
    );
    expect(res.status).toBe(0);
    expect(res.error).toMatch(new RegExp(`^connect ECONNREFUSED 127\\.0\\.0\\.1:${port}`));
    // An error that wraps its cause (as fetch's "fetch failed" does): each link named.
    const wrapped = new TypeError("fetch failed", {
      cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" }),
    });
    expect(networkError(wrapped)).toBe("fetch failed: connect ECONNREFUSED 127.0.0.1:9");
    const timeout = new Error("aborted");
    timeout.name = "TimeoutError";
    expect(networkError(timeout, { requestTimeoutMs: 250 })).toBe(
      "no answer within 250 ms (request timeout)",
    );
  });

  it("gives up on an engine that never answers, or stops in the middle of its answer, at the request timeout", async () => {
    const sockets = new Set<import("node:net").Socket>();
    // "/silent" never answers; "/stalled" sends its headers and half its body, then nothing.
    const srv = createServer((req, res) => {
      if (req.url === "/stalled") {
        res.writeHead(200, { "content-length": "100" });
        res.write("{");
      }
    });
    srv.on("connection", (s) => sockets.add(s));
    const base = `http://127.0.0.1:${await listen(srv)}`;
    try {
      for (const path of ["/silent", "/stalled"]) {
        const res = await postOnce(`${base}${path}`, 200);
        expect(res, path).toMatchObject({
          status: 0,
          error: "no answer within 200 ms (request timeout)",
        });
      }
      // A try never outlasts the total budget (1,000 ms here): the first gets all of it and
      // leaves no time for a second.
      for (const path of ["/silent", "/stalled"]) {
        const res = await postOnce(`${base}${path}`, 60_000, 3);
        expect(res.attempts, path).toBe(1);
        const ms = Number(
          /^no answer within (\d+) ms \(request timeout\)$/.exec(res.error ?? "")?.[1],
        );
        expect(ms, `${path}: ${res.error}`).toBeGreaterThan(900);
        expect(ms, path).toBeLessThanOrEqual(1000);
      }
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => srv.close(r));
    }
  });

  it("does not follow a redirect with the signed body: the answer names where it pointed and the fix", async () => {
    const { errorMessage } = await import("../../actions/release-step/src/engine-client.ts");
    let posts = 0;
    const srv = createServer((_req, res) => {
      posts++;
      res.writeHead(308, { location: "https://baton.example.org/v1/x" }).end();
    });
    const port = await listen(srv);
    try {
      const res = await postOnce(`http://127.0.0.1:${port}/v1/x`, 2000, 3);
      expect(res.status).toBe(308);
      expect(res.attempts).toBe(1);
      expect(posts).toBe(1);
      expect(errorMessage(res.text)).toMatch(
        /^a redirect to https:\/\/baton\.example\.org\/v1\/x: .*set the engine-url input/,
      );
    } finally {
      await new Promise((r) => srv.close(r));
    }
  });

  it("speaks TLS to an https engine-url: an untrusted certificate is named, never sent in clear", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-tls-"));
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
      ],
      { stdio: "ignore" },
    );
    let plainRequests = 0;
    const srv = createHttpsServer(
      { key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) },
      (_req, res) => {
        plainRequests++;
        res.end("{}");
      },
    );
    const port = await listen(srv);
    try {
      const res = await postOnce(`https://127.0.0.1:${port}/v1/x`, 5000, 3);
      expect(res.status).toBe(0);
      // Not retried: the certificate will not be trusted on the next try either.
      expect(res.attempts).toBe(1);
      expect(res.error).toMatch(/self[- ]signed certificate.*NODE_EXTRA_CA_CERTS/);
      expect(plainRequests).toBe(0);
    } finally {
      await new Promise((r) => srv.close(r));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
