/** Failed reconciler passes are logged as one line each, repeats at most once a minute. */
import { describe, expect, it } from "vitest";
import { passFailureLog } from "../../engine/src/service/pass-failure-log.ts";

describe("passFailureLog", () => {
  it("logs the first failure and a new cause at once, repeats once a minute, recovery once", () => {
    const lines: string[] = [];
    const log = {
      info: (m: string) => lines.push(`info ${m}`),
      warn: (m: string) => lines.push(`warn ${m}`),
      error: (m: string, e?: unknown) => lines.push(`error ${m}${e ? " +err" : ""}`),
    };
    let t = 0;
    const p = passFailureLog(log, () => t);
    const down = new Error("connect ECONNREFUSED 127.0.0.1:5432\n    at PostgresStore.claimDue");
    for (let i = 0; i < 30; i++) {
      p.failed(down);
      t += 1_000;
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("reconciler pass failed: connect ECONNREFUSED 127.0.0.1:5432");
    expect(lines[0]).not.toContain("\n");
    expect(lines[0]).not.toContain("+err");
    for (let i = 0; i < 31; i++) {
      p.failed(down);
      t += 1_000;
    }
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/more since the last line/);
    p.failed(new Error("Query read timeout"));
    expect(lines).toHaveLength(3);
    p.ok();
    p.ok();
    expect(lines).toHaveLength(4);
    expect(lines[3]).toMatch(/^info .*succeed again/);
  });
});
