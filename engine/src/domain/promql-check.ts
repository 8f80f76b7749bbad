/**
 * Parses a gate's PromQL template as Prometheus would read it once its variables are filled,
 * with Prometheus's own grammar (`@prometheus-io/lezer-promql`, the parser of the Prometheus
 * web UI). The contract check (analysis-check.ts) refuses a template that is not valid PromQL,
 * and one that puts `$lane` or `$baseline_lanes` (regex alternations) anywhere but inside a
 * regex matcher (`=~` / `!~`).
 */
import { parser } from "@prometheus-io/lezer-promql";

/** Sample values, shaped as the Prometheus adapter fills them (already PromQL-string safe). */
const SAMPLE: Record<string, string> = {
  model: "model",
  release: "r1",
  arm: "candidate",
  image: "registry.example/model@sha256:0",
  candidate_image: "registry.example/model@sha256:1",
  // Markers, so where they land in the parse tree can be found.
  lane: "baton0lane0marker",
  baseline_lanes: "baton0baseline0marker",
  arm_selector: 'image="registry.example/model@sha256:1"',
  window: "60s",
};

const REGEX_ONLY = ["lane", "baseline_lanes"] as const;

/** What is wrong with one template (undefined: nothing). */
export interface PromqlProblem {
  /** `syntax`: not valid PromQL; `regex_variable`: `$lane`/`$baseline_lanes` outside `=~`/`!~`. */
  kind: "syntax" | "regex_variable";
  /** The parse error or misuse in words, with the filled query's excerpt. */
  message: string;
  fix: string;
}

/** Fills `$name` variables with sample values (unknown names are left for the caller). */
export function fillSample(template: string): string {
  return template.replace(/\$([A-Za-z_]\w*)/g, (m, k: string) => SAMPLE[k] ?? m);
}

function excerpt(q: string, at: number): string {
  const from = Math.max(0, at - 20);
  const to = Math.min(q.length, at + 20);
  return `${from > 0 ? "…" : ""}${q.slice(from, at)}⟨here⟩${q.slice(at, to)}${to < q.length ? "…" : ""}`;
}

/** The matcher operator (`=`, `!=`, `=~`, `!~`) of the label matcher holding a string, if any. */
/** The parts of a lezer syntax node read here. */
interface TreeNode {
  name: string;
  parent: TreeNode | null;
  firstChild: TreeNode | null;
  getChild(type: string): TreeNode | null;
}

function matchOpOf(str: TreeNode): string | undefined {
  const matcher = str.parent;
  if (!matcher || !/LabelMatcher$/.test(matcher.name)) return undefined;
  const op = matcher.getChild("MatchOp")?.firstChild?.name;
  return op;
}

/**
 * Parses `template` after filling its variables with sample values. Returns the first syntax
 * error (with its character offset in the filled query and an excerpt), or a misuse of a
 * regex-alternation variable, or undefined when the template is valid PromQL.
 */
export function promqlProblem(template: string): PromqlProblem | undefined {
  const q = fillSample(template);
  const tree = parser.parse(q);
  let error: { from: number; to: number } | undefined;
  /** Per regex-only variable, how often it lands inside a regex matcher's string. */
  const inRegex: Record<string, number> = { lane: 0, baseline_lanes: 0 };
  tree.iterate({
    enter(n) {
      if (n.type.isError && !error) error = { from: n.from, to: n.to };
      if (n.name === "StringLiteral") {
        const op = matchOpOf(n.node);
        if (op === "EqlRegex" || op === "NeqRegex") {
          const text = q.slice(n.from, n.to);
          for (const v of REGEX_ONLY) inRegex[v]! += text.split(SAMPLE[v]!).length - 1;
        }
      }
      return undefined;
    },
  });
  if (error) {
    const what =
      error.from >= q.length
        ? "the query ends too early (a bracket, operand or argument is missing)"
        : error.to > error.from
          ? `unexpected \`${q.slice(error.from, error.to)}\` at character ${error.from + 1}`
          : `unexpected input at character ${error.from + 1}`;
    return {
      kind: "syntax",
      message: `query is not valid PromQL once its variables are filled: ${what} (${excerpt(q, error.from)})`,
      fix: 'Write the template as a PromQL expression that Prometheus\'s /api/v1/query accepts (try it in the Prometheus UI with the variables filled in), e.g. `sum(increase(errors_total{model="$model",$arm_selector}[$window]))`.',
    };
  }
  // Every occurrence must sit in a regex matcher's string (`lane="$lane"` or a bare `$lane`
  // would match nothing, or the wrong series).
  for (const v of REGEX_ONLY) {
    const total = q.split(SAMPLE[v]!).length - 1;
    if (inRegex[v]! < total) {
      return {
        kind: "regex_variable",
        message: `query uses \`$${v}\` outside a regex matcher: it is filled with a regex alternation of regex-escaped lane ids (\`lane-a|lane\\.b\`), which matches only through \`=~\` or \`!~\``,
        fix: `Write \`lane=~"$${v}"\` (or \`!~\`); for one literal lane id write it out, e.g. \`lane="lane-a"\`.`,
      };
    }
  }
  return undefined;
}
