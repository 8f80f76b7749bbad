/**
 * The embedded stack (`npm run demo`, `baton demo --serve`) serves its engine with the same
 * server limits as `baton serve` (docs/deploying.md): a verb's body over its 64 KiB limit sent
 * with `Expect: 100-continue` (what curl does for a large body) is answered 413 naming the
 * limit before the body is sent, not `100 Continue` and a dropped connection.
 */
import { connect } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeStore, type InProcess, startInProcess } from "../support/e2e-harness.ts";

/** Sends `head` (no body) and reads until the server closes (bounded: 10 s). */
function exchange(port: number, head: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    let got = "";
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`socket still open after 10 s; read so far: ${got.slice(0, 300)}`));
    }, 10_000);
    s.on("data", (d) => {
      got += d.toString("latin1");
    });
    s.on("error", () => {});
    s.on("close", () => {
      clearTimeout(timer);
      resolve(got);
    });
    s.write(head);
  });
}

describeStore("sqlite", "embedded stack server limits", () => {
  let e: InProcess | null = null;
  beforeAll(async () => {
    e = await startInProcess("sqlite");
  }, 240_000);
  afterAll(async () => {
    await e?.close();
  });

  it("a 2 MB abort body with Expect: 100-continue is 413 before the body is sent", async () => {
    const port = Number(new URL(e!.url()).port);
    const head = `POST /v1/releases/r999/abort HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${e!.operatorToken}\r\nContent-Type: application/json\r\nContent-Length: ${2 * 1024 * 1024}\r\nExpect: 100-continue\r\n\r\n`;
    const got = await exchange(port, head);
    expect(got).not.toMatch(/100 Continue/);
    expect(got).toMatch(/^HTTP\/1\.1 413 /);
    expect(got).toMatch(/request body over 65536 bytes/);
  });
});
