/**
 * Slow-header connections against a real `baton serve` process under systemd's default
 * open-file limit (`ulimit -n 1024`): 2,000 connections that send part of a request's headers
 * and then trickle a byte a second must not make the engine unreachable. The engine caps its
 * connections below the file-descriptor limit (the ones past the cap are closed at once), and
 * closes a connection whose headers are not complete within BATON_HEADERS_TIMEOUT_MS; a fresh
 * connection then gets /healthz. Every loop is bounded in count and time; no timing assertion.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { serveBin } from "./run-baton.ts";

const SLOW = 2_000;
const sockets: Socket[] = [];
let child: ChildProcess | null = null;
let data = "";

afterAll(() => {
  for (const s of sockets) s.destroy();
  if (child && child.exitCode === null) child.kill("SIGKILL");
  if (data) rmSync(data, { recursive: true, force: true });
});

/** GET /healthz on a fresh connection (no agent); the status, or null when refused/closed/slow. */
function healthz(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const req = request(
      { host: "127.0.0.1", port, path: "/healthz", agent: false, timeout: 2_000 },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? null));
        res.on("error", () => resolve(null));
      },
    );
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(null));
    req.end();
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it("2,000 slow-header connections under a 1024 fd limit: the server closes them and /healthz answers", async () => {
  data = mkdtempSync(path.join(tmpdir(), "baton-slow-"));
  // `exec` keeps the pid: the engine itself runs with the lowered limit.
  const served = await serveBin(
    {
      BATON_DATA_DIR: data,
      BATON_CALLBACK_SECRETS: "slow-test-secret-0123456789",
      BATON_OPERATOR_TOKEN: "slow-operator-token-0123",
      BATON_ADMISSION: "off",
      BATON_DISPATCHER: "github",
      GITHUB_REPOSITORY: "acme/models",
      GITHUB_TOKEN: "not-used-in-this-test",
      BATON_HEADERS_TIMEOUT_MS: "2000",
    },
    {
      timeoutMs: 120_000,
      wrap: (argv) => ["bash", ["-c", 'ulimit -n 1024 && exec "$0" "$@"', ...argv]],
    },
  );
  child = served.child;
  const proc = served.child;
  const port = served.port;
  // The engine runs with systemd's default limit, not the test machine's.
  const limits = readFileSync(`/proc/${proc.pid}/limits`, "utf8");
  expect(limits).toMatch(/^Max open files\s+1024\s/m);

  // Open the slow connections: part of a request's headers, never the blank line.
  let closedByServer = 0;
  const opened = await Promise.all(
    Array.from(
      { length: SLOW },
      (_, i) =>
        new Promise<boolean>((resolve) => {
          const s = connect(port, "127.0.0.1");
          sockets.push(s);
          const timer = setTimeout(() => resolve(false), 15_000);
          s.on("connect", () => {
            clearTimeout(timer);
            s.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow-${i}: `);
            resolve(true);
          });
          s.on("error", () => {});
          s.on("close", () => {
            clearTimeout(timer);
            closedByServer += 1;
            resolve(false);
          });
        }),
    ),
  );
  expect(opened.filter(Boolean).length).toBeGreaterThan(0);
  // A byte a second on each open one (slowloris): the header timeout must not restart.
  const trickle = setInterval(() => {
    for (const s of sockets) if (!s.destroyed && s.writable) s.write("a");
  }, 1_000);
  try {
    // A fresh connection gets /healthz (bounded: 60 tries, at most about 30 s).
    let status: number | null = null;
    for (let i = 0; i < 60 && status !== 200; i++) {
      status = await healthz(port);
      if (status !== 200) await sleep(500);
    }
    expect(status, served.output()).toBe(200);
    // Every slow connection is closed by the server (bounded: 30 s).
    for (let i = 0; i < 60 && closedByServer < SLOW; i++) await sleep(500);
    expect(closedByServer).toBe(SLOW);
    expect(proc.exitCode).toBeNull();
    expect(await healthz(port)).toBe(200);
  } finally {
    clearInterval(trickle);
  }
  const exited = new Promise<number | null>((r) => proc.on("exit", (code) => r(code)));
  proc.kill("SIGTERM");
  expect(await exited).toBe(0);
}, 240_000);
