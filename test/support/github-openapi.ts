/**
 * GitHub's own REST description (OpenAPI 3.0) as a checker for the GitHub stand-in: every
 * request the stand-in serves is checked against the operation's parameters and request body,
 * and every answer it gives against the documented responses, with Ajv (`nullable` understood,
 * formats checked). The description is github-openapi.json beside this file: the operations
 * Baton calls, cut from the `@octokit/openapi` package's api.github.com.json by
 * scripts/gen-github-openapi.ts (the package version is in its `x-baton-source`).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Ajv as AjvType, ValidateFunction } from "ajv";

const require = createRequire(import.meta.url);
// CommonJS packages: loaded with require so their default exports need no interop guesswork.
const Ajv = (require("ajv") as { Ajv: typeof AjvType }).Ajv;
const addFormats = require("ajv-formats") as { default: (ajv: AjvType) => AjvType };

interface Parameter {
  name: string;
  in: "path" | "query" | "header";
  required?: boolean;
  schema?: Record<string, unknown>;
  $ref?: string;
}
interface Operation {
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
  responses: Record<
    string,
    { $ref?: string; content?: Record<string, { schema: unknown }> } | undefined
  >;
}
interface Spec {
  openapi: string;
  "x-baton-source": { package: string; version: string; operations: string[] };
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, unknown>;
    parameters: Record<string, Parameter>;
    responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
  };
}

let loaded: { spec: Spec; ajv: AjvType; cache: Map<string, ValidateFunction> } | null = null;

function load() {
  if (loaded) return loaded;
  const file = new URL("./github-openapi.json", import.meta.url);
  const spec = JSON.parse(readFileSync(file, "utf8")) as Spec;
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats.default(ajv);
  ajv.addSchema({ $id: "gh", components: { schemas: spec.components.schemas } });
  loaded = { spec, ajv, cache: new Map() };
  return loaded;
}

/**
 * Reads the description and compiles the checks of `operations` (`[method, template]`) now,
 * so the first request a test sends is not slowed by a compile of many seconds on a busy machine.
 */
export function warmUpGitHubOpenApi(operations: [string, string][]): void {
  for (const [method, template] of operations) {
    const op = operation(method, template);
    const body = op.requestBody?.content["application/json"]?.schema;
    if (body) validator(`${method} ${template} body`, body);
    for (const status of Object.keys(op.responses)) {
      try {
        responseProblems(method, template, Number(status), undefined);
      } catch {
        // a response without a JSON body: nothing to compile
      }
    }
  }
}

/** The OpenAPI version of the description (3.0.x). */
export function gitHubOpenApiVersion(): string {
  return load().spec.openapi;
}

/** Where the description came from: the `@octokit/openapi` version and the operations kept. */
export function gitHubOpenApiSource(): { package: string; version: string; operations: string[] } {
  return load().spec["x-baton-source"];
}

function validator(key: string, schema: unknown): ValidateFunction {
  const l = load();
  const hit = l.cache.get(key);
  if (hit) return hit;
  const fixed = JSON.parse(
    JSON.stringify(schema).replaceAll('"#/components/schemas/', '"gh#/components/schemas/'),
  );
  const v = l.ajv.compile(fixed);
  l.cache.set(key, v);
  return v;
}

function operation(method: string, template: string): Operation {
  const op = load().spec.paths[template]?.[method.toLowerCase()];
  if (!op) {
    throw new Error(
      `GitHub's OpenAPI cut has no ${method} ${template}; add it to OPERATIONS in scripts/gen-github-openapi.ts and run the script`,
    );
  }
  return op;
}

function errorsOf(v: ValidateFunction): string[] {
  return (v.errors ?? []).map((e) => `${e.instancePath || "(root)"} ${e.message ?? "is invalid"}`);
}

/**
 * Problems of a request to `method template` (e.g. `POST /repos/{owner}/{repo}/deployments`):
 * unknown or invalid query parameters, a missing or invalid JSON body, body keys the operation
 * does not document. Empty = it matches GitHub's description.
 */
export function requestProblems(
  method: string,
  template: string,
  query: URLSearchParams,
  body: unknown,
): string[] {
  const op = operation(method, template);
  const l = load();
  const params = (op.parameters ?? []).map((p) =>
    p.$ref ? l.spec.components.parameters[p.$ref.split("/").pop() ?? ""]! : p,
  );
  const out: string[] = [];
  for (const [name, raw] of query) {
    const p = params.find((x) => x.in === "query" && x.name === name);
    if (!p) {
      out.push(`query parameter ${name} is not documented`);
      continue;
    }
    const schema = p.schema ?? {};
    const value = schema.type === "integer" && /^-?\d+$/.test(raw) ? Number(raw) : raw;
    const v = validator(`${method} ${template} ?${name}`, schema);
    if (!v(value)) out.push(...errorsOf(v).map((e) => `query ${name}: ${e}`));
  }
  const content = op.requestBody?.content["application/json"];
  if (content) {
    if (body === undefined) {
      if (op.requestBody?.required) out.push("the request has no JSON body");
    } else {
      const v = validator(`${method} ${template} body`, content.schema);
      if (!v(body)) out.push(...errorsOf(v).map((e) => `body${e}`));
      const props = (content.schema as { properties?: Record<string, unknown> }).properties;
      if (props && body && typeof body === "object" && !Array.isArray(body)) {
        for (const k of Object.keys(body)) {
          if (!(k in props)) out.push(`body.${k} is not a documented field`);
        }
      }
    }
  }
  return out;
}

/** Problems of an answer `status` + `body` to `method template`. Empty = documented. */
export function responseProblems(
  method: string,
  template: string,
  status: number,
  body: unknown,
): string[] {
  const op = operation(method, template);
  let r = op.responses[String(status)];
  if (!r) return [`${status} is not a documented answer of ${method} ${template}`];
  if (r.$ref) r = load().spec.components.responses[r.$ref.split("/").pop() ?? ""];
  const schema = r?.content?.["application/json"]?.schema;
  if (!schema) return body === undefined ? [] : [`${status} documents no body`];
  const v = validator(`${method} ${template} ${status}`, schema);
  return v(body) ? [] : errorsOf(v);
}
