/**
 * The runner's file commands (`GITHUB_OUTPUT`, `GITHUB_STATE`, `GITHUB_ENV`): what
 * `@actions/core` writes (`setOutput`, `saveState`, `exportVariable`) and the runner reads back
 * after a step. Two line forms (GitHub docs, "Workflow commands for GitHub Actions",
 * "Multiline strings"): `name=value`, and `name<<DELIMITER` … `DELIMITER`.
 */

/**
 * Parses one command file's text into name -> value (a later write of a name wins).
 * @throws Error when a multiline value is not closed by its delimiter.
 */
export function parseCommandFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line === "") continue;
    const heredoc = /^([^=<]+)<<(.+)$/.exec(line);
    if (heredoc) {
      const [, name, delimiter] = heredoc as unknown as [string, string, string];
      const value: string[] = [];
      let closed = false;
      for (i += 1; i < lines.length; i++) {
        if (lines[i] === delimiter) {
          closed = true;
          break;
        }
        value.push(lines[i]!);
      }
      if (!closed) {
        throw new Error(
          `[local-runner] command file: value of ${name} is not closed by ${delimiter}`,
        );
      }
      out[name] = value.join("\n");
      continue;
    }
    const eq = line.indexOf("=");
    if (eq > 0) out[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return out;
}

/** The environment the runner gives a post step from its main step's saved state. */
export function stateToEnv(state: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(state).map(([k, v]) => [`STATE_${k}`, v]));
}
