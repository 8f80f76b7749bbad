/** Local-runner adapter of the dispatcher port. */
export { parseCommandFile, stateToEnv } from "./command-files.ts";
export {
  type ActionInputs,
  inputEnv,
  type RunnerContext,
  repositoryDispatchEvent,
  runnerEnv,
} from "./environment.ts";
export { type EmbeddedRunnerOptions, localRunnerForEmbeddedTarget } from "./for-embedded-target.ts";
export { MaskingLineWriter, MaskSet } from "./mask.ts";
export {
  headSha,
  type LocalRun,
  type LocalRunConclusion,
  type LocalRunEvent,
  LocalRunner,
  type LocalRunnerOptions,
  type LocalRunState,
} from "./runner.ts";
