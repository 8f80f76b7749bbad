/**
 * test/support/github-openapi.json, the cut of GitHub's OpenAPI description the GitHub
 * stand-in is checked against: it names the package version it came from, holds every
 * operation scripts/gen-github-openapi.ts lists, resolves all of its references, and checks.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { OPERATIONS } from "../../scripts/gen-github-openapi.ts";
import {
  gitHubOpenApiSource,
  requestProblems,
  responseProblems,
} from "../support/github-openapi.ts";

const raw = JSON.parse(
  readFileSync(new URL("../support/github-openapi.json", import.meta.url), "utf8"),
) as {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
  components: Record<string, Record<string, unknown>>;
};

const refs = (v: unknown, out: string[] = []): string[] => {
  if (Array.isArray(v)) for (const x of v) refs(x, out);
  else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) {
      if (k === "$ref" && typeof x === "string") out.push(x);
      else refs(x, out);
    }
  }
  return out;
};

describe("GitHub OpenAPI fixture", () => {
  it("names @octokit/openapi and the version it was cut from, and the operations kept", () => {
    const source = gitHubOpenApiSource();
    expect(source.package).toBe("@octokit/openapi");
    expect(source.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(source.operations).toEqual(OPERATIONS.map(([m, t]) => `${m.toUpperCase()} ${t}`));
    expect(raw.openapi).toMatch(/^3\.0\./);
  });

  it("holds every operation Baton calls, and every reference resolves inside it", () => {
    for (const [method, template] of OPERATIONS) {
      expect(raw.paths[template]?.[method], `${method} ${template}`).toBeDefined();
    }
    for (const ref of refs(raw)) {
      const [, , kind, name] = ref.split("/");
      expect(raw.components[kind as string]?.[name as string], ref).toBeDefined();
    }
  });

  it("checks requests and answers of an operation outside the deployments routes", () => {
    const dispatch = "/repos/{owner}/{repo}/dispatches";
    const q = new URLSearchParams();
    expect(
      requestProblems("post", dispatch, q, { event_type: "release-step", client_payload: {} }),
    ).toEqual([]);
    expect(requestProblems("post", dispatch, q, { event_type: "x", extra: 1 })).toEqual([
      "body.extra is not a documented field",
    ]);
    expect(responseProblems("post", dispatch, 204, undefined)).toEqual([]);
    expect(responseProblems("post", dispatch, 200, {})).toEqual([
      "200 is not a documented answer of post /repos/{owner}/{repo}/dispatches",
    ]);
  });
});
