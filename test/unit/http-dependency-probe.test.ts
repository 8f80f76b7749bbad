/**
 * The HTTP dependency probe (engine/src/adapters/http-dependency-probe): the revision from a
 * 2xx answer (text or a JSON field); never a throw: a non-2xx answer, a redirect (not followed),
 * an answer past the size limit and one that never comes are each `ok: false` with the reason.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  HttpDependencyProbe,
  PROBE_MAX_BYTES,
} from "../../engine/src/adapters/http-dependency-probe/index.ts";

let server: Server;
let base = "";
const hanging: import("node:http").ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === "/text") return res.end("rev-7\n");
    if (req.url === "/json") return res.end(JSON.stringify({ model: { revision: "2026-12-01" } }));
    if (req.url === "/down") {
      res.writeHead(503);
      return res.end("maintenance");
    }
    if (req.url === "/moved") {
      res.writeHead(302, { location: "/text" });
      return res.end();
    }
    if (req.url === "/huge") return res.end("x".repeat(PROBE_MAX_BYTES + 1));
    hanging.push(res); // /hang: never answered until the server closes
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const r of hanging) r.destroy();
  await new Promise((resolve) => server.close(resolve));
});

describe("the HTTP dependency probe", () => {
  const probe = new HttpDependencyProbe({ timeoutMs: 300 });

  it("reads the revision from the answer's text or a JSON field", async () => {
    expect(await probe.revision({ url: `${base}/text` })).toEqual({ ok: true, revision: "rev-7" });
    expect(await probe.revision({ url: `${base}/json`, field: "model.revision" })).toEqual({
      ok: true,
      revision: "2026-12-01",
    });
  });

  it("says why there is no revision instead of throwing", async () => {
    expect(await probe.revision({ url: `${base}/down` })).toEqual({
      ok: false,
      message: "the probe answered HTTP 503",
    });
    expect(await probe.revision({ url: `${base}/moved` })).toEqual({
      ok: false,
      message: "the probe answered HTTP 302",
    });
    expect(await probe.revision({ url: `${base}/huge` })).toEqual({
      ok: false,
      message: `the probe's answer is larger than ${PROBE_MAX_BYTES} bytes`,
    });
    expect(await probe.revision({ url: `${base}/hang` })).toEqual({
      ok: false,
      message: "no answer within 300 ms",
    });
  });
});
