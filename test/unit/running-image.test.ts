/**
 * The target's report of the running image, compared with the image a runner step was to leave
 * (engine/src/domain/result-evidence.ts): pure, so it runs on any Node.
 */
import { describe, expect, it } from "vitest";
import {
  digestOf,
  imageMismatch,
  reportedImages,
} from "../../engine/src/domain/result-evidence.ts";
import { IMAGE, NEW_DIGEST, OLD_DIGEST, PREVIOUS_IMAGE } from "./recipe-fixture.ts";

describe("running image report", () => {
  it("reads every check's image in order, skipping records without one", () => {
    expect(
      reportedImages([
        { name: "connect", status: "ok" },
        { name: "start", status: "ok", image: PREVIOUS_IMAGE },
        { name: "health", status: "ok", image: IMAGE },
        null,
        { name: "x", image: 5 },
      ]),
    ).toEqual([PREVIOUS_IMAGE, IMAGE]);
    expect(reportedImages("not json")).toEqual([]);
    expect(reportedImages({ image: IMAGE })).toEqual([]);
  });

  it("takes the digest of a pinned reference only", () => {
    expect(digestOf(IMAGE)).toBe(`sha256:${NEW_DIGEST}`);
    expect(digestOf("ghcr.io/acme/summarizer:v7")).toBeNull();
  });

  it("agrees when the last report names the expected digest (the name may differ)", () => {
    expect(imageMismatch("lane-a", IMAGE, [])).toBeNull();
    expect(imageMismatch("lane-a", IMAGE, [PREVIOUS_IMAGE, IMAGE])).toBeNull();
    expect(
      imageMismatch("lane-a", IMAGE, [`registry.local/summarizer@sha256:${NEW_DIGEST}`]),
    ).toBeNull();
  });

  it("names the lane, the reported and the expected digest on a mismatch", () => {
    expect(imageMismatch("lane-a", IMAGE, [IMAGE, PREVIOUS_IMAGE])).toBe(
      `the target reports lane lane-a running sha256:${OLD_DIGEST}, expected sha256:${NEW_DIGEST}: the deploy did not leave the manifest's image running`,
    );
    expect(imageMismatch("lane-b", IMAGE, ["ghcr.io/acme/summarizer:v7"])).toContain(
      "running ghcr.io/acme/summarizer:v7 (not pinned by digest)",
    );
  });
});
