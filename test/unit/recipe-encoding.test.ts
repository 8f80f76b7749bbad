/**
 * Recipe text that is not UTF-8 with LF/CRLF line endings is named with the fix before YAML
 * reads it (engine/src/recipes/parse.ts): the CLI's `baton check` and the API's YAML body
 * both go through `readBoundedYaml`.
 */
import { describe, expect, it } from "vitest";
import { BatonError } from "../../engine/src/domain/errors.ts";
import { parseRecipeText, readBoundedYaml } from "../../engine/src/recipes/parse.ts";

const YAML = "version: 1\nmodel: m\nlanes: []\n";

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(BatonError);
    const b = e as BatonError;
    expect(b.status).toBe(400);
    return `${b.message} | fix: ${b.problems[0]?.fix}`;
  }
  throw new Error("not refused");
}

/** Bytes decoded as UTF-8, as the CLI and the engine read them. */
const asUtf8 = (b: Buffer) => new TextDecoder().decode(b);

describe("recipe encoding and line endings", () => {
  it("UTF-16LE and UTF-16BE with a BOM: save it as UTF-8", () => {
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(YAML, "utf16le")]);
    const be = Buffer.from(le);
    be.swap16();
    for (const b of [le, be]) {
      const got = refusal(() => parseRecipeText(asUtf8(b), "r.yaml"));
      expect(got).toMatch(
        /^\[recipe\] r\.yaml:1:1: the recipe is not UTF-8: it begins with a UTF-16 or UTF-32 byte-order mark/,
      );
      expect(got).toMatch(/fix: Save the recipe as UTF-8/);
    }
  });

  it("UTF-16 without a BOM (NUL bytes): save it as UTF-8, over the API too", () => {
    const got = refusal(() =>
      readBoundedYaml(asUtf8(Buffer.from(YAML, "utf16le")), "request body", {
        syntax: () => new BatonError("bad_request", "syntax"),
        duplicate: () => new BatonError("bad_request", "duplicate"),
      }),
    );
    expect(got).toMatch(/request body:1:2: the recipe is not UTF-8: it holds NUL bytes/);
    expect(got).toMatch(/fix: Save the recipe as UTF-8/);
  });

  it("CR-only line endings: use LF or CRLF", () => {
    const got = refusal(() => parseRecipeText(YAML.replaceAll("\n", "\r"), "r.yaml"));
    expect(got).toMatch(/r\.yaml:1:11: a line ends with CR alone/);
    expect(got).toMatch(/fix: Use LF or CRLF line endings/);
  });

  it("LF, CRLF and a UTF-8 BOM still parse", () => {
    expect(parseRecipeText(YAML, "r.yaml").value).toMatchObject({ model: "m" });
    expect(parseRecipeText(YAML.replaceAll("\n", "\r\n"), "r.yaml").value).toMatchObject({
      model: "m",
    });
    expect(parseRecipeText(`\uFEFF${YAML}`, "r.yaml").value).toMatchObject({ model: "m" });
  });
});
