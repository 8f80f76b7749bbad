// The job summary rendered with a GFM renderer (micromark + micromark-extension-gfm, the
// CommonMark/GFM reference behaviour github.com's cmark-gfm follows): bold after the heading,
// `|` and `<none>` inside table cells, and 5,000 checks capped below 1 MiB with a note.
import { micromark } from "micromark";
import { gfm, gfmHtml } from "micromark-extension-gfm";
import { describe, expect, it } from "vitest";
import { SUMMARY_MAX_BYTES, summaryMarkdown } from "../../actions/release-step/src/report.ts";

const render = (md: string) => micromark(md, { extensions: [gfm()], htmlExtensions: [gfmHtml()] });

const results = (checks: unknown[]) => ({
  status: "failed",
  overall: "fail",
  checks,
  checksValid: true,
  log: "",
});

describe("job summary as GFM", () => {
  it("renders bold, a real table with literal | and <none>, and a link", () => {
    const md = summaryMarkdown({
      stepRunId: "sr_1_2_f",
      engineUrl: "https://baton.example.org",
      results: results([
        { name: "pull", status: "failed", exit_code: 1, message: "a|b <none> *x* `y`" },
      ]) as never,
      phases: [{ name: "6. run tool", outcome: "exit 1", ms: 12 }],
    });
    const html = render(md);
    expect(html).toContain("<strong>status</strong>");
    expect(html).toContain("<table>");
    expect(html).toContain("<td>a|b &lt;none&gt; *x* `y`</td>");
    expect(html).not.toContain("\\|");
    expect(html).toContain('<a href="https://baton.example.org/step-runs/sr_1_2_f">');
  });

  it("caps 5,000 checks below 1 MiB with a note of what was cut", () => {
    const checks = Array.from({ length: 5000 }, (_, i) => ({
      name: `check-${i}`,
      status: "failed",
      message: "m".repeat(300),
    }));
    const md = summaryMarkdown({
      stepRunId: "sr_1_2_f",
      engineUrl: "https://baton.example.org",
      results: results(checks) as never,
      phases: [],
    });
    expect(Buffer.byteLength(md)).toBeLessThan(SUMMARY_MAX_BYTES);
    expect(Buffer.byteLength(md)).toBeLessThan(1024 * 1024);
    expect(md).toMatch(/4800 of 5000 checks are not shown here/);
    expect(render(md)).toContain("<table>");
  });
});
