/**
 * The rule between the engine's secrets, checked at start-up on every entry (Node, Workers,
 * Lambda): an operator token must not be a callback secret. The runner holds every callback
 * secret (it signs preflights and callbacks with them), so anyone with the runner's secret
 * would act as an operator.
 *
 * Portable: no Node module (the serverless entries import it too).
 */

/** A start-up problem: the variable, what is wrong, the fix. Never quotes a token. */
export interface SecretProblem {
  path: string;
  message: string;
  fix: string;
}

const FIX =
  "give each operator token a value of its own, never one of BATON_CALLBACK_SECRETS, e.g. $(openssl rand -hex 32)";

/**
 * Problems when `operatorToken` (BATON_OPERATOR_TOKEN) or a named person's token
 * (BATON_OPERATORS) equals one of `callbackSecrets` (BATON_CALLBACK_SECRETS, comma-separated).
 * Names the variables and the person, never a token.
 */
export function operatorSecretProblems(
  callbackSecrets: string | undefined,
  operatorToken: string | undefined,
  operators: readonly { name: string; token: string }[] = [],
): SecretProblem[] {
  const secrets = new Set(
    (callbackSecrets ?? "")
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  );
  if (secrets.size === 0) return [];
  const out: SecretProblem[] = [];
  if (operatorToken && secrets.has(operatorToken)) {
    out.push({
      path: "BATON_OPERATOR_TOKEN",
      message:
        "BATON_OPERATOR_TOKEN equals one of BATON_CALLBACK_SECRETS: anyone holding the runner's callback secret would be an operator",
      fix: FIX,
    });
  }
  for (const o of operators) {
    if (!secrets.has(o.token)) continue;
    out.push({
      path: "BATON_OPERATORS",
      message: `BATON_OPERATORS: ${o.name}'s token equals one of BATON_CALLBACK_SECRETS: anyone holding the runner's callback secret would be an operator`,
      fix: FIX,
    });
  }
  return out;
}
