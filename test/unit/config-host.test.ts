/** BATON_HOST: the engine listens on loopback unless told otherwise. */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../engine/src/config.ts";
import { BatonError } from "../../engine/src/domain/errors.ts";

const base = {
  BATON_CALLBACK_SECRETS: "s".repeat(32),
  BATON_OPERATOR_TOKEN: "o".repeat(32),
};

describe("BATON_HOST", () => {
  it("defaults to 127.0.0.1, like the default public URL", () => {
    const c = loadConfig(base);
    expect(c.host).toBe("127.0.0.1");
    expect(new URL(c.publicUrl).hostname).toBe(c.host);
    expect(loadConfig({ ...base, BATON_HOST: "" }).host).toBe("127.0.0.1");
  });

  it("takes an address to listen on", () => {
    expect(loadConfig({ ...base, BATON_HOST: "0.0.0.0" }).host).toBe("0.0.0.0");
    expect(loadConfig({ ...base, BATON_HOST: "::" }).host).toBe("::");
  });

  it("refuses a URL or text with spaces, naming the variable and the fix", () => {
    for (const bad of ["http://0.0.0.0", "my host"]) {
      let err: unknown;
      try {
        loadConfig({ ...base, BATON_HOST: bad });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(BatonError);
      const p = (err as BatonError).problems.find((x) => x.path === "BATON_HOST");
      expect(p?.message).toMatch(/BATON_HOST must be an address/);
      expect(p?.fix).toMatch(/127\.0\.0\.1/);
    }
  });
});
