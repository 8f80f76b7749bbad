/**
 * `fetchBundle` (cli/github-attestations.ts): a `bundle_url` of GitHub's attestations API is
 * fetched over https or loopback http only, without credentials, bounded in size before and
 * after Snappy decompression, and must hold a Sigstore bundle. Served by a loopback server.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { compress } from "snappyjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUNDLE_MAX_BYTES, fetchBundle } from "../../engine/src/cli/github-attestations.ts";

const BUNDLE = {
  mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
  verificationMaterial: {},
  dsseEnvelope: {},
};

let server: Server;
let base = "";
const seen: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req.headers);
    const path = req.url ?? "";
    if (path === "/snappy") {
      res.writeHead(200, { "content-type": "application/x-snappy" });
      res.end(compress(Buffer.from(JSON.stringify(BUNDLE))));
    } else if (path === "/json") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(BUNDLE));
    } else if (path === "/not-a-bundle") {
      res.writeHead(200, { "content-type": "application/x-snappy" });
      res.end(compress(Buffer.from('{"hello":"world"}')));
    } else if (path === "/garbage") {
      res.writeHead(200, { "content-type": "application/x-snappy" }).end(Buffer.from([0xff, 0xff]));
    } else if (path === "/bomb") {
      // A Snappy block declaring 64 MiB: refused from its header, before anything is allocated.
      const header = Buffer.from([0x80, 0x80, 0x80, 0x20]);
      res.writeHead(200, { "content-type": "application/x-snappy" }).end(header);
    } else if (path === "/huge") {
      res.writeHead(200, { "content-length": String(BUNDLE_MAX_BYTES + 1) });
      res.end();
    } else if (path === "/to-plain-http") {
      // A loopback stand-in of blob storage sending the client on to plain http elsewhere.
      res.writeHead(302, { location: "http://blob.example.com/x.json.sn" }).end();
    } else if (path === "/to-file") {
      res.writeHead(307, { location: "file:///etc/passwd" }).end();
    } else if (path.startsWith("/hop/")) {
      // /hop/3 -> /hop/2 -> /hop/1 -> /json (relative Locations, as blob stores send them).
      const n = Number(path.slice("/hop/".length));
      res.writeHead(n === 2 ? 301 : 302, { location: n <= 1 ? "/json" : `../hop/${n - 1}` });
      res.end();
    } else if (path === "/loop") {
      res.writeHead(302, { location: "/loop" }).end();
    } else if (path === "/no-location") {
      res.writeHead(302).end();
    } else {
      res.writeHead(403, { "content-type": "application/xml" }).end("<Error/>");
    }
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((ok) => server.close(() => ok()));
});

describe("fetchBundle", () => {
  it("decompresses a Snappy bundle, takes plain JSON as it is, and sends no credentials", async () => {
    await expect(fetchBundle(`${base}/snappy`)).resolves.toEqual(BUNDLE);
    await expect(fetchBundle(`${base}/json`)).resolves.toEqual(BUNDLE);
    expect(seen.every((h) => h.authorization === undefined && h.cookie === undefined)).toBe(true);
  });

  it("refuses http beyond loopback and what is not a URL, without a request", async () => {
    const before = seen.length;
    await expect(fetchBundle("http://blob.example.com/x.json.sn")).rejects.toThrow(
      /bundle_url http:\/\/blob\.example\.com is refused: only https/,
    );
    await expect(fetchBundle("file:///etc/passwd")).rejects.toThrow(/is refused/);
    await expect(fetchBundle("not a url")).rejects.toThrow(/bundle_url is not a URL/);
    expect(seen.length).toBe(before);
  });

  it("re-checks every redirect hop: plain http beyond loopback and file: are refused", async () => {
    await expect(fetchBundle(`${base}/to-plain-http`)).rejects.toThrow(
      /^redirect 1 \(HTTP 302\) to http:\/\/blob\.example\.com is refused: only https \(or http to a loopback address\) is fetched$/,
    );
    await expect(fetchBundle(`${base}/to-file`)).rejects.toThrow(
      /^redirect 1 \(HTTP 307\) to file:\/\/ is refused/,
    );
    await expect(fetchBundle(`${base}/no-location`)).rejects.toThrow(
      /^HTTP 302 without a Location/,
    );
  });

  it("follows a few redirects between allowed URLs, and refuses more than 5 hops", async () => {
    const before = seen.length;
    await expect(fetchBundle(`${base}/hop/3`)).resolves.toEqual(BUNDLE);
    expect(seen.length - before).toBe(4);
    const atLoop = seen.length;
    await expect(fetchBundle(`${base}/loop`)).rejects.toThrow(
      /^more than 5 redirects \(last to http:\/\/127\.0\.0\.1:\d+\/loop\)/,
    );
    // The first request and 5 followed hops, no more.
    expect(seen.length - atLoop).toBe(6);
  });

  it("names the status, the size limit, a bad block and a non-bundle", async () => {
    await expect(fetchBundle(`${base}/expired`)).rejects.toThrow(/^HTTP 403$/);
    await expect(fetchBundle(`${base}/huge`)).rejects.toThrow(
      new RegExp(`more than the ${BUNDLE_MAX_BYTES} allowed`),
    );
    await expect(fetchBundle(`${base}/bomb`)).rejects.toThrow(
      /neither JSON nor a Snappy block .*too big/,
    );
    await expect(fetchBundle(`${base}/garbage`)).rejects.toThrow(/neither JSON nor a Snappy block/);
    await expect(fetchBundle(`${base}/not-a-bundle`)).rejects.toThrow(
      /not a Sigstore bundle \(no mediaType\)/,
    );
  });
});
