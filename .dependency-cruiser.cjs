/**
 * The layering rule of the engine (docs/architecture.md "Layers"), checked by
 * `npm run check:layers` with dependency-cruiser.
 *
 * Each layer below lists the modules in it (a path pattern from the repository root) and the
 * layers it may import. A module may always import modules of its own layer and npm packages;
 * any other import of a module under engine/src is a violation, and so is an import circle.
 * Type-only imports and dynamic `import()` count like any other import.
 *
 * From the bottom up: protocol ← domain ← ports ← service ← views ← http, cli ← entries.
 */

/**
 * A layer: `path` matches exactly its modules (the patterns are disjoint: a narrower layer is
 * carved out of a wider one with a negative lookahead), `may` names the layers it may import.
 * @typedef {{ name: string, path: string, may: string[], why: string }} Layer
 */

/** @type {Layer[]} */
const LAYERS = [
  {
    name: "protocol",
    path: "^engine/src/protocol/",
    may: [],
    why: "protocol/ is the wire: it imports nothing of the engine",
  },
  {
    name: "support",
    path: "^engine/src/(faults\\.ts$|url-settings\\.ts$|secret-settings\\.ts$|node/(spawn-off-thread|private-file)\\.ts$|types/)",
    may: [],
    why: "the fault points, the URL settings rule, the secret settings rule, the off-thread spawner, the private file modes and ambient module types import nothing of the engine",
  },
  {
    name: "domain",
    path: "^engine/src/domain/",
    may: ["protocol"],
    why: "domain/ is pure: it imports only protocol/",
  },
  {
    name: "recipes",
    path: "^engine/src/recipes/",
    may: ["domain", "protocol"],
    why: "recipes/ (recipe text to manifest) imports only domain/ and protocol/",
  },
  {
    name: "ports",
    path: "^engine/src/ports/",
    may: ["domain", "protocol"],
    why: "ports/ are interfaces over domain/ and protocol/ shapes",
  },
  {
    name: "control-plane",
    path: "^engine/src/control-plane/",
    may: ["domain", "protocol", "support"],
    why: "the reference control plane is a separate server: it imports only protocol/, domain/ and support (its SQLite files' modes)",
  },
  {
    name: "adapters",
    path: "^(?!engine/src/adapters/(memory/|embedded-metrics/|github/http\\.ts$))engine/src/adapters/",
    may: ["ports", "domain", "protocol", "support", "github-client"],
    why: "adapters implement ports: they import only ports/, domain/ and protocol/ (and the other adapters)",
  },
  {
    name: "reference-adapters",
    path: "^engine/src/adapters/(memory|embedded-metrics)/",
    may: ["adapters", "ports", "domain", "protocol", "support", "control-plane"],
    why: "the memory control plane and the embedded metrics source are built on the reference control plane's core, and otherwise import only ports/, domain/ and protocol/",
  },
  {
    name: "admission",
    path: "^engine/src/admission/",
    may: ["ports", "domain", "protocol"],
    why: "admission/ imports only ports/, domain/ and protocol/",
  },
  {
    name: "record",
    path: "^engine/src/record/",
    may: ["admission", "ports", "domain", "protocol"],
    why: "record/ imports only admission/, ports/, domain/ and protocol/",
  },
  {
    name: "service",
    path: "^engine/src/service/",
    may: ["record", "admission", "recipes", "ports", "domain", "protocol", "support"],
    why: "service/ never imports views/, http/, cli/, adapters or entries",
  },
  {
    name: "views",
    path: "^engine/src/views/",
    may: ["service", "record", "admission", "recipes", "ports", "domain", "protocol"],
    why: "views/ (read models shared by the dashboard and the CLI) never import http/, cli/ or entries",
  },
  {
    name: "http",
    path: "^engine/src/http/",
    may: ["views", "service", "record", "admission", "recipes", "ports", "domain", "protocol"],
    why: "http/ never imports cli/, adapters or entries",
  },
  {
    name: "cli",
    path: "^(?!engine/src/cli/(main|program|serve)\\.ts$)engine/src/cli/",
    may: [
      "views",
      "service",
      "record",
      "admission",
      "recipes",
      "ports",
      "domain",
      "protocol",
      "github-client",
    ],
    why: "the CLI's commands talk to an engine over HTTP: they never import http/ or entries",
  },
  {
    name: "github-client",
    path: "^engine/src/adapters/github/http\\.ts$",
    may: ["ports", "domain", "protocol"],
    why: "the GitHub HTTP helper is shared by the GitHub adapters and the CLI",
  },
  {
    name: "embedded-target",
    path: "^engine/src/embedded-target/",
    may: ["support"],
    why: "the embedded SSH target imports nothing of the engine but the off-thread spawner",
  },
  {
    name: "core",
    path: "^engine/src/core\\.ts$",
    may: [
      "http",
      "views",
      "service",
      "record",
      "admission",
      "recipes",
      "ports",
      "domain",
      "protocol",
    ],
    why: "the portable core wires http/ and service/ over the ports; it imports no adapter and no entry",
  },
  {
    name: "entries",
    path: "^(?!engine/src/node/(spawn-off-thread|private-file)\\.ts$)engine/src/(entries/|node/|main-node\\.ts$|engine\\.ts$|config\\.ts$|embedded-lanes\\.ts$|cli/(main|program|serve)\\.ts$)",
    may: [
      "core",
      "cli",
      "http",
      "views",
      "service",
      "record",
      "admission",
      "recipes",
      "ports",
      "adapters",
      "reference-adapters",
      "github-client",
      "control-plane",
      "embedded-target",
      "domain",
      "protocol",
      "support",
    ],
    why: "entries wire everything; only the demo imports them",
  },
  {
    name: "demo",
    path: "^engine/src/demo/",
    may: [
      "entries",
      "core",
      "cli",
      "http",
      "views",
      "service",
      "record",
      "admission",
      "recipes",
      "ports",
      "adapters",
      "reference-adapters",
      "github-client",
      "control-plane",
      "embedded-target",
      "domain",
      "protocol",
      "support",
    ],
    why: "the demo is a program on top of everything",
  },
  {
    name: "runner-side",
    path: "^(actions/[^/]+/src|scripts/release)/",
    may: ["protocol"],
    why: "the action and the tools it runs share only protocol/ with the engine",
  },
];

const byName = new Map(LAYERS.map((l) => [l.name, l]));

/** One rule per layer: from its modules, to any engine module outside it and the layers it may import. */
const layerRules = LAYERS.map((l) => ({
  name: `layer-${l.name}`,
  severity: "error",
  comment: `${l.why} (may import: ${l.may.length ? l.may.join(", ") : "nothing of the engine"})`,
  from: { path: l.path },
  to: {
    path: "^(engine/src|actions/[^/]+/src|scripts/release)/",
    pathNot: [l, ...l.may.map((n) => byName.get(n))].map((x) => x.path),
  },
}));

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "No import circles.",
      from: { path: "^(engine/src|actions/[^/]+/src|scripts/release)/" },
      to: { circular: true },
    },
    {
      name: "not-in-a-layer",
      severity: "error",
      comment: "Every module under engine/src belongs to a layer of .dependency-cruiser.cjs",
      from: { path: "^engine/src/", pathNot: LAYERS.map((l) => l.path) },
      to: {},
    },
    ...layerRules,
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)(node_modules|dist)/" },
    moduleSystems: ["es6", "cjs"],
  },
};
