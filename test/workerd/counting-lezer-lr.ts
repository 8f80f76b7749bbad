/**
 * `@lezer/lr` as it is, counting the parsers it builds (`LRParser.deserialize`) in
 * `globalThis.batonLezerParsersBuilt`: aliased in place of the package when a test bundles the
 * Worker, it shows when the PromQL grammar's parser is built (test/serverless/worker-bundle.test.ts).
 */
import { LRParser } from "../../node_modules/@lezer/lr/dist/index.js";

export * from "../../node_modules/@lezer/lr/dist/index.js";

const counter = globalThis as { batonLezerParsersBuilt?: number };
const deserialize = LRParser.deserialize.bind(LRParser);
LRParser.deserialize = (spec) => {
  counter.batonLezerParsersBuilt = (counter.batonLezerParsersBuilt ?? 0) + 1;
  return deserialize(spec);
};
