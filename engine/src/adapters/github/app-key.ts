/**
 * Start-up check of a GitHub App private key (GITHUB_APP_PRIVATE_KEY): a key that cannot sign
 * an App JWT would otherwise surface only later, as every dispatch failing.
 */
import { createPrivateKey } from "node:crypto";

/**
 * Why `pem` cannot be a GitHub App key, or null when it can. Accepts PKCS#1
 * (`BEGIN RSA PRIVATE KEY`, what GitHub generates) and PKCS#8 (`BEGIN PRIVATE KEY`), with real
 * newlines or literal `\n` (one-line env files). GitHub Apps sign RS256, so the key must be RSA.
 */
export function appPrivateKeyProblem(pem: string): string | null {
  const text = pem.replace(/\\n/g, "\n").trim();
  if (!/^-----BEGIN (RSA )?PRIVATE KEY-----/.test(text)) {
    return /BEGIN (ENCRYPTED|OPENSSH|EC) PRIVATE KEY/.test(text)
      ? "is an encrypted, OpenSSH or EC key; GitHub Apps use the RSA .pem file the App settings page generates"
      : "is not a PEM private key (it must start with -----BEGIN RSA PRIVATE KEY-----)";
  }
  try {
    const key = createPrivateKey({ key: text, format: "pem" });
    if (key.asymmetricKeyType !== "rsa") {
      return `is a ${key.asymmetricKeyType ?? "non-RSA"} key; GitHub Apps sign with RSA (RS256)`;
    }
  } catch (err) {
    const code = (err as { code?: string }).code;
    return `cannot be read as a private key (${code ?? (err as Error).message}); it is truncated or damaged`;
  }
  return null;
}
