/**
 * The embedded stack (`npm run demo`, `baton demo --serve`) serves its engine with the same
 * server limits as `baton serve` (docs/deploying.md): a verb's body over its 64 KiB limit sent
 * with `Expect: 100-continue` (what curl does for a large body) is answered 413 naming the
 * limit before the body is sent, not `100 Continue` and a dropped connection.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeStore, type InProcess, startInProcess } from "../support/e2e-harness.ts";
import { rawExchange } from "../support/raw-http.ts";

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
    const got = await rawExchange(port, head);
    expect(got).not.toMatch(/100 Continue/);
    expect(got).toMatch(/^HTTP\/1\.1 413 /);
    expect(got).toMatch(/request body over 65536 bytes/);
  });
});
