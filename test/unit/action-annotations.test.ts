// The action's own annotation budget (annotate.ts), the stop/resume of workflow commands around
// tool output (workflow-commands.ts), and the runner's reading of commands the runner tests
// count with (test/support/runner-commands.ts).
import { describe, expect, it } from "vitest";
import {
  type AnnotationKind,
  Annotations,
  MAX_PER_KIND,
} from "../../actions/release-step/src/annotate.ts";
import { CommandPause } from "../../actions/release-step/src/workflow-commands.ts";
import { annotationsOf, shownAnnotations } from "../support/runner-commands.ts";

function recorder() {
  const emitted: { kind: AnnotationKind; message: string }[] = [];
  const logged: string[] = [];
  const a = new Annotations(
    (kind, message) => emitted.push({ kind, message }),
    (line) => logged.push(line),
  );
  return { a, emitted, logged };
}

describe("Annotations: the action's own budget per kind", () => {
  it("20 errors and 2 verdicts give 10 error annotations, the verdicts and the note among them", () => {
    const { a, emitted, logged } = recorder();
    for (let i = 1; i <= 20; i++) a.add("error", `problem ${i}`);
    a.verdict("[action] step run sr_1 failed (overall fail); re-run this job before 15:32 UTC");
    a.verdict("[action] callback refused");
    a.flush();
    expect(emitted.length).toBe(MAX_PER_KIND);
    expect(emitted.map((e) => e.message)).toEqual([
      ...Array.from({ length: 7 }, (_, i) => `problem ${i + 1}`),
      "[action] step run sr_1 failed (overall fail); re-run this job before 15:32 UTC",
      "[action] callback refused",
      "[action] 13 more error(s) are in the step log (GitHub shows at most 10 error annotations per step)",
    ]);
    expect(logged).toEqual(Array.from({ length: 13 }, (_, i) => `[error] problem ${i + 8}`));
    expect(a.counts()).toEqual({ error: 10, warning: 0, notice: 0 });
  });

  it("caps warnings and notices apart from errors, one note each", () => {
    const { a, emitted } = recorder();
    for (let i = 1; i <= 15; i++) a.add("warning", `w${i}`);
    for (let i = 1; i <= 3; i++) a.add("notice", `n${i}`);
    a.add("error", "e1");
    a.flush();
    expect(a.counts()).toEqual({ error: 1, warning: 10, notice: 3 });
    expect(emitted.filter((e) => e.kind === "warning").at(-1)?.message).toBe(
      "[action] 6 more warning(s) are in the step log (GitHub shows at most 10 warning annotations per step)",
    );
  });

  it("a third verdict past the kept slots goes to the log, never past 10", () => {
    const { a, emitted } = recorder();
    for (let i = 1; i <= 7; i++) a.add("error", `p${i}`);
    for (let i = 1; i <= 3; i++) a.verdict(`v${i}`);
    a.flush();
    expect(emitted.length).toBe(MAX_PER_KIND);
    expect(emitted.map((e) => e.message)).toContain("v2");
    expect(emitted.map((e) => e.message)).not.toContain("v3");
  });
});

describe("CommandPause: tool output is plain text to the runner", () => {
  it("stops commands around the output; an interjected annotation counts; resume starts a new line", () => {
    let log = "";
    const p = new CommandPause((t) => {
      log += typeof t === "string" ? t : Buffer.from(t).toString();
    });
    p.pause();
    p.write(Buffer.from("::error::from the tool\n##[error]legacy\n::add-mask::x\nhalf a li"));
    p.interject(() => {
      log += "::warning::[action] received SIGTERM\n";
    });
    p.write("ne ::error::still the tool\n::notice::tool");
    p.resume();
    log += "::error::[action] the verdict\n";
    expect(annotationsOf(log)).toEqual([
      { kind: "warning", message: "[action] received SIGTERM" },
      { kind: "error", message: "[action] the verdict" },
    ]);
    // The tool's partial lines were ended before each command line, not glued to it.
    expect(log).toMatch(/\nhalf a li\n::[0-9a-f]{32}::\n/);
    expect(log).toMatch(/\n::notice::tool\n::[0-9a-f]{32}::\n/);
    expect(p.paused).toBe(false);
  });

  it("each pause has its own random token, never printed twice", () => {
    let log = "";
    const p = new CommandPause((t) => {
      log += String(t);
    });
    p.pause();
    p.pause(); // no-op
    p.resume();
    p.resume(); // no-op
    p.pause();
    p.resume();
    const tokens = [...log.matchAll(/::stop-commands::([0-9a-f]+)/g)].map((m) => m[1]);
    expect(tokens.length).toBe(2);
    expect(tokens[0]).not.toBe(tokens[1]);
  });
});

describe("the runner's reading of commands (test support)", () => {
  it("reads ::cmd:: at a line start, ##[cmd] anywhere, case-insensitive names, and stop-commands", () => {
    const out = [
      "::error::a",
      "   ::error title=t,file=x.ts::b%0Anext",
      "text ##[warning]c",
      "::NOTICE::d",
      "::unknown::e",
      "not ::error::f",
      "::stop-commands::tok1",
      "::error::g",
      "##[error]h",
      "::tok1::",
      "::error::i",
    ].join("\n");
    expect(annotationsOf(out)).toEqual([
      { kind: "error", message: "a" },
      { kind: "error", message: "b\nnext" },
      { kind: "warning", message: "c" },
      { kind: "notice", message: "d" },
      { kind: "error", message: "i" },
    ]);
  });

  it("GitHub shows the first 10 of each kind", () => {
    const out = Array.from({ length: 12 }, (_, i) => `::error::e${i}\n::warning::w${i}`).join("\n");
    const shown = shownAnnotations(annotationsOf(out));
    expect(shown.filter((a) => a.kind === "error").map((a) => a.message)).toEqual(
      Array.from({ length: 10 }, (_, i) => `e${i}`),
    );
    expect(shown.length).toBe(20);
  });
});
