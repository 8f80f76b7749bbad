/**
 * ln |Γ(x)| against reference values, and against the identities Γ satisfies. The table was
 * computed with stdlib's `@stdlib/math-base-special-gammaln` 0.3.1 (a port of FreeBSD's
 * `lgamma`), the function this one replaced, printed to 17 significant digits.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { gammaln } from "../../../engine/src/domain/gate/gammaln.ts";

// [x, ln |Γ(x)|]
const REFERENCE: [number, number][] = [
  [1e-300, 690.77552789821368],
  [1e-10, 23.025850929882736],
  [2.5e-8, 17.50438999764782],
  [0.001, 6.9071788853838534],
  [0.1, 2.2527126517342055],
  [0.25, 1.2880225246980774],
  [0.5, 0.57236494292470008],
  [0.75, 0.20328095143129535],
  [0.999, 0.00057803853289138023],
  [1.0001, -0.000057713342220471268],
  [1.2, -0.085374090003313863],
  [1.4616321449683622, -0.12148629053584961],
  [1.5, -0.12078223763524522],
  [1.9, -0.038984275923083359],
  [2.1, 0.045437738544485178],
  [2.5, 0.28468287047291918],
  [3, Math.LN2],
  [3.5, 1.2009736023470743],
  [5, 3.1780538303479458],
  [7.25, 7.0521854507385395],
  [10, 12.801827480081471],
  [12.5, 18.734347511936448],
  [20, 39.339884187199495],
  [33.3, 82.603723581654933],
  [50, 144.56574394634487],
  [80, 269.29109765101975],
  [99.5, 356.83538282361303],
  [100, 359.13420536957545],
  [171.5, 709.14316303092824],
  [1000.25, 5906.9472682711175],
  [10010, 82191.825398737812],
  [123456.789, 1323902.0187950633],
  [1e6, 12815504.569147611],
  [2.5e7, 400859651.97255725],
  [1e10, 220258509288.81058],
  [1e15, 33538776394910668],
  [1e20, 4.5051701859880917e21],
  [1e100, 2.2925850929940461e102],
  [-0.5, 1.2655121234846454],
  [-1.5, 0.86004701537648087],
  [-2.5, -0.056243716497674123],
  [-3.0001, 7.4184553060094123],
  [-10.3, -14.457515440024205],
  [-100.7, -365.61225576180533],
];

/** 1e-12 relative, or 1e-14 absolute where ln Γ is near its zeros at 1 and 2. */
const close = (got: number, want: number) =>
  expect(Math.abs(got - want)).toBeLessThanOrEqual(Math.max(1e-12 * Math.abs(want), 1e-14));

describe("gammaln", () => {
  it.each(REFERENCE)("ln Γ(%d) matches the reference to 1e-12", (x, want) => {
    close(gammaln(x), want);
  });

  it("is ln((n − 1)!) at the integers", () => {
    let logFactorial = 0; // ln((n − 1)!)
    for (let n = 1; n <= 170; n++) {
      close(gammaln(n), logFactorial);
      logFactorial += Math.log(n);
    }
  });

  it("satisfies ln Γ(x + 1) = ln Γ(x) + ln x (property)", () => {
    fc.assert(
      fc.property(fc.double({ min: 1e-3, max: 1e6, noNaN: true }), (x) => {
        const want = gammaln(x) + Math.log(x);
        expect(Math.abs(gammaln(x + 1) - want)).toBeLessThanOrEqual(
          1e-13 * (Math.abs(gammaln(x)) + Math.abs(Math.log(x))) + 1e-14,
        );
      }),
      { numRuns: 500, seed: 20261207 },
    );
  });

  it("has the edge values of stdlib's gammaln", () => {
    expect(gammaln(0)).toBe(Number.POSITIVE_INFINITY);
    expect(gammaln(-0)).toBe(Number.POSITIVE_INFINITY);
    expect(gammaln(-1)).toBe(Number.POSITIVE_INFINITY);
    expect(gammaln(-42)).toBe(Number.POSITIVE_INFINITY);
    expect(gammaln(3e305)).toBe(Number.POSITIVE_INFINITY);
    expect(gammaln(Number.POSITIVE_INFINITY)).toBe(Number.POSITIVE_INFINITY);
    expect(gammaln(Number.NEGATIVE_INFINITY)).toBe(Number.NEGATIVE_INFINITY);
    expect(gammaln(Number.NaN)).toBeNaN();
    expect(gammaln(1)).toBe(0);
    expect(gammaln(2)).toBe(0);
    close(gammaln(5e-324), 744.44007192138122);
  });
});
