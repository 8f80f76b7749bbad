// Health endpoint of the stand-in containers on one port: `node health-server.cjs PORT DIR`.
// Answers for the newest running stand-in container whose health URL uses this port:
// 200 {"container","image","lane"} when healthy; 503 when that container's lane is listed in
// BATON_STANDIN_FAIL_HEALTH (read at `run` time) or in the file DIR/fail-health (read per request;
// the body is then DIR/health-body when that file exists),
// or when no container is running. Exits by itself once no running container uses the port, the
// state directory is gone, or after BATON_STANDIN_SERVER_MAX_S (default 3600) seconds.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

const port = Number(process.argv[2]);
const dir = process.argv[3];
const containersDir = path.join(dir, "containers");
const pidFile = path.join(dir, "servers", `${port}.pid`);

function running() {
  const out = [];
  let files = [];
  try {
    files = fs.readdirSync(containersDir);
  } catch {
    return null; // state dir removed: time to go
  }
  for (const f of files) {
    try {
      const c = JSON.parse(fs.readFileSync(path.join(containersDir, f), "utf8"));
      if (c.running && c.port === port) out.push(c);
    } catch {}
  }
  return out.sort((a, b) => b.started_at - a.started_at);
}

function failLanes() {
  try {
    return new Set(
      fs
        .readFileSync(path.join(dir, "fail-health"), "utf8")
        .split(/[,\n]/)
        .map((s) => s.trim())
        .filter(Boolean),
    );
  } catch {
    return new Set();
  }
}

const server = http.createServer((_req, res) => {
  const list = running() || [];
  const c = list[0];
  const healthy = c && !c.fail_health && !failLanes().has(c.lane);
  if (!healthy) {
    // DIR/health-body (read per request): the body of an unhealthy answer, as a model server
    // would explain itself ("model not loaded: CUDA OOM").
    let body = null;
    try {
      body = fs.readFileSync(path.join(dir, "health-body"), "utf8");
    } catch {}
    if (body !== null) {
      res.writeHead(503, { "content-type": "text/plain; charset=utf-8" });
      res.end(body);
      return;
    }
  }
  res.writeHead(healthy ? 200 : 503, { "content-type": "application/json" });
  res.end(
    JSON.stringify(
      c ? { container: c.name, image: c.image, lane: c.lane, healthy } : { healthy: false },
    ),
  );
});

server.on("error", () => process.exit(0)); // port taken (another server already answers): leave
server.listen(port, "127.0.0.1", () => {
  fs.mkdirSync(path.dirname(pidFile), { recursive: true });
  fs.writeFileSync(pidFile, String(process.pid));
});

const maxMs = Number(process.env.BATON_STANDIN_SERVER_MAX_S || 3600) * 1000;
const started = Date.now();
setInterval(() => {
  const list = running();
  if (list === null || list.length === 0 || Date.now() - started > maxMs) {
    try {
      if (fs.readFileSync(pidFile, "utf8") === String(process.pid)) fs.rmSync(pidFile);
    } catch {}
    process.exit(0);
  }
}, 300).unref();
// keep the process alive while the server listens (the interval is unref'd)
