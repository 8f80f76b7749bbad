/**
 * Reads the GitHub dispatcher's configuration from the environment (shared decisions:
 * `GITHUB_REPOSITORY`, and `GITHUB_TOKEN` or `GITHUB_APP_ID` + `GITHUB_APP_PRIVATE_KEY` +
 * `GITHUB_APP_INSTALLATION_ID`; optional `GITHUB_API_URL` for GitHub Enterprise Server and
 * `BATON_GITHUB_TIMEOUT_MS`).
 */
import { BatonError, type Problem } from "../../domain/errors.ts";
import { appPrivateKeyProblem } from "./app-key.ts";
import { DEFAULT_GITHUB_TIMEOUT_MS, type GitHubDispatcherOptions } from "./dispatcher.ts";

/**
 * Builds dispatcher options from `env`.
 * @throws BatonError(`bad_request`) listing every missing or malformed variable and its fix.
 */
export function gitHubDispatcherOptionsFromEnv(
  env: Record<string, string | undefined>,
): GitHubDispatcherOptions {
  const problems: Problem[] = [];
  const repository = env.GITHUB_REPOSITORY?.trim() ?? "";
  if (!/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(repository)) {
    problems.push({
      path: "GITHUB_REPOSITORY",
      message: repository ? `${JSON.stringify(repository)} is not owner/name` : "is not set",
      fix: "set GITHUB_REPOSITORY to the repository holding release-step.yml, e.g. acme/models",
    });
  }
  const token = env.GITHUB_TOKEN?.trim();
  const appId = env.GITHUB_APP_ID?.trim();
  const installationId = env.GITHUB_APP_INSTALLATION_ID?.trim();
  // Keys pasted into one-line env files often carry literal "\n"; turn them back into newlines.
  const privateKey = env.GITHUB_APP_PRIVATE_KEY?.replace(/\\n/g, "\n").trim();
  let auth: GitHubDispatcherOptions["auth"] | undefined;
  if (appId || installationId || privateKey) {
    if (!appId || !/^[0-9]+$/.test(appId)) {
      problems.push({
        path: "GITHUB_APP_ID",
        message: "is missing or not a number",
        fix: "set it to the App's numeric id (App settings, About)",
      });
    }
    if (!installationId || !/^[0-9]+$/.test(installationId)) {
      problems.push({
        path: "GITHUB_APP_INSTALLATION_ID",
        message: "is missing or not a number",
        fix: "set it to the number at the end of the installation's settings URL",
      });
    }
    const keyProblem = privateKey ? appPrivateKeyProblem(privateKey) : "is missing";
    if (keyProblem) {
      problems.push({
        path: "GITHUB_APP_PRIVATE_KEY",
        message: keyProblem,
        fix: "paste the .pem file the App settings page generated",
      });
    }
    if (appId && installationId && privateKey)
      auth = { kind: "app", appId, installationId, privateKey };
  } else if (token) {
    auth = { kind: "token", token };
  } else {
    problems.push({
      path: "GITHUB_TOKEN",
      message: "no GitHub credential is set",
      fix: "set GITHUB_TOKEN (contents: write), or GITHUB_APP_ID + GITHUB_APP_PRIVATE_KEY + GITHUB_APP_INSTALLATION_ID",
    });
  }
  const timeoutRaw = env.BATON_GITHUB_TIMEOUT_MS?.trim();
  const timeoutMs = timeoutRaw ? Number(timeoutRaw) : DEFAULT_GITHUB_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 120_000) {
    problems.push({
      path: "BATON_GITHUB_TIMEOUT_MS",
      message: `${JSON.stringify(timeoutRaw)} is not an integer from 100 to 120000`,
      fix: "set milliseconds, e.g. 10000, or unset it",
    });
  }
  if (problems.length > 0 || !auth) {
    throw new BatonError(
      "bad_request",
      `[github] dispatcher configuration is incomplete: ${problems.map((p) => `${p.path} ${p.message}`).join("; ")}`,
      problems,
    );
  }
  const options: GitHubDispatcherOptions = { repository, auth, timeoutMs };
  const baseUrl = env.GITHUB_API_URL?.trim();
  if (baseUrl) options.baseUrl = baseUrl.replace(/\/+$/, "");
  return options;
}
