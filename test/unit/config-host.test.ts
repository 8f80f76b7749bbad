/** BATON_HOST: the engine listens on loopback unless told otherwise. */
import { describe, expect, it } from "vitest";
import { loadConfig, publicUrlWarning } from "../../engine/src/config.ts";
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

describe("publicUrlWarning", () => {
  it("warns when the engine listens beyond loopback but its public URL is a loopback one", () => {
    for (const host of ["0.0.0.0", "::", "10.0.0.5"]) {
      for (const url of ["http://127.0.0.1:8787", "http://localhost:8787", "http://[::1]:8787"]) {
        const w = publicUrlWarning(host, url);
        expect(w, `${host} ${url}`).toMatch(/^\[engine\] warning: listening on /);
        expect(w).toContain(`public URL is ${url}, a loopback address`);
        expect(w).toMatch(/runners on other machines .* would not reach this engine/);
        expect(w).toMatch(/fix: set BATON_PUBLIC_URL to the address other machines use/);
      }
    }
    // The default: loopback on both sides, or a public URL others can reach.
    expect(publicUrlWarning("127.0.0.1", "http://127.0.0.1:8787")).toBeNull();
    expect(publicUrlWarning("::1", "http://localhost:8787")).toBeNull();
    expect(publicUrlWarning("0.0.0.0", "https://baton.example.com")).toBeNull();
    expect(publicUrlWarning("0.0.0.0", "http://10.0.0.5:8787")).toBeNull();
  });

  it("is what loadConfig's defaults give with BATON_HOST=0.0.0.0 and no BATON_PUBLIC_URL", () => {
    const c = loadConfig({ ...base, BATON_HOST: "0.0.0.0" });
    expect(publicUrlWarning(c.host ?? "", c.publicUrl)).toContain("http://127.0.0.1:8787");
    const ok = loadConfig({
      ...base,
      BATON_HOST: "0.0.0.0",
      BATON_PUBLIC_URL: "http://10.1.2.3:8787",
      BATON_ALLOW_HTTP: "BATON_PUBLIC_URL",
    });
    expect(publicUrlWarning(ok.host ?? "", ok.publicUrl)).toBeNull();
  });
});
