/**
 * An offline Sigstore for tests: @sigstore/mock's Fulcio CA (with a CT log) and timestamp
 * authority served on a loopback port, a trusted root naming them, and GitHub-shaped OIDC
 * tokens (unsigned: the mock Fulcio reads their claims, as the real one does after checking
 * the signature). Keyless signing in tests goes through sigstore-js's real client code.
 */
import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  fulcioHandler,
  initializeCA,
  initializeCTLog,
  initializeTSA,
  tsaHandler,
} from "@sigstore/mock";

export interface MockSigstore {
  /** Base URL of both the Fulcio and the TSA endpoints. */
  url: string;
  /** Sigstore TrustedRoot JSON naming the mock CA, CT log and TSA. */
  trustedRoot: unknown;
  /** An unsigned JWT with GitHub Actions claims for `repository`, `workflow` and `ref`. */
  githubToken(o: { repository: string; workflow: string; ref: string }): string;
  close(): Promise<void>;
}

const b64 = (b: ArrayBufferView | Buffer) =>
  Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");
const b64url = (s: string) => Buffer.from(s).toString("base64url");

/** Starts the mock on 127.0.0.1 (port 0). */
export async function startMockSigstore(): Promise<MockSigstore> {
  const ec = () => generateKeyPairSync("ec", { namedCurve: "P-256" });
  const ctKeys = ec();
  const ctLog = await initializeCTLog(ctKeys);
  const ca = await initializeCA(ec(), ctLog);
  const tsa = await initializeTSA(ec());
  // The mock writes genTime with milliseconds, trimming trailing zeros (".12Z"), which
  // sigstore-js's parser (exactly three digits) refuses about one time in ten: stamp whole
  // seconds instead. `getCurrentTime` is the mock's own clock hook (an instance property).
  (tsa as unknown as { getCurrentTime: () => Date }).getCurrentTime = () =>
    new Date(Math.floor(Date.now() / 1000) * 1000);
  const handlers = [fulcioHandler(ca), tsaHandler(tsa)];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const h = handlers.find((x) => x.path === req.url && req.method === "POST");
      if (!h) {
        res.writeHead(404).end();
        return;
      }
      h.fn(Buffer.concat(chunks).toString("utf8")).then(
        (r) => {
          res.writeHead(r.statusCode, { "content-type": r.contentType ?? "text/plain" });
          res.end(
            typeof r.response === "string"
              ? r.response
              : Buffer.from(r.response.buffer, r.response.byteOffset, r.response.byteLength),
          );
        },
        () => res.writeHead(500).end(),
      );
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const start = "2020-01-01T00:00:00Z";
  const trustedRoot = {
    mediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
    tlogs: [],
    certificateAuthorities: [
      {
        subject: { organization: "mock", commonName: "fulcio" },
        uri: url,
        certChain: { certificates: [{ rawBytes: b64(ca.rootCertificate) }] },
        validFor: { start },
      },
    ],
    ctlogs: [
      {
        baseUrl: url,
        hashAlgorithm: "SHA2_256",
        publicKey: {
          rawBytes: b64(ctLog.publicKey),
          keyDetails: "PKIX_ECDSA_P256_SHA_256",
          validFor: { start },
        },
        logId: { keyId: b64(ctLog.logID) },
      },
    ],
    timestampAuthorities: [
      {
        subject: { organization: "mock", commonName: "tsa" },
        uri: url,
        certChain: {
          certificates: [
            { rawBytes: b64(tsa.intCertificate) },
            { rawBytes: b64(tsa.rootCertificate) },
          ],
        },
        validFor: { start },
      },
    ],
  };
  return {
    url,
    trustedRoot,
    githubToken({ repository, workflow, ref }) {
      const claims = {
        iss: "https://token.actions.githubusercontent.com",
        sub: `https://github.com/${repository}/${workflow}@${ref}`,
        aud: "sigstore",
        repository,
        ref,
        workflow_ref: `${repository}/${workflow}@${ref}`,
        job_workflow_ref: `${repository}/${workflow}@${ref}`,
        event_name: "push",
        exp: Math.floor(Date.now() / 1000) + 600,
        iat: Math.floor(Date.now() / 1000),
      };
      return `${b64url(JSON.stringify({ alg: "none", typ: "JWT" }))}.${b64url(JSON.stringify(claims))}.`;
    },
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
