/**
 * `baton demo --data-dir <dir>` with a folder that cannot be created stops before anything
 * starts: one line naming --data-dir and the fix, exit 2. Under /proc, Node's recursive mkdir
 * never returns (it spins, deaf to SIGTERM), so this runs as a process, killed if it hangs.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { batonBin } from "./run-baton.ts";

const dir = mkdtempSync(join(tmpdir(), "baton-demo-data-dir-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("baton demo --data-dir that cannot be created", () => {
  it.runIf(process.platform === "linux")(
    "under /proc: exits 2 naming --data-dir and the fix, without starting anything",
    async () => {
      const r = await batonBin(
        ["demo", "--data-dir", "/proc/baton-nope"],
        {},
        { timeoutMs: 60_000 },
      );
      expect(r.stderr).toContain("[demo] --data-dir /proc/baton-nope cannot hold the demo's files");
      expect(r.stderr).toContain("fix: pass a folder this user can write");
      expect(r.stdout).not.toContain("starting the control plane");
      expect(r.code).toBe(2);
    },
  );

  it("under a file: exits 2 naming --data-dir and the OS error", async () => {
    const file = join(dir, "a-file");
    writeFileSync(file, "");
    const r = await batonBin(["demo", "--data-dir", join(file, "sub")], {}, { timeoutMs: 60_000 });
    expect(r.stderr).toContain(
      `--data-dir ${join(file, "sub")} cannot hold the demo's files (ENOTDIR)`,
    );
    expect(r.code).toBe(2);
  });
});
