// Health endpoints of every stand-in container of one state dir: `node health-server.cjs DIR`.
// One long-lived process per state dir (a target), not one per container: it listens on the port
// of each running container's health URL (`port` in DIR/containers/<name>.json) and answers
// there for the newest running container on that port, with its instance id (the label
// baton.instance_id) in a Baton-Instance-Id header: 200 {"container","image","lane"} when
// healthy; 503 when that container's lane is listed in BATON_STANDIN_FAIL_HEALTH (read at `run`
// time) or in the file DIR/fail-health (read per request; the body is then DIR/health-body when
// that file exists), while it loads its model (until `ready_at`, set at `run` from the
// model-load-ms knob; the body then adds "loading": true), or when no container runs on it.
//
// DIR/servers/daemon.pid holds its pid (a second start while it lives leaves at once);
// DIR/servers/<port>.pid is written once a port listens (what `docker run -d` waits for) and
// removed when the port closes. A port closes once no running container uses it; the process
// exits once none is left, the state dir is gone, or after BATON_STANDIN_SERVER_MAX_S (default
// 3600) seconds. New containers are seen through fs.watch on DIR/containers and a scan every
// 500 ms (for file systems without change events).
//
// Started with an IPC channel (child_process.fork), it also takes ports already listening: a
// message {"baton_listen": port} carrying a net.Server handle (the demo's fleet binds each lane's
// health port itself and hands the socket over, so no other process can take the port between
// choosing it and serving it); it answers {"baton_listening": port} once it serves there. Such a
// port stays open while the server runs (503 {"healthy": false} with no container on it), and
// the server then leaves only on SIGTERM, when the state dir is gone, or at the time limit.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

const dir = process.argv[2];
if (!dir) {
  process.stderr.write("usage: node health-server.cjs STATE_DIR\n");
  process.exit(2);
}
process.umask(0);
const containersDir = path.join(dir, "containers");
const serversDir = path.join(dir, "servers");
const daemonPidFile = path.join(serversDir, "daemon.pid");
const me = String(process.pid);

// It may be started from an SSH command's process group: the session's hang-up is not ours.
process.on("SIGHUP", () => {});

/** True when a process with that pid exists (one of another user's counts too). */
function alive(pid) {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

/** Takes DIR/servers/daemon.pid; false when another live server holds it. */
function claim() {
  fs.mkdirSync(serversDir, { recursive: true });
  for (let i = 0; i < 5; i++) {
    try {
      fs.writeFileSync(daemonPidFile, me, { flag: "wx" });
      return true;
    } catch (e) {
      if (e.code !== "EEXIST") throw e;
    }
    let owner = NaN;
    try {
      owner = Number(fs.readFileSync(daemonPidFile, "utf8").trim());
    } catch {
      continue; // removed meanwhile: try again
    }
    if (alive(owner)) return false;
    // A stale file (its server was killed): rename first, so of two starters only one removes it.
    const stale = `${daemonPidFile}.stale.${me}`;
    try {
      fs.renameSync(daemonPidFile, stale);
      fs.rmSync(stale, { force: true });
    } catch {}
  }
  return false;
}

// What this server knows of the container files, so that a check reads little: the folder is
// listed again only when it changed (a container created or removed changes its mtime), and a
// file read again only when its identity (inode, size, times) changed. Reading every container's
// file on every check cost the target more CPU than the deploys themselves once there were tens
// of lanes. Anything changed in the last 2 s is read regardless (coarse timestamps).
let listed = { mtimeMs: -1, files: [] };
/** file name -> { id: "ino:size:mtime:ctime", c: container or null } of its last read */
const seen = new Map();

/**
 * The running containers, newest first, of `port` (or of every port when `port` is null);
 * null once the state dir is gone. With a port, files known to be another port's are not even
 * looked at while the folder is unchanged (a container's port never changes in place).
 */
function running(port) {
  let mtimeMs;
  try {
    mtimeMs = fs.statSync(containersDir).mtimeMs;
  } catch {
    return null;
  }
  const recent = (ms) => Date.now() - ms < 2000;
  const relist = mtimeMs !== listed.mtimeMs || recent(mtimeMs);
  if (relist) {
    try {
      listed = { mtimeMs, files: fs.readdirSync(containersDir) };
    } catch {
      return null;
    }
    for (const f of seen.keys()) if (!listed.files.includes(f)) seen.delete(f);
  }
  const out = [];
  for (const f of listed.files) {
    const known = seen.get(f);
    const other = port !== null && known?.c && known.c.port !== port;
    if (other && !relist) continue;
    const file = path.join(containersDir, f);
    let id = "";
    try {
      const st = fs.statSync(file);
      id = `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
      if (known && known.id === id && !recent(st.ctimeMs)) {
        if (known.c?.running && (port === null || known.c.port === port)) out.push(known.c);
        continue;
      }
    } catch {
      seen.delete(f); // removed since the listing
      continue;
    }
    let c = null;
    try {
      c = JSON.parse(fs.readFileSync(file, "utf8"));
    } catch {
      seen.delete(f); // being written: read again next time
      continue;
    }
    seen.set(f, { id, c });
    if (c?.running && (port === null || c.port === port)) out.push(c);
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

/** One port's answer, from the state at the time of the request. */
function answer(port, res) {
  const c = (running(port) || [])[0];
  // The answering container's instance id (deploy.sh's label and BATON_INSTANCE_ID), echoed as
  // docs/runner.md asks of a health endpoint, so deploy.sh can tell whose answer this is.
  const instance = c?.labels?.["baton.instance_id"];
  if (typeof instance === "string" && instance) res.setHeader("baton-instance-id", instance);
  // Still loading its model (run with the model-load-ms knob): 503 until ready_at.
  const loading = Boolean(c && Number.isFinite(c.ready_at) && Date.now() < c.ready_at);
  const healthy = c && !loading && !c.fail_health && !failLanes().has(c.lane);
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
      c
        ? {
            container: c.name,
            image: c.image,
            lane: c.lane,
            healthy,
            ...(loading ? { loading } : {}),
          }
        : { healthy: false },
    ),
  );
}

/** port -> http.Server (listening or about to); a port another process holds is tried again. */
const servers = new Map();
const portPidFile = (port) => path.join(serversDir, `${port}.pid`);

/** Ports handed over by the process that forked this one: never closed by a scan. */
const held = new Set();
/** Forked with an IPC channel: the parent owns this server's life (no exit when idle). */
const owned = typeof process.send === "function";

function open(port) {
  const server = http.createServer((_req, res) => answer(port, res));
  servers.set(port, server);
  server.on("error", () => servers.delete(port)); // taken by another process: next scan retries
  server.listen(port, "127.0.0.1", () => {
    try {
      fs.writeFileSync(portPidFile(port), me);
    } catch {}
  });
}

function close(port) {
  const server = servers.get(port);
  servers.delete(port);
  removeOwn(portPidFile(port));
  server?.close();
  server?.closeAllConnections?.();
}

function removeOwn(file) {
  try {
    if (fs.readFileSync(file, "utf8") === me) fs.rmSync(file, { force: true });
  } catch {}
}

function exit() {
  for (const port of [...servers.keys()]) removeOwn(portPidFile(port));
  removeOwn(daemonPidFile);
  process.exit(0);
}

const maxMs = Number(process.env.BATON_STANDIN_SERVER_MAX_S || 3600) * 1000;
const started = Date.now();
/** Since when no port has had a running container (a file being written reads as none). */
let idleSince = null;
/** Opens the ports of running containers, closes the others; exits once nothing is left (1 s). */
function scan() {
  const list = running(null);
  if (list === null || Date.now() - started > maxMs) return exit();
  const ports = new Set(list.map((c) => c.port).filter((p) => Number.isInteger(p) && p > 0));
  for (const port of ports) if (!servers.has(port)) open(port);
  for (const port of [...servers.keys()]) if (!ports.has(port) && !held.has(port)) close(port);
  if (ports.size > 0 || owned) idleSince = null;
  else if (idleSince === null) idleSince = Date.now();
  else if (Date.now() - idleSince >= 1000) exit();
}

for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, exit);
if (!claim()) process.exit(0);
if (owned) {
  process.on("message", (m, handle) => {
    const port = m?.baton_listen;
    if (!Number.isInteger(port) || !handle || servers.has(port)) return;
    held.add(port);
    const server = http.createServer((_req, res) => answer(port, res));
    servers.set(port, server);
    server.listen(handle, () => {
      try {
        fs.writeFileSync(portPidFile(port), me);
      } catch {}
      if (process.connected) process.send({ baton_listening: port });
    });
  });
  // The parent lets go of the channel once it has handed its ports over.
  process.on("disconnect", () => {});
}
let pending = null;
try {
  // A new or changed container file: scan soon (coalesced), so `run -d` waits little.
  fs.watch(containersDir, () => {
    pending ??= setTimeout(() => {
      pending = null;
      scan();
    }, 10);
  }).on("error", () => {});
} catch {
  // No change events here: the interval below does it.
}
scan();
setInterval(scan, 500);
