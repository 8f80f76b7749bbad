// Stand-in container CLI: a `docker`-compatible subset (pull, run -d, inspect, stop, rm, ps) that
// records every call in a ledger and, for `run -d`, starts a real HTTP process serving the
// container's health URL. State and knobs are documented in README.md beside this file.
// Plain CommonJS with no dependencies: it runs on a target over SSH from the repo checkout.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { spawn } = require("node:child_process");

// Test targets are shared by several users (the test runner seeds state as itself, deploy.sh runs
// as the SSH login user): everything the stand-in creates is world-writable.
process.umask(0);
const dir =
  process.env.BATON_STANDIN_DIR || path.join(process.env.TMPDIR || "/tmp", "baton-standin");
const containersDir = path.join(dir, "containers");
const imagesDir = path.join(dir, "images");
fs.mkdirSync(containersDir, { recursive: true });
fs.mkdirSync(imagesDir, { recursive: true });

const argv = process.argv.slice(2);
const command = argv[0] || "";

/** Knob values from env var `name` and file `<dir>/<file>` (comma or newline separated). */
function knob(name, file) {
  const out = new Set();
  for (const v of (process.env[name] || "").split(/[,\n]/)) if (v.trim()) out.add(v.trim());
  try {
    for (const v of fs.readFileSync(path.join(dir, file), "utf8").split(/[,\n]/)) {
      if (v.trim()) out.add(v.trim());
    }
  } catch {}
  return out;
}

function finish(code, stdout, stderr) {
  fs.appendFileSync(
    path.join(dir, "calls.jsonl"),
    `${JSON.stringify({ at: Date.now(), pid: process.pid, argv, exit: code })}\n`,
  );
  if (stdout) process.stdout.write(`${stdout}\n`);
  if (stderr) process.stderr.write(`${stderr}\n`);
  process.exit(code);
}

// Knobs that act before the command: hang (never returns, like an attached container) and
// signal (the calling script dies by SIGTERM, like a remote process killed mid-phase).
if (knob("BATON_STANDIN_HANG", "hang").has(command)) {
  fs.appendFileSync(
    path.join(dir, "calls.jsonl"),
    `${JSON.stringify({ at: Date.now(), pid: process.pid, argv, hang: true })}\n`,
  );
  const seconds = Number(process.env.BATON_STANDIN_HANG_S || 120);
  setTimeout(() => finish(0, "", ""), seconds * 1000);
} else if (knob("BATON_STANDIN_SIGNAL", "signal").has(command)) {
  fs.appendFileSync(
    path.join(dir, "calls.jsonl"),
    `${JSON.stringify({ at: Date.now(), pid: process.pid, argv, signal: "TERM" })}\n`,
  );
  try {
    process.kill(process.ppid, "SIGTERM");
  } catch {}
  process.exit(143);
} else {
  setImmediate(dispatch);
}

const containerFile = (name) => path.join(containersDir, `${encodeURIComponent(name)}.json`);
function readContainer(name) {
  try {
    return JSON.parse(fs.readFileSync(containerFile(name), "utf8"));
  } catch {
    return null;
  }
}
const writeContainer = (c) => fs.writeFileSync(containerFile(c.name), JSON.stringify(c));
const imageFile = (ref) => path.join(imagesDir, encodeURIComponent(ref));

function pull(args) {
  const ref = args.find((a) => !a.startsWith("-"));
  if (!ref) finish(125, "", '"docker pull" requires exactly 1 argument.');
  for (const bad of knob("BATON_STANDIN_FAIL_PULL", "fail-pull")) {
    if (ref.includes(bad))
      finish(1, "", `Error response from daemon: manifest for ${ref} not found: manifest unknown`);
  }
  fs.writeFileSync(imageFile(ref), String(Date.now()));
  finish(
    0,
    `${ref.split("@")[1] || ref}: Pulling from stand-in\nStatus: Downloaded newer image for ${ref}`,
    "",
  );
}

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

/** The pid in DIR/servers/<name>.pid when that process lives, else 0. */
function serverPid(name) {
  try {
    const pid = Number(fs.readFileSync(path.join(dir, "servers", `${name}.pid`), "utf8").trim());
    return alive(pid) ? pid : 0;
  } catch {
    return 0;
  }
}

/**
 * Waits (bounded, 3 s, like a container that takes a moment to listen) until the state dir's
 * health server (one per state dir, health-server.cjs) listens on `port`, starting the server
 * when none runs; then calls `done`.
 */
function awaitHealthPort(port, done) {
  const deadline = Date.now() + 3000;
  let starting = false; // a server we started is still starting: do not start another
  const check = () => {
    if (serverPid(String(port)) || Date.now() > deadline) return done();
    if (!starting && !serverPid("daemon")) {
      starting = true;
      const child = spawn(process.execPath, [path.join(__dirname, "health-server.cjs"), dir], {
        detached: true,
        stdio: "ignore",
      });
      child.on("exit", () => {
        starting = false;
      });
      child.on("error", () => {});
      child.unref();
    }
    setTimeout(check, 25);
  };
  check();
}

/**
 * Model-load time (ms) of a container started now: BATON_STANDIN_MODEL_LOAD_MS, else the first
 * line of DIR/model-load-ms; 0 when neither is a positive number.
 */
function modelLoadMs() {
  let v = process.env.BATON_STANDIN_MODEL_LOAD_MS || "";
  if (!v) {
    try {
      v = fs.readFileSync(path.join(dir, "model-load-ms"), "utf8").split("\n")[0];
    } catch {}
  }
  const ms = Number(v.trim());
  return Number.isFinite(ms) && ms > 0 ? Math.round(ms) : 0;
}

function run(args) {
  let detached = false;
  let name = "";
  const labels = {};
  const env = {};
  let image = "";
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "-d" || a === "--detach") detached = true;
    else if (a === "--name") name = args[++i] || "";
    else if (a === "--label" || a === "-l") {
      const [k, ...v] = (args[++i] || "").split("=");
      labels[k] = v.join("=");
    } else if (a === "-e" || a === "--env") {
      const [k, ...v] = (args[++i] || "").split("=");
      env[k] = v.join("=");
    } else if (
      ["-p", "--publish", "--network", "--gpus", "-v", "--volume", "--restart"].includes(a)
    )
      i++;
    else if (a.startsWith("-")) continue;
    else {
      image = a;
      break;
    }
  }
  if (!image) finish(125, "", '"docker run" requires at least 1 argument.');
  if (!fs.existsSync(imageFile(image)))
    finish(125, "", `Unable to find image '${image}' locally (stand-in: pull it first)`);
  const existing = name ? readContainer(name) : null;
  if (existing) {
    finish(
      125,
      "",
      `docker: Error response from daemon: Conflict. The container name "/${name}" is already in use.`,
    );
  }
  name = name || `standin-${process.pid}`;
  const lane = labels["baton.lane"] || "";
  let port = null;
  try {
    const u = new URL(env.BATON_HEALTH_URL || "");
    port = Number(u.port || (u.protocol === "https:" ? 443 : 80));
  } catch {}
  const startedAt = Date.now();
  const load = modelLoadMs();
  writeContainer({
    name,
    image,
    lane,
    labels,
    health_url: env.BATON_HEALTH_URL || null,
    port,
    running: true,
    started_at: startedAt,
    // Loading its model: the health server answers 503 until then.
    ...(load > 0 ? { ready_at: startedAt + load } : {}),
    // The env knob is fixed at run time; the fail-health file is read by the server per request.
    fail_health: (process.env.BATON_STANDIN_FAIL_HEALTH || "").split(/[,\n]/).includes(lane),
  });
  if (!detached) {
    // An attached container never returns on its own (F11); bounded so tests cannot leak it.
    setTimeout(() => finish(0, "", ""), Number(process.env.BATON_STANDIN_HANG_S || 120) * 1000);
    return;
  }
  const id = Buffer.from(name).toString("hex").padEnd(64, "0").slice(0, 64);
  if (!port) finish(0, id, "");
  awaitHealthPort(port, () => finish(0, id, ""));
}

function inspect(args) {
  let format = "";
  const names = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "-f" || args[i] === "--format") format = args[++i] || "";
    else if (!args[i].startsWith("-")) names.push(args[i]);
  }
  const c = readContainer(names[0] || "");
  if (!c) finish(1, "", `Error: No such object: ${names[0] || ""}`);
  // `{{index .Config.Labels "KEY"}}`: the label's value, empty when the container has none.
  const label = /^\{\{index \.Config\.Labels "([^"]*)"\}\}$/.exec(format);
  if (label) finish(0, String(c.labels?.[label[1]] ?? ""), "");
  if (format.includes(".State.Running")) finish(0, String(c.running), "");
  if (format.includes(".Config.Image")) finish(0, c.image, "");
  // Every stand-in container shares the host's network, so it has no address of its own (as
  // podman answers under host networking).
  if (format.includes(".NetworkSettings.IPAddress")) finish(0, "", "");
  finish(0, JSON.stringify([c]), "");
}

/** `image inspect REF` (docker/podman): the image's record when it was pulled, else exit 1. */
function imageInspect(args) {
  let format = "";
  const refs = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "-f" || args[i] === "--format") format = args[++i] || "";
    else if (!args[i].startsWith("-")) refs.push(args[i]);
  }
  const ref = refs[0] || "";
  if (!ref) finish(125, "", '"docker image inspect" requires at least 1 argument.');
  if (!fs.existsSync(imageFile(ref))) finish(1, "", `Error: No such image: ${ref}`);
  const id = `sha256:${(ref.split("@sha256:")[1] || "").padEnd(64, "0")}`;
  if (format.includes(".Id")) finish(0, id, "");
  finish(0, JSON.stringify([{ Id: id, RepoDigests: [ref] }]), "");
}

/** `rmi [-f] REF…` / `image rm`: removes pulled images; one a running container uses needs -f. */
function rmi(args) {
  const force = args.includes("-f") || args.includes("--force");
  const refs = args.filter((a) => !a.startsWith("-"));
  if (refs.length === 0) finish(125, "", '"docker rmi" requires at least 1 argument.');
  for (const ref of refs) {
    if (!fs.existsSync(imageFile(ref))) finish(1, "", `Error: No such image: ${ref}`);
    const user = fs
      .readdirSync(containersDir)
      .map((f) => readContainer(decodeURIComponent(f.replace(/\.json$/, ""))))
      .find((c) => c?.running && c.image === ref);
    if (user && !force)
      finish(
        1,
        "",
        `Error response from daemon: conflict: unable to remove repository reference "${ref}" (must force) - container ${user.name} is using its referenced image`,
      );
    fs.rmSync(imageFile(ref), { force: true });
  }
  finish(0, refs.map((r) => `Untagged: ${r}`).join("\n"), "");
}

function stop(args) {
  const names = args.filter(
    (a, i) => !a.startsWith("-") && !(args[i - 1] === "-t" || args[i - 1] === "--time"),
  );
  for (const n of names) {
    const c = readContainer(n);
    if (!c) finish(1, "", `Error response from daemon: No such container: ${n}`);
    c.running = false;
    c.stopped_at = Date.now();
    writeContainer(c);
  }
  finish(0, names.join("\n"), "");
}

function rm(args) {
  const force = args.includes("-f") || args.includes("--force");
  const names = args.filter((a) => !a.startsWith("-"));
  for (const n of names) {
    const c = readContainer(n);
    if (!c) {
      if (force) continue;
      finish(1, "", `Error response from daemon: No such container: ${n}`);
    }
    if (c.running && !force)
      finish(
        1,
        "",
        `Error response from daemon: cannot remove running container ${n}: stop it first`,
      );
    fs.rmSync(containerFile(n), { force: true });
  }
  finish(0, names.join("\n"), "");
}

function ps(args) {
  const all = args.includes("-a") || args.includes("--all");
  const rows = [];
  for (const f of fs.readdirSync(containersDir)) {
    try {
      const c = JSON.parse(fs.readFileSync(path.join(containersDir, f), "utf8"));
      if (all || c.running) rows.push(`${c.name}\t${c.image}\t${c.running ? "Up" : "Exited"}`);
    } catch {}
  }
  finish(0, rows.join("\n"), "");
}

function dispatch() {
  const rest = argv.slice(1);
  switch (command) {
    case "pull":
      pull(rest);
      break;
    case "run":
      run(rest);
      break;
    case "inspect":
      inspect(rest);
      break;
    case "stop":
      stop(rest);
      break;
    case "rm":
      rm(rest);
      break;
    case "ps":
      ps(rest);
      break;
    case "rmi":
      rmi(rest);
      break;
    case "image":
      if (rest[0] === "inspect") imageInspect(rest.slice(1));
      else if (rest[0] === "rm") rmi(rest.slice(1));
      else
        finish(
          1,
          "",
          `stand-in docker: unsupported command 'image ${rest[0] || ""}' (supported: image inspect, image rm)`,
        );
      break;
    default:
      finish(
        1,
        "",
        `stand-in docker: unsupported command '${command}' (supported: pull, run, inspect, stop, rm, ps, image inspect, image rm, rmi)`,
      );
  }
}
