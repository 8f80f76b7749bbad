/** BATON_OPERATORS: a token per person, `name=token,…`. */
import { describe, expect, it } from "vitest";
import { loadConfig, parseOperators } from "../../engine/src/config.ts";

const base = {
  BATON_CALLBACK_SECRETS: "s".repeat(32),
  BATON_OPERATOR_TOKEN: "o".repeat(32),
};
const M = "m".repeat(20);
const L = "l".repeat(20);

describe("BATON_OPERATORS", () => {
  it("reads name=token pairs; unset is none", () => {
    expect(loadConfig(base).operators).toEqual([]);
    expect(loadConfig({ ...base, BATON_OPERATORS: ` maria=${M} , lee=${L}` }).operators).toEqual([
      { name: "maria", token: M },
      { name: "lee", token: L },
    ]);
  });

  it("refuses each bad list with what is wrong, and the engine's config names the fix", () => {
    expect(parseOperators(`maria${M}`)).toMatch(/is not name=token/);
    expect(parseOperators(`ma ria=${M}`)).toMatch(/the name "ma ria" must be 1 to 64 letters/);
    expect(parseOperators("maria=short")).toMatch(/maria's token must be at least 16 characters/);
    expect(parseOperators(`maria=${M},maria=${L}`)).toMatch(/maria is named twice/);
    expect(parseOperators(`maria=${M},lee=${M}`)).toMatch(/lee's token is another person's too/);
    expect(() => loadConfig({ ...base, BATON_OPERATORS: "maria=short" })).toThrow(
      /BATON_OPERATORS.*at least 16 characters[\s\S]*fix: set name=token pairs/,
    );
  });
});

describe("operator tokens and callback secrets", () => {
  it("refuses to start when BATON_OPERATOR_TOKEN is one of BATON_CALLBACK_SECRETS, naming both and the fix", () => {
    const shared = "x".repeat(32);
    expect(() =>
      loadConfig({
        BATON_CALLBACK_SECRETS: `${"s".repeat(32)}, ${shared}`,
        BATON_OPERATOR_TOKEN: shared,
      }),
    ).toThrow(
      /BATON_OPERATOR_TOKEN equals one of BATON_CALLBACK_SECRETS[^\n]*; fix: give each operator token a value of its own/,
    );
  });

  it("refuses a BATON_OPERATORS token that is a callback secret, naming the person, not the token", () => {
    let message = "";
    try {
      loadConfig({ ...base, BATON_OPERATORS: `maria=${M},lee=${base.BATON_CALLBACK_SECRETS}` });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain("BATON_OPERATORS: lee's token equals one of BATON_CALLBACK_SECRETS");
    expect(message).not.toContain("maria's token equals");
    expect(message).not.toContain(base.BATON_CALLBACK_SECRETS);
  });
});
