/**
 * docs/demo.md "Every verb on the demo stack", run as written: the `sh demo-walk` block is read
 * from the doc and run line by line on one demo stack (a folder of its own in place of
 * /tmp/baton-demo). `npm run demo` runs as a child process; `set -a; . <file>; set +a` loads the
 * file into the environment of the later lines; `npx baton …` has its arguments expanded by bash
 * and runs the CLI in process; every other line runs in bash. After each verb the test waits for
 * the state the doc's table names, then checks the releases' end states and lineage.
 * Plus `--port`: a port in use fails before anything starts.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { REPO_ROOT } from "../../engine/src/demo/fleet.ts";
import { runDemo } from "../../engine/src/demo/main.ts";
import { baton } from "../cli/run-baton.ts";
import { alive, type DemoProcess, spawnDemo, within } from "../support/demo-process.ts";

/** The walk's lines as docs/demo.md gives them (comments and blank lines left out). */
function walkLines(): string[] {
  const doc = readFileSync(join(REPO_ROOT, "docs/demo.md"), "utf8");
  const block = /```sh demo-walk\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error("docs/demo.md has no ```sh demo-walk block");
  return block
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

/** KEY=VALUE lines of a file, as `set -a; . file` exports them (no quoting in demo.env). */
function envFile(file: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => /^[A-Z_]+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
}

type Rel = {
  state: string;
  hold?: { kind: string } | null;
  lineage?: { verb: string; of: string; manifest_of?: string } | null;
};

/** The state, hold and reason of each release r1..r4, for a failure message. */
async function stateOf(get: (id: string) => Promise<Rel>): Promise<string> {
  const out: string[] = [];
  for (const id of ["r1", "r2", "r3", "r4"])
    out.push(`${id}: ${JSON.stringify(await get(id)).slice(0, 600)}`);
  return out.join("\n");
}

/** What each verb of the walk waits for before the next line (the doc's table). */
const WAITS: Record<string, (get: (id: string) => Promise<Rel>) => Promise<boolean>> = {
  deploy: async (get) => (await get("r2")).hold?.kind === "dark",
  release: async (get) => (await get("r2")).hold?.kind === "promotion",
  pause: async (get) => (await get("r2")).hold?.kind === "pause",
  abort: async (get) => (await get("r2")).state === "rolled_back",
  "roll-forward": async (get) => (await get("r3")).state === "succeeded",
  rollback: async (get) => (await get("r4")).state === "succeeded",
};

describe("the demo walk (docs/demo.md)", () => {
  it("the walk in docs/demo.md: deploy, release, promote, pause, abort, roll forward, rollback on one stack", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-demo-walk-"));
    const lines = walkLines().map((l) => l.replaceAll("/tmp/baton-demo", dir));
    const verbs = lines.flatMap((l) => /^npx baton (\S+)/.exec(l)?.[1] ?? []);
    expect(verbs).toEqual([
      "sign",
      "attest",
      "deploy",
      "release",
      "promote",
      "pause",
      "abort",
      "sign",
      "attest",
      "roll-forward",
      "rollback",
    ]);
    let demo: DemoProcess | null = null;
    const env: Record<string, string> = {};
    const get = async (id: string): Promise<Rel> => {
      const res = await fetch(`${env.BATON_ENGINE_URL}/v1/releases/${id}`, {
        headers: { authorization: `Bearer ${env.BATON_TOKEN}` },
      });
      return res.status === 200 ? ((await res.json()) as Rel) : { state: `HTTP ${res.status}` };
    };
    const log: string[] = [];
    try {
      for (const line of lines) {
        log.push(`$ ${line}`);
        const npm = /^npm run demo -- (.*?)\s*&$/.exec(line);
        const source = /^set -a; \. (\S+); set \+a$/.exec(line);
        const cli = /^npx baton (.*)$/.exec(line);
        if (npm) {
          demo = await spawnDemo(npm[1]!.split(/\s+/), { npm: true });
          const d = demo;
          let gone = false;
          void d.exited.then(() => {
            gone = true;
          });
          // Serving once r1 succeeded; a demo that exits instead fails at once with its output.
          await within(600_000, () => gone || /\[demo\] serving until Ctrl-C/.test(d.output()));
          const up = /\[demo\] serving until Ctrl-C/.test(d.output());
          expect(up, d.output()).toBe(true);
          expect(d.output()).toMatch(/\[demo\] release r1 ended succeeded/);
          expect(d.output()).toContain("[demo] gate added     the recipe has no analysis: section");
          expect(d.output()).toContain(`[demo] recipe         ${dir}/recipe.yaml`);
        } else if (source) {
          Object.assign(env, envFile(source[1]!));
        } else if (cli) {
          // The shell expands the arguments ($(cat …), quotes) as a user's would.
          const argv = execFileSync("bash", ["-c", `printf '%s\\0' ${cli[1]}`], {
            env: { ...process.env, ...env },
          })
            .toString()
            .split("\0")
            .slice(0, -1);
          const r = await baton(argv, env, { timeoutMs: 120_000 });
          log.push(r.stdout, r.stderr);
          expect(r.code, log.join("\n")).toBe(0);
          const wait = WAITS[argv[0]!];
          if (wait) {
            const ok = await within(180_000, () => wait(get), 500);
            const where = ok ? "" : await stateOf(get);
            expect(ok, `${line}\n${where}\n${log.join("\n")}\n${demo?.output() ?? ""}`).toBe(true);
          }
        } else {
          execFileSync("bash", ["-c", line], { env: { ...process.env, ...env } });
        }
      }
      expect((await get("r1")).state).toBe("succeeded");
      expect((await get("r2")).state).toBe("rolled_back");
      expect((await get("r3")).lineage).toMatchObject({ verb: "roll_forward", of: "r2" });
      expect((await get("r4")).lineage).toMatchObject({
        verb: "rollback",
        of: "r3",
        manifest_of: "r1",
      });
      const d = demo as DemoProcess | null;
      if (d) {
        // Ctrl-C in the demo's terminal: SIGINT to its process group (npm and the demo).
        process.kill(-d.pgid, "SIGINT");
        expect(await d.exit(120_000), d.output()).not.toBeNull();
        // The demo stops its parts and exits; nothing of the group is left.
        expect(await within(60_000, () => !alive(-d.pgid)), d.output()).toBe(true);
        expect(d.output()).toContain("[demo] SIGINT: stopping the engine and the stand-in");
      }
    } finally {
      (demo as DemoProcess | null)?.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 1_800_000);

  it("--port: a port in use fails before anything starts, naming it", async () => {
    const held: Server = createServer();
    await new Promise<void>((ok) => held.listen(0, "127.0.0.1", () => ok()));
    const port = (held.address() as { port: number }).port;
    const dir = mkdtempSync(join(tmpdir(), "baton-demo-port-"));
    let err = "";
    const spyErr = vi.spyOn(console, "error").mockImplementation((s: string) => {
      err += `${s}\n`;
    });
    const spyLog = vi.spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runDemo(["--port", String(port), "--data-dir", dir])).toBe(1);
    } finally {
      spyErr.mockRestore();
      spyLog.mockRestore();
      held.close();
    }
    expect(err).toContain(`[demo] port ${port} on 127.0.0.1 is in use: choose another --port`);
    // Nothing else started: no fleet, no target sandbox.
    expect(existsSync(join(dir, "target"))).toBe(false);
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);
});
