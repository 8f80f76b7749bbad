/** GitHub adapter of the dispatcher port. */

export { appPrivateKeyProblem } from "./app-key.ts";
export { gitHubDispatcherOptionsFromEnv } from "./config.ts";
export {
  classifyGitHubError,
  DEFAULT_GITHUB_TIMEOUT_MS,
  type GitHubAuth,
  GitHubDispatcher,
  type GitHubDispatcherOptions,
} from "./dispatcher.ts";
export { GITHUB_API_VERSION, GITHUB_DOT_COM_API, gitHubFetch } from "./http.ts";
export { checkDispatchLimits, clientPayloadBytes, type LimitViolation } from "./limits.ts";
