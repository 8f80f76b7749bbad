// The per-container stand-in's CLI (README.md): `docker pull|image inspect|run|inspect|stop|rm|ps|logs`.
// Exit codes and messages as docker's: 125 for a run that cannot start, 1 for a missing container.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { spawn } = require("node:child_process");

const dir = process.env.BATON_STANDIN_DIR;
if (!dir) {
  process.stderr.write("[standin] BATON_STANDIN_DIR is not set\n");
  process.exit(125);
}
for (const d of ["containers", "images", "holders"])
  fs.mkdirSync(path.join(dir, d), { recursive: true, mode: 0o777 });

const argv = process.argv.slice(2);
const out = (s) => process.stdout.write(`${s}\n`);
const fail = (code, msg) => {
  process.stderr.write(`Error: ${msg}\n`);
  process.exit(code);
};
const digestOf = (ref) => {
  const at = ref.indexOf("@sha256:");
  return at >= 0 ? ref.slice(at + 8) : ref.replace(/[^A-Za-z0-9._-]/g, "_");
};
const imageFile = (ref) => path.join(dir, "images", digestOf(ref));
const plain = (name, what) => path.join(dir, "containers", `${name}.${what}`);
const cfile = (name) => path.join(dir, "containers", `${name}.json`);
const load = (name) => {
  try {
    return JSON.parse(fs.readFileSync(cfile(name), "utf8"));
  } catch {
    return null;
  }
};
const save = (c) => {
  const tmp = `${cfile(c.name)}.${process.pid}`;
  fs.writeFileSync(tmp, JSON.stringify(c));
  fs.renameSync(tmp, cfile(c.name));
};
const alive = (pid) => {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
};
const running = (c) => c.running && alive(c.pid) && !fs.existsSync(plain(c.name, "stopped"));
const lines = (f) => {
  try {
    return fs
      .readFileSync(path.join(dir, f), "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean);
  } catch {
    return [];
  }
};
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function stop(c) {
  if (alive(c.pid)) {
    try {
      process.kill(c.pid, "SIGTERM");
    } catch {}
    for (let i = 0; i < 100 && alive(c.pid); i++) sleep(20);
    if (alive(c.pid)) {
      try {
        process.kill(c.pid, "SIGKILL");
      } catch {}
    }
  }
  fs.rmSync(path.join(dir, "holders", String(c.port), c.name), { force: true });
  fs.writeFileSync(plain(c.name, "stopped"), "");
  if (c.running) save({ ...c, running: false, exit_code: 0 });
}

const [cmd, ...rest] = argv;
switch (cmd) {
  case "pull": {
    const ref = rest.find((a) => !a.startsWith("-"));
    if (!ref) fail(125, "pull needs an image");
    if (lines("fail-pull").some((s) => ref.includes(s))) fail(1, `${ref}: manifest unknown`);
    fs.writeFileSync(imageFile(ref), "");
    out(`sha256:${(ref.split("@sha256:")[1] || "0".repeat(64)).slice(0, 64)}`);
    break;
  }
  case "image": {
    const ref = rest[rest.length - 1];
    if (rest[0] !== "inspect" || !ref) fail(125, `unsupported: image ${rest.join(" ")}`);
    if (!fs.existsSync(imageFile(ref))) fail(1, `${ref}: image not known`);
    out(`sha256:${(ref.split("@sha256:")[1] || "0".repeat(64)).slice(0, 64)}`);
    break;
  }
  case "run": {
    let name = "";
    const labels = {};
    const env = {};
    let image = "";
    for (let i = 0; i < rest.length; i++) {
      const a = rest[i];
      if (a === "-d" || a === "--detach" || a === "--rm") continue;
      if (a === "--name") name = rest[++i] || "";
      else if (a === "--label" || a === "-l" || a === "-e" || a === "--env") {
        const kv = rest[++i] || "";
        const at = kv.indexOf("=");
        const k = at < 0 ? kv : kv.slice(0, at);
        const v = at < 0 ? "" : kv.slice(at + 1);
        if (a === "--label" || a === "-l") labels[k] = v;
        else env[k] = v;
      } else if (a.startsWith("-")) {
        if (!a.includes("=")) i++;
      } else {
        image = a;
        break;
      }
    }
    if (!name || !image) fail(125, "run needs --name and an image");
    if (!fs.existsSync(imageFile(image))) fail(125, `${image}: image not known`);
    if (load(name)) fail(125, `the container name "${name}" is already in use`);
    const url = env.BATON_HEALTH_URL || "";
    let port = 80;
    try {
      const u = new URL(url);
      port = Number(u.port) || (u.protocol === "https:" ? 443 : 80);
    } catch {}
    const c = {
      name,
      image,
      lane: labels["baton.lane"] || "",
      labels,
      env,
      port,
      pid: 0,
      running: true,
      exit_code: null,
      started_at: Date.now(),
    };
    save(c);
    const child = spawn(process.execPath, [path.join(__dirname, "container.cjs"), dir, name], {
      detached: true,
      stdio: "ignore",
    });
    child.unref();
    save({ ...c, pid: child.pid });
    fs.writeFileSync(plain(name, "image"), image);
    fs.writeFileSync(plain(name, "pid"), `${child.pid}\n`);
    // What `docker` (sh) answers without starting node: each label's value, and the container's
    // `ps --format json` line without its State (the sh adds it, running or exited).
    for (const [k, v] of Object.entries(labels))
      if (/^[A-Za-z0-9._-]+$/.test(k)) fs.writeFileSync(plain(name, `label.${k}`), v);
    fs.writeFileSync(
      plain(name, "ps"),
      JSON.stringify({ Names: name, Image: image, Labels: labels }).slice(0, -1),
    );
    const started = path.join(dir, "containers", `${name}.started`);
    for (let i = 0; i < 250 && !fs.existsSync(started) && alive(child.pid); i++) sleep(12);
    out(name);
    break;
  }
  case "inspect": {
    let fmt = null;
    const names = [];
    for (let i = 0; i < rest.length; i++) {
      if (rest[i] === "-f" || rest[i] === "--format") fmt = rest[++i];
      else names.push(rest[i]);
    }
    const c = load(names[0] || "");
    if (!c) fail(1, `no such container ${names[0] || ""}`);
    const addr = (() => {
      try {
        return fs.readFileSync(path.join(dir, "containers", `${c.name}.addr`), "utf8");
      } catch {
        return "";
      }
    })();
    const fields = {
      "{{.State.Running}}": String(running(c)),
      "{{.Config.Image}}": c.image,
      "{{.State.ExitCode}}": String(c.exit_code ?? (running(c) ? 0 : 1)),
      "{{.NetworkSettings.IPAddress}}": running(c) ? addr : "",
      "{{.Id}}": c.name,
    };
    // `{{index .Config.Labels "KEY"}}`: one label's value (empty when absent), as podman answers.
    const label = fmt === null ? null : /^\{\{index \.Config\.Labels "([^"]*)"\}\}$/.exec(fmt);
    if (fmt === null) out(JSON.stringify([{ ...c, running: running(c), addr }]));
    else if (fmt in fields) out(fields[fmt]);
    else if (label) out(c.labels?.[label[1]] ?? "");
    else fail(125, `unsupported format ${fmt}`);
    break;
  }
  case "stop":
  case "rm": {
    const names = rest.filter((a) => !a.startsWith("-") && !/^[0-9]+$/.test(a));
    let code = 0;
    for (const n of names) {
      const c = load(n);
      if (!c) {
        process.stderr.write(`Error: no such container ${n}\n`);
        code = 1;
        continue;
      }
      stop(c);
      if (cmd === "rm") {
        for (const f of [".json", ".addr", ".started", ".image", ".pid", ".stopped", ".ps"])
          fs.rmSync(path.join(dir, "containers", `${n}${f}`), { force: true });
        for (const f of fs.readdirSync(path.join(dir, "containers")))
          if (f.startsWith(`${n}.label.`))
            fs.rmSync(path.join(dir, "containers", f), { force: true });
      }
      out(n);
    }
    process.exit(code);
    break;
  }
  case "ps": {
    const all = rest.includes("-a") || rest.includes("--all");
    const json = rest.includes("json") || rest.includes("{{json .}}");
    for (const f of fs.readdirSync(path.join(dir, "containers"))) {
      if (!f.endsWith(".json")) continue;
      const c = load(f.slice(0, -5));
      if (!c || (!all && !running(c))) continue;
      out(
        json
          ? JSON.stringify({
              Names: c.name,
              Image: c.image,
              Labels: c.labels,
              State: running(c) ? "running" : "exited",
            })
          : c.name,
      );
    }
    break;
  }
  case "logs":
    break;
  default:
    fail(125, `unsupported command: ${argv.join(" ")}`);
}
