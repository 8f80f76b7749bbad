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

// What this server knows of the container files, so that a check reads little: the folder is
// listed again only when it changed (a container created or removed changes its mtime), and a
// file read again only when its identity (inode, size, times) changed or it is one of this
// port's. A server per port checks every 300 ms: reading every container's file each time
// cost the target more CPU than the deploys themselves once there were tens of lanes. Anything
// changed in the last 2 s is read regardless (file systems with coarse timestamps).
let listed = { mtimeMs: -1, files: [] };
/** file name -> { id: "ino:size:mtime:ctime", port } of its last read */
const seen = new Map();

function running() {
  let mtimeMs;
  try {
    mtimeMs = fs.statSync(containersDir).mtimeMs;
  } catch {
    return null; // state dir removed: time to go
  }
  const recent = (ms) => Date.now() - ms < 2000;
  const relist = mtimeMs !== listed.mtimeMs || recent(mtimeMs);
  if (relist) {
    try {
      listed = { mtimeMs, files: fs.readdirSync(containersDir) };
    } catch {
      return null;
    }
  }
  const out = [];
  for (const f of listed.files) {
    const file = path.join(containersDir, f);
    const known = seen.get(f);
    if (known && known.port !== port && !relist) continue; // another port's, folder unchanged
    let id = "";
    try {
      const st = fs.statSync(file);
      id = `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
      if (known && known.port !== port && known.id === id && !recent(st.ctimeMs)) continue;
    } catch {
      seen.delete(f); // removed since the listing
      continue;
    }
    let c;
    try {
      c = JSON.parse(fs.readFileSync(file, "utf8"));
    } catch {
      seen.delete(f); // being written: read again next time
      continue;
    }
    seen.set(f, { id, port: c.port });
    if (c.running && c.port === port) out.push(c);
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
