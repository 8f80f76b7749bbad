/**
 * The Node server's connection limits from the environment (engine/src/node/http-server.ts):
 * defaults, the cap derived from the open-file limit, and bad values named with the fix.
 */
import { describe, expect, it } from "vitest";
import {
  DEFAULT_MAX_CONNECTIONS,
  httpLimitsFromEnv,
  openFileLimit,
} from "../../engine/src/node/http-server.ts";

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 524288               files
`;

describe("http limits", () => {
  it("reads the open-file soft limit", () => {
    expect(openFileLimit(LIMITS)).toBe(1024);
    expect(openFileLimit("Max open files            unlimited  unlimited  files\n")).toBeNull();
    expect(openFileLimit("")).toBeNull();
  });

  it("defaults: 20 s headers, 60 s request, 5 s keep-alive, a cap below the fd limit", () => {
    expect(httpLimitsFromEnv({}, 1024)).toEqual({
      headersTimeoutMs: 20_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 5_000,
      maxConnections: 768,
      openFileLimit: 1024,
    });
    expect(httpLimitsFromEnv({}, null).maxConnections).toBe(DEFAULT_MAX_CONNECTIONS);
    expect(httpLimitsFromEnv({}, 65_536).maxConnections).toBe(65_280);
  });

  it("takes the variables, and an empty one means unset", () => {
    const l = httpLimitsFromEnv(
      {
        BATON_HEADERS_TIMEOUT_MS: "2000",
        BATON_REQUEST_TIMEOUT_MS: "",
        BATON_KEEP_ALIVE_TIMEOUT_MS: "1000",
        BATON_MAX_CONNECTIONS: "100",
      },
      1024,
    );
    expect(l).toMatchObject({
      headersTimeoutMs: 2000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 1000,
      maxConnections: 100,
    });
  });

  it("refuses bad values, naming the variable and the fix", () => {
    expect(() => httpLimitsFromEnv({ BATON_HEADERS_TIMEOUT_MS: "soon" }, 1024)).toThrow(
      /BATON_HEADERS_TIMEOUT_MS must be a number of milliseconds, 500\.\.600000; fix: /,
    );
    expect(() => httpLimitsFromEnv({ BATON_HEADERS_TIMEOUT_MS: "10" }, 1024)).toThrow(
      /BATON_HEADERS_TIMEOUT_MS must be 500\.\.600000/,
    );
    expect(() => httpLimitsFromEnv({ BATON_MAX_CONNECTIONS: "2000" }, 1024)).toThrow(
      /BATON_MAX_CONNECTIONS=2000 leaves fewer than 256 of the process's 1024 file descriptors.*fix: lower it to at most 768, or raise the open-file limit \(LimitNOFILE=/,
    );
  });
});
