/**
 * How a GitHub runner reads workflow commands from a step's output, for tests that count the
 * annotations a step makes: line by line, a line is a command when, after leading whitespace, it
 * is `::name[ props]::data` (name case-insensitive), or when it holds `##[name[ props]]data`
 * anywhere (the older form), for a registered command name. `::stop-commands::<token>` stops
 * every command until a line `::<token>::`. Mirrors ActionCommand.TryParseV2 / TryParse and
 * ActionCommandManager.TryProcessCommand of actions/runner.
 */

/** The runner's registered command names (its command extensions, plus stop-commands). */
const COMMANDS = [
  "add-mask",
  "add-matcher",
  "add-path",
  "debug",
  "echo",
  "endgroup",
  "error",
  "group",
  "notice",
  "remove-matcher",
  "save-state",
  "set-env",
  "set-output",
  "stop-commands",
  "warning",
];

/** One annotation, in output order. */
export interface Annotation {
  kind: "error" | "warning" | "notice";
  message: string;
}

/** GitHub shows at most this many annotations of each kind per step. */
export const SHOWN_PER_KIND = 10;

function commandOf(line: string, registered: Set<string>): { name: string; data: string } | null {
  const v2 = line.trimStart();
  if (v2.startsWith("::")) {
    const end = v2.indexOf("::", 2);
    if (end >= 0) {
      const info = v2.slice(2, end);
      const name = (info.includes(" ") ? info.slice(0, info.indexOf(" ")) : info).toLowerCase();
      if (registered.has(name)) return { name, data: unescapeData(v2.slice(end + 2)) };
    }
  }
  const at = line.indexOf("##[");
  if (at < 0) return null;
  const rb = line.indexOf("]", at);
  if (rb < 0) return null;
  const info = line.slice(at + 3, rb);
  const name = (info.includes(" ") ? info.slice(0, info.indexOf(" ")) : info).toLowerCase();
  return registered.has(name) ? { name, data: line.slice(rb + 1) } : null;
}

function unescapeData(s: string): string {
  return s.replace(/%0D/g, "\r").replace(/%0A/g, "\n").replace(/%25/g, "%");
}

/** The annotations a runner makes from `stdout`, in order (all of them; GitHub shows the first 10 per kind). */
export function annotationsOf(stdout: string): Annotation[] {
  const registered = new Set(COMMANDS);
  let stopToken: string | null = null;
  const out: Annotation[] = [];
  for (const raw of stdout.split("\n")) {
    const line = raw.replace(/\r$/, "");
    const cmd = commandOf(line, registered);
    if (!cmd) continue;
    if (stopToken !== null) {
      if (cmd.name === stopToken) {
        registered.delete(stopToken);
        stopToken = null;
      }
      continue;
    }
    if (cmd.name === "stop-commands") {
      stopToken = cmd.data.toLowerCase();
      registered.add(stopToken);
    } else if (cmd.name === "error" || cmd.name === "warning" || cmd.name === "notice") {
      out.push({ kind: cmd.name, message: cmd.data });
    }
  }
  return out;
}

/** The annotations GitHub shows for one step: the first {@link SHOWN_PER_KIND} of each kind. */
export function shownAnnotations(all: readonly Annotation[]): Annotation[] {
  const seen = { error: 0, warning: 0, notice: 0 };
  return all.filter((a) => ++seen[a.kind] <= SHOWN_PER_KIND);
}
