/**
 * Renders contract-check problems for people: plain text for a terminal, or GitHub workflow
 * commands (`::error file=…,line=…::…`) so that a pull request shows each problem on its line.
 */
import type { LocatedProblem } from "./compile-text.ts";

/** Escapes a workflow command's message (GitHub docs, "Workflow commands": %, CR, LF). */
function escapeData(s: string): string {
  return s.replaceAll("%", "%25").replaceAll("\r", "%0D").replaceAll("\n", "%0A");
}
/** Escapes a workflow command property value (also `:` and `,`). */
function escapeProperty(s: string): string {
  return escapeData(s).replaceAll(":", "%3A").replaceAll(",", "%2C");
}

/**
 * One block per problem. `text`: `<file> <path>: <message>` then `  fix: <fix>`.
 * `github`: one `::error file=<file>,line=<l>,col=<c>,title=<path>::<message> Fix: <fix>` line
 * per problem (line and col only when known).
 */
export function formatProblems(
  problems: readonly LocatedProblem[],
  filename: string,
  format: "text" | "github" = "text",
): string {
  if (format === "github") {
    return problems
      .map((p) => {
        const props = [
          `file=${escapeProperty(filename)}`,
          ...(p.line ? [`line=${p.line}`] : []),
          ...(p.column ? [`col=${p.column}`] : []),
          `title=${escapeProperty(`recipe ${p.path || "(file)"}`)}`,
        ];
        return `::error ${props.join(",")}::${escapeData(`${p.message} Fix: ${p.fix}`)}`;
      })
      .join("\n");
  }
  return problems
    .map((p) => `${filename} ${p.path || "(file)"}: ${p.message}\n  fix: ${p.fix}`)
    .join("\n");
}
