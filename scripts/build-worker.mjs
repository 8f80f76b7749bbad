#!/usr/bin/env node
// Bundles a Cloudflare Workers entry (the engine, engine/src/entries/worker.ts, or with
// --dashboard the dashboard, engine/src/entries/dashboard-worker.ts) into one ES module for
// workerd: `node:*` stays external (compatibility flag `nodejs_compat`), as does
// `cloudflare:sockets` (pg-cloudflare's TCP).
//
// Usage: node scripts/build-worker.mjs [outfile] [--dashboard] [--analyze] [--check]
//   (default outfile dist-worker/worker.mjs, with --dashboard dist-worker/dashboard.mjs). Prints {"outfile","bytes","gzip_bytes","budget_bytes"}.
//   --analyze  also prints where the bytes come from (per package, per engine folder).
//   --check    exits 1 when `bytes` is over the Worker's budget (WORKER_BUNDLE_BUDGET_BYTES,
//              DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES; CI runs both).
// Tests and the benchmark import `buildWorker(outfile)`.
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { builtinModules, createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);

/**
 * The two Workers of a Workers deployment, built from the same source: the engine (the API,
 * the runner protocol, the Cron Trigger's `tick`, `/metrics`; no dashboard module) and the
 * dashboard (its pages, login, actions and live updates; no API). Entry, repository-relative.
 */
export const WORKER_ENTRIES = {
  engine: "engine/src/entries/worker.ts",
  dashboard: "engine/src/entries/dashboard-worker.ts",
};

/**
 * The most the engine Worker's modules may weigh together, bytes as uploaded (before
 * compression). Cloudflare counts every module of an upload towards a Worker's size, and a
 * bigger script parses longer at each isolate start. It sits about 1.1% above the bundle's
 * size (964,719 bytes), so a regression of a few KB fails the build. Raising it is a reviewed
 * change with its reason; it stays under 1,000,000 (docs/deploying.md says what the bytes are).
 */
export const WORKER_BUNDLE_BUDGET_BYTES = 975_000;

/**
 * The same for the dashboard Worker (WORKER_ENTRIES.dashboard, which bundles no API route):
 * about 1.1% above its size (972,304 bytes), under 1,000,000 as well.
 */
export const DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES = 983_000;

/**
 * Code the Workers entry cannot reach, replaced by a module that says so if it ever runs:
 * - GitHub App authentication: the serverless entries authenticate with GITHUB_TOKEN only
 *   (engine/src/entries/serverless.ts), so @octokit/auth-app and its OAuth helpers (~22 KB)
 *   would be dead weight;
 * - pg's native binding (`pg.native`, ~8 KB): it needs the `pg-native` addon, which workerd
 *   cannot load; the stub fails the way a missing addon does (MODULE_NOT_FOUND), so
 *   `pg.native` is null, as pg documents for an absent addon;
 * - Kysely's schema builder (`db.schema`: create/alter/drop table, index, view, type; ~19 KB):
 *   the store migrates with raw SQL (adapters/postgres/migrations.ts) and never builds DDL with
 *   Kysely. The workerd store contract test (test/serverless/store-contract.workerd.test.ts)
 *   runs every store operation in this bundle, so a use of it would fail there, by name.
 * - Kysely's `withSchema` (`WithSchemaPlugin`, and with it the operation-node transformer that
 *   only plugins use; ~24 KB): the store names its schema through the connection's
 *   `search_path` (adapters/postgres/pool.ts) and installs no Kysely plugin;
 * - Kysely's MERGE builder (`db.mergeInto`, ~4 KB): the store writes with insert, update and
 *   delete (adapters/kysely/), never MERGE;
 * - Kysely's CASE, JSON path and window builders (`eb.case`, `eb.ref(column, "->")`,
 *   `.over()`; ~2 KB): no query of the store (adapters/kysely/) uses them;
 * - Kysely's Postgres introspector (`db.introspection`, ~2 KB): the store reads no catalog
 *   through Kysely (its migrations are plain SQL);
 * - zod's JSON Schema generation (`z.toJSONSchema`, `schema.toJSONSchema()`, ~18 KB): only the
 *   `npm run schema` script writes JSON Schema (recipes/json-schema.ts, record/schema.ts); the
 *   Worker validates with zod and never generates a schema document.
 * - the PromQL grammar's highlighting styles (`@lezer/highlight`, ~5 KB): the contract check
 *   (domain/promql-check.ts) reads the parse tree's node names, never the editor's highlight
 *   tags; the stub gives `styleTags` a source that adds no prop to any node type, so the tree
 *   is the same;
 * - Octokit's GraphQL client (`octokit.graphql`, ~2 KB): the GitHub adapters call REST
 *   endpoints only; `octokit.graphql(...)` throws by name;
 * - pg's password file reader (`pgpass`, with `split2`; ~4 KB): it reads `~/.pgpass` from the
 *   file system, which workerd does not have; the stub answers as pgpass does when the file is
 *   absent (no password), so the password comes from the database URL as before;
 * - pg's certificate signature reader for SCRAM channel binding (`SCRAM-SHA-256-PLUS`, ~2 KB):
 *   pg uses it only on a socket with `getPeerCertificate`, which pg-cloudflare's has not (pg
 *   refuses the mechanism before reaching it);
 * - pg-types' binary-format parsers (~2 KB): pg asks for them only for a query or client with
 *   `binary: true`, which the store never sets (rows come back as text, parsed by the text
 *   parsers as before).
 * - the YAML library's stringifier (`yaml/.../stringify/*`, ~13 KB): the Worker reads YAML
 *   (recipes/parse.ts) and never writes it; reading calls the stringifier only to turn a
 *   mapping key that is a list or a mapping into a property name, and the recipe reader
 *   refuses such keys before converting (test/unit/recipe-limits.test.ts);
 * - the YAML library's YAML 1.1 and JSON schemas (`schema/yaml-1.1/*`, `schema/json/*`; ~7 KB,
 *   their tags with them): a document loads one only through a `%YAML 1.1` directive or a
 *   `schema`/`version`/`customTags` option; the recipe reader passes none of those options and
 *   refuses the directive before composing (recipes/parse.ts). Its stubs are values (tag lists,
 *   tags) that throw, naming themselves, when anything reads or calls them;
 * - the YAML library's CST helpers (`CST.createScalarToken`, `CST.resolveAsScalar`,
 *   `CST.setScalarValue`, `CST.stringify`, `CST.visit`; ~5 KB): the recipe reader classifies
 *   the lexer's tokens with `CST.tokenType` and edits or prints no CST; the library's own
 *   lexer, parser and composer import none of them (only its `CST` namespace re-exports them,
 *   and a namespace is bundled whole);
 * - Hono's `app.mount()` helper (~1 KB): no engine route mounts another framework's app.
 * Each stub's `filter` and `importer` name the module exactly; if a dependency moves it, the
 * stub stops matching and the budget check shows the bytes coming back. A stub with `throws`
 * (instead of `contents`) exports every name the real module exports, each a function that
 * throws that message when called or constructed; a module's top level never calls them. A
 * stub with `values` exports every name as a value that throws that message when read,
 * called or constructed (a module's top level may hold them, as the YAML schema's tag lists
 * do, but never reads them).
 */
const UNREACHABLE = [
  {
    filter: /^@octokit\/auth-app$/,
    contents:
      'export function createAppAuth() { throw new Error("[engine] GitHub App authentication is not built into the Workers bundle; set GITHUB_TOKEN (docs/deploying.md)"); }',
    loader: "js",
  },
  {
    filter: /^\.\/native$/,
    importer: /[\\/]node_modules[\\/]pg[\\/]lib[\\/]index\.js$/,
    contents:
      'const e = new Error("Cannot find module \'pg-native\' (no native addons on Workers)"); e.code = "MODULE_NOT_FOUND"; throw e;',
    loader: "js",
  },
  {
    filter: /^\.\/schema\/schema\.js$/,
    importer: /[\\/]node_modules[\\/]kysely[\\/]dist[\\/]esm[\\/](kysely|index)\.js$/,
    contents:
      'export class SchemaModule { constructor() { throw new Error("[store] Kysely\'s schema builder (db.schema) is not built into the Workers bundle: write the DDL as a migration (adapters/postgres/migrations.ts)"); } }',
    loader: "js",
  },
  {
    filter: /^\.\.?\/plugin\/with-schema\/with-schema-plugin\.js$/,
    importer:
      /[\\/]node_modules[\\/]kysely[\\/]dist[\\/]esm[\\/](kysely|index|query-creator|expression[\\/]expression-builder)\.js$/,
    throws:
      "[store] Kysely's withSchema is not built into the Workers bundle: the store names its schema through search_path (adapters/postgres/pool.ts)",
  },
  {
    filter: /^\.\/query-builder\/merge-query-builder\.js$/,
    importer: /[\\/]node_modules[\\/]kysely[\\/]dist[\\/]esm[\\/](query-creator|index)\.js$/,
    throws:
      "[store] Kysely's MERGE builder (db.mergeInto) is not built into the Workers bundle: write with insert, update or delete",
  },
  {
    filter: /^\.\/(dialect\/postgres\/)?postgres-introspector\.js$/,
    importer:
      /[\\/]node_modules[\\/]kysely[\\/]dist[\\/]esm[\\/](dialect[\\/]postgres[\\/]postgres-dialect|index)\.js$/,
    throws:
      "[store] Kysely's introspection (db.introspection) is not built into the Workers bundle: query the catalog with SQL",
  },
  {
    filter: /^\.\.?\/query-builder\/(case|json-path|over)-builder\.js$/,
    importer:
      /[\\/]node_modules[\\/]kysely[\\/]dist[\\/]esm[\\/](kysely|index|expression[\\/]expression-builder|parser[\\/]parse-utils)\.js$/,
    throws:
      "[store] Kysely's CASE, JSON path and window (OVER) builders are not built into the Workers bundle: the store's queries use none of them",
  },
  {
    filter: /^(\.\.\/core\/|\.\/)(to-json-schema|json-schema-processors)\.js$/,
    importer: /[\\/]node_modules[\\/]zod[\\/]v4[\\/](core|classic)[\\/][a-z-]+\.js$/,
    throws:
      "[engine] zod's JSON Schema generation (toJSONSchema) is not built into the Workers bundle: the schema files are written by `npm run schema`",
  },
  {
    filter: /^@lezer\/highlight$/,
    importer: /[\\/]node_modules[\\/]@prometheus-io[\\/]lezer-promql[\\/]/,
    contents:
      "const tag = new Proxy(function () {}, { get: () => tag, apply: () => tag }); export const tags = tag; export function styleTags() { return () => undefined; }",
    loader: "js",
  },
  {
    filter: /^@octokit\/graphql$/,
    importer: /[\\/]node_modules[\\/]@octokit[\\/]core[\\/]/,
    contents:
      'export function withCustomRequest() { const no = () => { throw new Error("[engine] Octokit\'s GraphQL client (octokit.graphql) is not built into the Workers bundle: the GitHub adapters call REST endpoints"); }; no.defaults = () => no; return no; }',
    loader: "js",
  },
  {
    filter: /^pgpass$/,
    importer: /[\\/]node_modules[\\/]pg[\\/]lib[\\/]client\.js$/,
    contents:
      "// No file system on Workers, so no ~/.pgpass: answered as pgpass answers when the file is absent.\nmodule.exports = function pgpass(_connInfo, cb) { cb(undefined); };",
    loader: "js",
  },
  {
    filter: /^\.\/cert-signatures$/,
    importer: /[\\/]node_modules[\\/]pg[\\/]lib[\\/]crypto[\\/]sasl\.js$/,
    contents:
      'module.exports = { signatureAlgorithmHashFromCertificate() { throw new Error("[store] SCRAM channel binding (SCRAM-SHA-256-PLUS) is not built into the Workers bundle: the socket has no peer certificate"); } };',
    loader: "js",
  },
  {
    filter: /^\.\/lib\/binaryParsers$/,
    importer: /[\\/]node_modules[\\/]pg-types[\\/]index\.js$/,
    contents:
      "// The store never asks for binary results: no binary-format parsers are registered.\nmodule.exports = { init() {} };",
    loader: "js",
  },
  {
    filter: /^(\.\/|(\.\.\/)+)stringify\/[A-Za-z]+\.js$/,
    importer: /[\\/]node_modules[\\/]yaml[\\/]browser[\\/]dist[\\/](?!stringify[\\/])/,
    throws:
      "[engine] the YAML library's stringifier is not built into the Workers bundle: the Worker reads YAML and writes none",
  },
  {
    filter: /^\.\/(yaml-1\.1\/(binary|omap|pairs|schema|set|timestamp)|json\/schema)\.js$/,
    importer: /[\\/]node_modules[\\/]yaml[\\/]browser[\\/]dist[\\/]schema[\\/]tags\.js$/,
    values:
      "[engine] the YAML library's YAML 1.1 and JSON schemas are not built into the Workers bundle: a recipe is read as YAML 1.2 (its core schema)",
  },
  {
    filter: /^\.\/cst-(scalar|stringify|visit)\.js$/,
    importer: /[\\/]node_modules[\\/]yaml[\\/]browser[\\/]dist[\\/]parse[\\/]cst\.js$/,
    throws:
      "[engine] the YAML library's CST helpers (CST.visit, CST.stringify and the scalar token editors) are not built into the Workers bundle: the recipe reader reads tokens with CST.tokenType only",
  },
  {
    filter: /^\.\/utils\/mount\.js$/,
    importer: /[\\/]node_modules[\\/]hono[\\/]dist[\\/]hono-base\.js$/,
    throws:
      "[engine] Hono's app.mount() is not built into the Workers bundle: the engine mounts no other framework's app",
  },
];

/**
 * The PromQL grammar's parser (`@prometheus-io/lezer-promql`'s `parser`) is built when first
 * used, not when the Worker loads: the package builds it at import (`LRParser.deserialize`
 * decodes its tables and defines ~250 node types): about 8 of the ~160 ms of workerd CPU a
 * fresh isolate spent loading this bundle, measured under load (`isolate_load_cpu_ms` in
 * `npm run bench:serverless`), while only the contract check of a recipe's analysis templates (domain/promql-check.ts,
 * at a release's start) parses PromQL. The Worker's `parser` keeps the one method the engine
 * calls, `parse(input, fragments?, ranges?)`, which builds the real parser once and delegates;
 * the trees are the same (test/serverless/worker-bundle.test.ts). The build fails if the
 * package stops declaring `const parser = LRParser.deserialize(` once.
 */
const LAZY_PROMQL = {
  filter: /[\\/]node_modules[\\/]@prometheus-io[\\/]lezer-promql[\\/]dist[\\/]index\.es\.js$/,
  eager: "const parser = LRParser.deserialize(",
};

/**
 * zod's schema methods no engine source names are left out (~13 KB). zod's classic API declares
 * every method of a schema type (`z.string().email()`, `.uuid()`, `.ipv4()`, `.base64()`, …) on
 * one object, so each pulls its schema classes, checks and patterns into the bundle whether it
 * is called or not. The build lists the property names engine/src reads or calls anywhere
 * (`.name`, by its text, comments included: the list only ever keeps too much) and the ones
 * zod's own modules read (`x.name`, except on a module namespace such as `core.` or `z.`), and
 * replaces every other method of `zod/v4/classic/schemas.js` by one that throws
 * "[engine] zod's .<name>() is not built into the Workers bundle". A method a new engine source
 * calls is kept by the next build without a change here. Getters, setters and quoted names
 * (`"~standard"`) stay. The build fails if the module stops declaring its methods as objects
 * passed to `$constructor(name, init, methods)` or `util.derived(getters, methods)`.
 * (Kysely's query builders were measured the same way: its own modules call nearly every
 * builder method, so it saves nothing there.)
 */
const ZOD_METHODS = {
  filter: /[\\/]node_modules[\\/]zod[\\/]v4[\\/]classic[\\/]schemas\.js$/,
  /** zod's folders (under `zod/v4`) read for its own uses. */
  scan: ["core", "classic"],
};

/**
 * zod's compiled object parser (`$ZodObjectJIT`, ~3 KB with its code writer) is left out:
 * zod builds it with `new Function`, which workerd forbids, and zod itself never takes that
 * path on Workers (`util.allowsEval` is false when `navigator.userAgent` names Cloudflare), so
 * `z.object()` parses with the plain `$ZodObject` there either way. The build makes classic's
 * `ZodObject` start from `$ZodObject`, and fails if the one line it rewrites is not there once.
 */
const ZOD_NO_JIT = {
  jit: "core.$ZodObjectJIT.init(inst, def);",
  plain: "core.$ZodObject.init(inst, def);",
};

/**
 * zod's helpers (`zod/v4/core/util.js`) are bundled one by one, not as a whole module (~5 KB
 * less): classic's schemas reach them through the namespace `core/index.js` re-exports
 * (`import { util } from "../core/index.js"`, and `core.util.constantCatch`), and a namespace
 * reached that way is bundled as an object holding every export. The build imports the same
 * module directly (`import * as util from "../core/util.js"`) and reads `util.constantCatch`,
 * so only the helpers zod calls are bundled; they are the same functions. The build fails if
 * the import line is not there once.
 */
const ZOD_UTIL = {
  viaIndex: 'import { util } from "../core/index.js";',
  direct: 'import * as util from "../core/util.js";',
  nested: { from: "core.util.", to: "util." },
};

/**
 * The Worker builds its Hono app for each event (entries/serverless.ts: one core per event), so
 * its `Hono` is the `hono/quick` preset's: a SmartRouter over LinearRouter, then TrieRouter,
 * which has nothing to build before its first match. The default preset's RegExpRouter compiles
 * one expression over every route at each app's first match, which a per-event app pays on every
 * request. Routing is the same: Hono's routers share one behaviour, and a path LinearRouter does
 * not support falls back to TrieRouter as in `hono/quick`. Only the bare `hono` import is
 * redirected (`hono/secure-headers` and the other subpaths stay).
 */
const HONO_PER_EVENT = { filter: /^hono$/, to: "hono/quick" };

/** Every `*.ts`/`*.tsx`/`*.js` file under `dir`. */
function sourceFiles(dir, out = []) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) sourceFiles(p, out);
    else if (/\.(tsx?|js)$/.test(e.name)) out.push(p);
  }
  return out;
}

/**
 * The zod method names a build keeps (`zodDir` is the installed `zod/v4`): every name read after
 * a `.` in engine/src, and every name zod's own modules read on something other than a module
 * namespace (an `import * as` name, or `z`, zod's namespace object wherever zod uses one).
 */
export function zodMethodsUsed(zodDir) {
  const used = new Set();
  for (const f of sourceFiles(resolve(root, "engine/src"))) {
    for (const m of readFileSync(f, "utf8").matchAll(/\.\s*([A-Za-z_$][\w$]*)/g)) used.add(m[1]);
  }
  const own = ZOD_METHODS.scan.flatMap((d) => sourceFiles(join(zodDir, d)));
  for (const f of own.filter((f) => f.endsWith(".js"))) {
    const text = readFileSync(f, "utf8");
    const modules = new Set([
      "z",
      ...[...text.matchAll(/import \* as ([\w$]+)/g)].map((m) => m[1]),
    ]);
    for (const m of text.matchAll(/([\w$]*)\s*\??\.\s*([A-Za-z_$][\w$]*)/g)) {
      if (!modules.has(m[1])) used.add(m[2]);
    }
  }
  return used;
}

/**
 * `zod/v4/classic/schemas.js`'s text with each method whose name is not in `used` replaced by
 * one that throws its name. Returns the text and the names replaced.
 * @throws Error when the module declares no method object the way ZOD_METHODS expects.
 */
export function pruneZodMethods(text, path, used) {
  const ts = require("typescript");
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.JS);
  const cuts = [];
  let objects = 0;
  const visit = (node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      const callee = node.expression.name.text;
      const at = callee === "$constructor" ? 2 : callee === "derived" ? 1 : -1;
      const methods = at >= 0 ? node.arguments[at] : undefined;
      if (methods && ts.isObjectLiteralExpression(methods)) {
        objects++;
        for (const p of methods.properties) {
          const method =
            ts.isMethodDeclaration(p) ||
            (ts.isPropertyAssignment(p) && ts.isFunctionExpression(p.initializer));
          if (method && ts.isIdentifier(p.name) && !used.has(p.name.text)) {
            cuts.push({ p, name: p.name.text });
          }
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  if (objects === 0) {
    throw new Error(
      `[build-worker] ${path} no longer passes its methods to \`$constructor(name, init, methods)\`: update ZOD_METHODS (scripts/build-worker.mjs)`,
    );
  }
  let out = text;
  for (const { p, name } of cuts.sort((a, b) => b.p.getStart(file) - a.p.getStart(file))) {
    out = `${out.slice(0, p.getStart(file))}${name}() { return unbuilt(${JSON.stringify(name)}); }${out.slice(p.end)}`;
  }
  const no =
    'function unbuilt(name) { throw new Error("[engine] zod\'s ." + name + "() is not built into the Workers bundle: no engine source calls it (scripts/build-worker.mjs)"); }';
  return { text: `${out}\n${no}\n`, cut: [...new Set(cuts.map((c) => c.name))] };
}

/**
 * The methods of Kysely's query compiler (`DefaultQueryCompiler`) for the operation nodes only
 * the builders left out above make (UNREACHABLE: the schema builder, MERGE, CASE, JSON path and
 * OVER), ~7 KB: with those builders gone no query of the Worker holds such a node, yet the
 * compiler's one class keeps a method for every kind. Each listed method's body is replaced by
 * one that throws, naming the node kind and why; the rest of the compiler is unchanged. The
 * build fails if a listed method is missing (Kysely renamed or moved it).
 */
const KYSELY_COMPILER = {
  filter:
    /[\\/]node_modules[\\/]kysely[\\/]dist[\\/]esm[\\/]query-compiler[\\/]default-query-compiler\.js$/,
  /** The methods, by the builder whose nodes they compile (the message names it). */
  methods: {
    "the schema builder (db.schema)": [
      "visitCreateTable",
      "visitColumnDefinition",
      "getAutoIncrement",
      "visitReferences",
      "visitDropTable",
      "visitCreateIndex",
      "visitDropIndex",
      "visitCreateSchema",
      "visitDropSchema",
      "visitPrimaryKeyConstraint",
      "buildDeferrable",
      "visitUniqueConstraint",
      "visitCheckConstraint",
      "visitForeignKeyConstraint",
      "visitAlterTable",
      "compileColumnAlterations",
      "visitAddColumn",
      "visitRenameColumn",
      "visitDropColumn",
      "visitAlterColumn",
      "announcesNewColumnDataType",
      "visitModifyColumn",
      "visitAddConstraint",
      "visitDropConstraint",
      "visitRenameConstraint",
      "visitCreateView",
      "visitRefreshMaterializedView",
      "visitDropView",
      "visitGenerated",
      "visitDefaultValue",
      "visitCreateType",
      "visitDropType",
      "visitAddIndex",
    ],
    "the MERGE builder (db.mergeInto)": ["visitMergeQuery", "visitMatched"],
    "the CASE builder (eb.case)": ["visitCase", "visitWhen"],
    'the JSON path builder (eb.ref(column, "->"))': [
      "visitJSONReference",
      "visitJSONPath",
      "visitJSONPathLeg",
      "visitJSONOperatorChain",
      "sanitizeJSONPathMemberValue",
    ],
    "the window builder (.over())": ["visitOver", "visitPartitionBy", "visitPartitionByItem"],
  },
};

/**
 * Kysely's `default-query-compiler.js` text with each KYSELY_COMPILER method's body replaced by
 * a throw naming it. Throws when a listed method is not declared in the text.
 */
export function pruneKyselyCompiler(text, path) {
  const ts = require("typescript");
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.JS);
  const builderOf = new Map();
  for (const [builder, names] of Object.entries(KYSELY_COMPILER.methods)) {
    for (const n of names) builderOf.set(n, builder);
  }
  const bodies = [];
  const visit = (node) => {
    if (ts.isMethodDeclaration(node) && ts.isIdentifier(node.name) && node.body) {
      const builder = builderOf.get(node.name.text);
      if (builder) bodies.push({ body: node.body, name: node.name.text, builder });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  const missing = [...builderOf.keys()].filter((n) => !bodies.some((b) => b.name === n));
  if (missing.length > 0) {
    throw new Error(
      `[build-worker] ${path} no longer declares ${missing.join(", ")}: update KYSELY_COMPILER (scripts/build-worker.mjs)`,
    );
  }
  const builders = Object.keys(KYSELY_COMPILER.methods);
  let out = text;
  for (const b of bodies.sort((x, y) => y.body.getStart(file) - x.body.getStart(file))) {
    const call = `{ unbuiltNode(${builders.indexOf(b.builder)}, ${JSON.stringify(b.name)}); }`;
    out = `${out.slice(0, b.body.getStart(file))}${call}${out.slice(b.body.end)}`;
  }
  const no = `function unbuiltNode(builder, method) { throw new Error("[store] Kysely's compiler for the nodes of " + ${JSON.stringify(builders)}[builder] + " (" + method + ") is not built into the Workers bundle: the store's queries use none of them"); }`;
  return `${out}\n${no}\n`;
}

/**
 * `text` (the module at `path`) with its one occurrence of `from` replaced by `to`.
 * @throws Error naming `path` and the constant to update (`rule`) when `from` is not there once.
 */
function replaceOnce(text, from, to, path, rule) {
  if (text.split(from).length !== 2) {
    throw new Error(
      `[build-worker] ${path} no longer declares \`${from}\` once: update ${rule} (scripts/build-worker.mjs)`,
    );
  }
  return text.replace(from, () => to);
}

/** `@prometheus-io/lezer-promql`'s module text with its `parser` built at the first parse. */
function lazyPromqlParser(text, path) {
  return `${replaceOnce(text, LAZY_PROMQL.eager, "const buildParser = () => LRParser.deserialize(", path, "LAZY_PROMQL")}
let built;
const parser = {
  parse(input, fragments, ranges) {
    built ??= buildParser();
    return built.parse(input, fragments, ranges);
  },
};
`;
}

/**
 * An esbuild plugin that loads the files matching `filter` through `rewrite(text, path)`, which
 * returns the JavaScript to bundle instead (or throws when the file no longer looks as expected).
 */
function rewriteOnLoad(name, filter, rewrite) {
  return {
    name,
    setup(b) {
      b.onLoad({ filter }, (args) => ({
        contents: rewrite(readFileSync(args.path, "utf8"), args.path),
        loader: "js",
        resolveDir: dirname(args.path),
      }));
    },
  };
}

/**
 * Bundles the entry to `outfile`. Resolves to `{ bytes, gzipBytes, metafile }`: `bytes` sums
 * every module written (what an upload counts), `gzipBytes` their gzip size (level 9).
 * Throws on a build error. `o.entry` (repository-relative) and `o.alias` (esbuild aliases) let
 * tests bundle another worker the same way (test/workerd/contract-worker.ts). For profiling,
 * `o.minify: false` keeps names and lines, `o.sourcemap: true` writes `<outfile>.map` (not
 * counted in `bytes`).
 */
export async function buildWorker(outfile, o = {}) {
  mkdirSync(dirname(outfile), { recursive: true });
  /** The zod method names the engine and zod use, read once per build. */
  let used;
  const r = await build({
    entryPoints: [resolve(root, o.entry ?? WORKER_ENTRIES.engine)],
    ...(o.alias ? { alias: o.alias } : {}),
    absWorkingDir: root,
    bundle: true,
    outfile,
    platform: "neutral",
    format: "esm",
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "browser"],
    jsx: "automatic",
    jsxImportSource: "hono/jsx",
    external: ["node:*", "cloudflare:sockets"],
    minify: o.minify ?? true,
    // Non-ASCII text (→, ≥, …) as is: workerd reads modules as UTF-8; escapes cost 6 bytes each.
    charset: "utf8",
    logLevel: "warning",
    metafile: true,
    ...(o.sourcemap ? { sourcemap: "external" } : {}),
    plugins: [
      rewriteOnLoad("lazy-promql-parser", LAZY_PROMQL.filter, lazyPromqlParser),
      {
        name: "hono-per-event-router",
        setup(b) {
          b.onResolve({ filter: HONO_PER_EVENT.filter }, (args) =>
            args.pluginData === HONO_PER_EVENT
              ? undefined
              : b.resolve(HONO_PER_EVENT.to, {
                  kind: args.kind,
                  resolveDir: args.resolveDir,
                  pluginData: HONO_PER_EVENT,
                }),
          );
        },
      },
      rewriteOnLoad("kysely-compiler-kept-nodes", KYSELY_COMPILER.filter, pruneKyselyCompiler),
      rewriteOnLoad("zod-methods-called", ZOD_METHODS.filter, (text, path) => {
        used ??= zodMethodsUsed(resolve(dirname(path), ".."));
        const plain = replaceOnce(text, ZOD_NO_JIT.jit, ZOD_NO_JIT.plain, path, "ZOD_NO_JIT");
        const direct = replaceOnce(plain, ZOD_UTIL.viaIndex, ZOD_UTIL.direct, path, "ZOD_UTIL");
        const helpers = direct.replaceAll(ZOD_UTIL.nested.from, ZOD_UTIL.nested.to);
        return pruneZodMethods(helpers, path, used).text;
      }),
      {
        name: "unreachable-on-workers",
        setup(b) {
          for (const u of UNREACHABLE) {
            b.onResolve({ filter: u.filter }, (args) =>
              u.importer && !u.importer.test(args.importer)
                ? undefined
                : {
                    path: u.contents ? args.path : resolve(args.resolveDir, args.path),
                    namespace: "unreachable",
                    pluginData: u,
                  },
            );
          }
          b.onLoad({ filter: /.*/, namespace: "unreachable" }, async (args) => {
            const u = args.pluginData;
            if (u.contents) return { contents: u.contents, loader: u.loader };
            const names = Object.keys(await import(pathToFileURL(args.path).href));
            if (u.values) {
              // Values (tag lists, tag objects) that throw when anything reads or calls them.
              const no = `function no() { throw new Error(${JSON.stringify(u.values)}); }`;
              const value =
                "new Proxy(function () {}, { get: no, apply: no, construct: no, has: no })";
              const exports = names.map((n) => `export const ${n} = ${value};`);
              return { contents: [no, ...exports].join("\n"), loader: "js" };
            }
            const no = `function no() { throw new Error(${JSON.stringify(u.throws)}); }`;
            const exports = names.map((n) => `export function ${n}() { no(); }`);
            return { contents: [no, ...exports].join("\n"), loader: "js" };
          });
        },
      },
      {
        // pg and its helpers import Node built-ins by bare name (`events`, `util`): workerd
        // provides them as `node:*` under nodejs_compat.
        name: "node-builtins",
        setup(b) {
          const builtins = new Set(builtinModules);
          // A `require` of an external cannot run in an ES module: route each built-in through a
          // small ES shim (bundled), whose own `import` of `node:*` stays external.
          b.onResolve({ filter: /^(node:)?[a-z_]+(\/[a-z_]+)?$/ }, (args) => {
            const name = args.path.replace(/^node:/, "");
            if (args.namespace === "node-shim" || !builtins.has(name)) return undefined;
            return { path: name, namespace: "node-shim" };
          });
          b.onResolve({ filter: /.*/, namespace: "node-shim" }, (args) => ({
            path: args.path,
            external: true,
          }));
          // pg-connection-string reads TLS files with `fs` only for sslcert/sslkey/sslrootcert
          // parameters; workerd has no file system, so `fs` is a stub that says so.
          b.onLoad({ filter: /^fs$/, namespace: "node-shim" }, () => ({
            contents:
              'const no = () => { throw new Error("[engine] no file system on Workers: pass TLS material inline, not as files"); }; export const readFileSync = no; export default { readFileSync: no };',
            loader: "js",
          }));
          b.onLoad({ filter: /.*/, namespace: "node-shim" }, (args) => ({
            contents: `import * as m from "node:${args.path}"; export * from "node:${args.path}"; export default (m.default ?? m);`,
            loader: "js",
          }));
        },
      },
    ],
  });
  const files = Object.keys(r.metafile.outputs).filter((f) => !f.endsWith(".map"));
  const bytes = files.reduce((n, f) => n + r.metafile.outputs[f].bytes, 0);
  const gzipBytes = files.reduce(
    (n, f) => n + gzipSync(readFileSync(resolve(root, f)), { level: 9 }).length,
    0,
  );
  return { bytes, gzipBytes, metafile: r.metafile };
}

/**
 * Where a bundle's bytes come from: output bytes per npm package (`zod`, `@octokit/core`) and
 * per engine folder (`engine/src/http/dashboard`), largest first. `depth` is how many path
 * segments name an engine folder (default 4).
 * @returns {{ name: string, bytes: number }[]}
 */
export function breakdown(metafile, depth = 4) {
  const by = new Map();
  for (const out of Object.values(metafile.outputs)) {
    for (const [path, input] of Object.entries(out.inputs)) {
      const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
      const name = pkg ? pkg[1] : path.split("/").slice(0, depth).join("/");
      by.set(name, (by.get(name) ?? 0) + input.bytesInOutput);
    }
  }
  return [...by].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const dashboard = args.includes("--dashboard");
  const budget = dashboard ? DASHBOARD_WORKER_BUNDLE_BUDGET_BYTES : WORKER_BUNDLE_BUDGET_BYTES;
  const named = args.find((a) => !a.startsWith("--"));
  const outfile = named
    ? resolve(named)
    : resolve(root, dashboard ? "dist-worker/dashboard.mjs" : "dist-worker/worker.mjs");
  const built = await buildWorker(outfile, {
    entry: dashboard ? WORKER_ENTRIES.dashboard : WORKER_ENTRIES.engine,
  });
  console.log(
    JSON.stringify({
      outfile,
      bytes: built.bytes,
      gzip_bytes: built.gzipBytes,
      budget_bytes: budget,
    }),
  );
  if (args.includes("--analyze")) {
    for (const { name, bytes } of breakdown(built.metafile).slice(0, 40)) {
      console.log(`${String(bytes).padStart(9)}  ${name}`);
    }
  }
  if (args.includes("--check") && built.bytes > budget) {
    console.error(
      `[build-worker] the ${dashboard ? "dashboard" : "engine"} Worker's bundle is ${built.bytes} bytes, over its budget of ${budget}; see what grew with --analyze (scripts/build-worker.mjs)`,
    );
    process.exit(1);
  }
}
