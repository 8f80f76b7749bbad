/** GitHub adapter of the dispatcher port. */
export { gitHubDispatcherOptionsFromEnv } from "./config.ts";
export {
  classifyGitHubError,
  DEFAULT_GITHUB_TIMEOUT_MS,
  type GitHubAuth,
  GitHubDispatcher,
  type GitHubDispatcherOptions,
} from "./dispatcher.ts";
export { checkDispatchLimits, clientPayloadBytes, type LimitViolation } from "./limits.ts";
