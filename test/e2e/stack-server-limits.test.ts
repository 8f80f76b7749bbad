/**
 * The embedded stack (`npm run demo`, `baton demo --serve`) serves its engine with the same
 * server limits as `baton serve` (docs/deploying.md): a verb's body over its 64 KiB limit sent
 * with `Expect: 100-continue` (what curl does for a large body) is answered 413 naming the
 * limit before the body is sent, not `100 Continue` and a dropped connection; credential guessing
 * is throttled per client address, as the socket shows it (not one counter for every caller).
 */
import { request } from "node:http";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AUTH_THROTTLE } from "../../engine/src/http/auth-throttle.ts";
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

  it("wrong tokens from one loopback address lock out that address only: the operator's token from another still works", async () => {
    const port = Number(new URL(e!.url()).port);
    /** GET /v1/releases with `token`, sent from `localAddress`: the status and the body. */
    const get = (token: string, localAddress: string) =>
      new Promise<{ status: number; body: string }>((ok, fail) => {
        const req = request(
          {
            host: "127.0.0.1",
            port,
            path: "/v1/releases",
            localAddress,
            headers: { authorization: `Bearer ${token}` },
          },
          (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (d: string) => {
              body += d;
            });
            res.on("end", () => ok({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on("error", fail);
        req.end();
      });
    for (let i = 0; i < AUTH_THROTTLE.failures; i++) {
      expect((await get(`wrong-${i}-0123456789abcdef`, "127.0.0.3")).status).toBe(401);
    }
    const refused = await get(e!.operatorToken, "127.0.0.3");
    expect(refused.status).toBe(429);
    expect(refused.body).toMatch(/from 127\.0\.0\.3; nothing was checked/);
    expect((await get(e!.operatorToken, "127.0.0.4")).status).toBe(200);
  });
});
