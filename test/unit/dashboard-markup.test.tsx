/** @jsxImportSource hono/jsx */
/**
 * `markup` (the dashboard's tagged template for its long, repeated parts) escapes what it
 * interpolates exactly as hono's JSX does, keeps nested markup as it is, and the step table
 * written with it escapes hostile names from a recipe.
 */
import { describe, expect, it } from "vitest";
import { State } from "../../engine/src/http/dashboard/layout.tsx";
import { markup, toHtml } from "../../engine/src/http/dashboard/markup.ts";
import { stepTableHtml } from "../../engine/src/http/dashboard/step-table.ts";
import { bigRecord } from "../support/dashboard-fixtures.ts";

const HOSTILE = `<script>alert("x")</script> & 'quoted' > done`;

const jsxText = async (node: unknown) => String(await (node as Promise<string>).toString());

describe("markup", () => {
  it("escapes an interpolated string in text and in an attribute as JSX does", async () => {
    const m = markup`<a href="${HOSTILE}" title="${HOSTILE}">${HOSTILE}</a>`;
    expect(m.text).toBe(
      await jsxText(
        <a href={HOSTILE} title={HOSTILE}>
          {HOSTILE}
        </a>,
      ),
    );
    expect(m.text).not.toContain("<script>");
  });

  it("keeps nested markup and arrays of it, prints numbers, skips null, undefined and false", () => {
    const inner = markup`<b>${"<i>"}</b>`;
    const m = markup`<p>${inner}${[inner, [markup`<br>`, "&"]]}${3}${null}${undefined}${false}</p>`;
    expect(m.text).toBe("<p><b>&lt;i&gt;</b><b>&lt;i&gt;</b><br>&amp;3</p>");
  });

  it("goes into JSX without being escaped again", async () => {
    expect(await jsxText(<div>{toHtml(markup`<b>${"a&b"}</b>`)}</div>)).toBe(
      "<div><b>a&amp;b</b></div>",
    );
    expect(await jsxText(<State state="dispatch_failed" />)).toBe(
      '<span class="st st-dispatch_failed">dispatch failed</span>',
    );
  });
});

describe("the step table", () => {
  it("escapes a hostile lane, step run id and wave lane list from the record", () => {
    const r = structuredClone(bigRecord(4, 1, 0).release);
    r.manifest.steps[0]!.lane = HOSTILE;
    r.manifest.waves[0]!.lanes = [HOSTILE];
    r.step_runs[0]!.id = HOSTILE;
    const html = stepTableHtml(r, "acme/models", r.created_at).text;
    expect(html).not.toContain("<script>");
    expect(html).toContain(
      "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quoted&#39;",
    );
  });
});
