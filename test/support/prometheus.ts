/**
 * A real Prometheus server (Debian's `prometheus`) for tests: its own config, TSDB folder and
 * loopback port, scraping the given targets every second. Ready when `/-/ready` answers; the
 * first scrape still comes a few seconds later, so callers poll for data, never sleep.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onFreshPort, PortTaken, saysPortTaken } from "./ports.ts";

export interface PrometheusHandle {
  url: string;
  close(): Promise<void>;
}

/** The binary, or null when it is not installed (the test then says so and fails). */
export const PROMETHEUS_BIN = process.env.BATON_PROMETHEUS_BIN ?? "/usr/bin/prometheus";

/** Scrape settings of the one job: its name (default `baton-router`) and a bearer token. */
export interface ScrapeOptions {
  job?: string;
  /** Sent as `Authorization: Bearer <token>` on every scrape (the engine's viewer token). */
  bearerToken?: string;
}

/** Starts Prometheus scraping `targets` (`host:port`) every second. Throws after 30 s unready. */
export async function startPrometheus(
  targets: string[],
  o: ScrapeOptions = {},
): Promise<PrometheusHandle> {
  const dir = mkdtempSync(join(tmpdir(), "baton-prom-"));
  writeFileSync(
    join(dir, "prometheus.yml"),
    [
      "global:",
      "  scrape_interval: 1s",
      "  evaluation_interval: 1s",
      "scrape_configs:",
      `  - job_name: ${o.job ?? "baton-router"}`,
      ...(o.bearerToken
        ? [
            "    authorization:",
            "      type: Bearer",
            `      credentials: ${JSON.stringify(o.bearerToken)}`,
          ]
        : []),
      "    static_configs:",
      `      - targets: [${targets.map((t) => JSON.stringify(t)).join(", ")}]`,
      "",
    ].join("\n"),
  );
  try {
    return await onFreshPort("prometheus", (port) => startOn(dir, port));
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

/** Starts Prometheus on `port`. @throws PortTaken when it could not bind it. */
async function startOn(dir: string, port: number): Promise<PrometheusHandle> {
  const child: ChildProcess = spawn(
    PROMETHEUS_BIN,
    [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  child.stderr?.on("data", (d: Buffer) => {
    log = (log + d.toString()).slice(-4000);
  });
  const exited = new Promise((r) => child.once("exit", r));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
  };
  const close = async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) break;
    const ok = await fetch(`${url}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    // Ready, and ours: a Prometheus that lost the port to another exits.
    if (ok && child.exitCode === null) return { url, close };
    await new Promise((r) => setTimeout(r, 200));
  }
  await stop();
  if (saysPortTaken(log)) throw new PortTaken(port, log.slice(-300));
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`[test] prometheus did not become ready on ${url}: ${log.slice(-1500)}`);
}
