// One stand-in container: `node container.cjs DIR NAME` (see README.md). Listens at an address
// of its own on its health URL's port and answers every request with what it runs; registers
// as a holder of that port; never listens when its image is listed in DIR/broken.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

const [dir, name] = process.argv.slice(2);
const file = path.join(dir, "containers", `${name}.json`);
const c = JSON.parse(fs.readFileSync(file, "utf8"));
const holder = path.join(dir, "holders", String(c.port), name);
const maxS = Number(process.env.BATON_STANDIN_MAX_S || 1800);

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
const digest = c.image.split("@sha256:")[1] || c.image;
const broken = lines("broken").some((l) => l === digest || l === `${c.lane} ${digest}`);

function done(code) {
  try {
    fs.rmSync(holder, { force: true });
  } catch {}
  process.exit(code);
}
process.on("SIGTERM", () => done(0));
process.on("SIGINT", () => done(0));
process.on("SIGHUP", () => {});
// Leaves when its state dir is gone (the test ended) or after its maximum lifetime.
setInterval(() => {
  if (!fs.existsSync(file)) done(0);
}, 1000);
setTimeout(() => done(0), maxS * 1000);

function mark(what, value) {
  fs.writeFileSync(path.join(dir, "containers", `${name}.${what}`), value);
}

if (broken) {
  mark("started", "broken");
} else {
  const body = JSON.stringify({ container: name, image: c.image, lane: c.lane, env: c.env });
  const server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "application/json" });
    res.end(body);
  });
  let tries = 0;
  const listen = () => {
    // An address of its own (not 127.0.0.1, which the lane's port is bound on).
    const addr = `127.${1 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${2 + Math.floor(Math.random() * 250)}`;
    server.once("error", (err) => {
      if (err.code === "EADDRINUSE" && ++tries < 10) return listen();
      process.stderr.write(`[container ${name}] cannot listen: ${err.message}\n`);
      done(1);
    });
    server.listen(c.port, addr, () => {
      mark("addr", addr);
      fs.mkdirSync(path.dirname(holder), { recursive: true });
      fs.writeFileSync(holder, addr);
      mark("started", addr);
    });
  };
  listen();
}
