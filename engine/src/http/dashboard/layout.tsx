/** @jsxImportSource hono/jsx */
/**
 * The page frame: head with inline CSS, top navigation, who is signed in, and an optional
 * no-JavaScript refresh for live pages.
 */
import type { Child } from "hono/jsx";
import type { Role } from "./auth.ts";
import { type Markup, markup, toHtml } from "./markup.ts";
import { CSS } from "./style.ts";

const ROLE_WORDS: Record<Role, string> = {
  operator: "signed in as operator",
  viewer: "signed in as viewer (read-only)",
  anonymous: "no tokens configured: read-only",
  none: "not signed in",
};

/** One dashboard page. `refreshSeconds` adds a no-JS `<meta refresh>` (live pages). */
export function Layout(props: {
  title: string;
  role: Role;
  /** The signed-in person (their own token): the header says `signed in as <name>`. */
  person?: string | null;
  refreshSeconds?: number;
  children?: Child;
}) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · Baton`}</title>
        {props.refreshSeconds ? (
          <noscript>
            <meta http-equiv="refresh" content={String(props.refreshSeconds)} />
          </noscript>
        ) : null}
        <style dangerouslySetInnerHTML={{ __html: CSS }} />
      </head>
      <body>
        <header class="top">
          <a href="/releases">Baton</a>
          <nav aria-label="Main">
            <a href="/releases">Releases</a>
            <a href="/fleet">Fleet</a>
            <a href="/incidents">Incidents</a>
            <a href="/kill-switches">Kill switches</a>
            <a href="/credentials">Credentials</a>
          </nav>
          <span class="who">
            {props.person ? `signed in as ${props.person} (operator)` : ROLE_WORDS[props.role]}
            {props.role === "operator" || props.role === "viewer" ? (
              <form method="post" action="/logout" style="display:inline;margin-left:.6rem">
                <button type="submit">Sign out</button>
              </form>
            ) : (
              <a href="/login" style="margin-left:.6rem">
                Sign in
              </a>
            )}
          </span>
        </header>
        <main id="main">{props.children}</main>
      </body>
    </html>
  );
}

/** A state shown as coloured text (never colour alone: the word is always there). */
export function State(props: { state: string }) {
  return toHtml(stateHtml(props.state));
}

/** `State` as markup, for the parts written with `markup`; built once per state. */
export function stateHtml(state: string): Markup {
  let m = STATES.get(state);
  if (!m) {
    m = markup`<span class="st st-${state}">${state.replaceAll("_", " ")}</span>`;
    // The states are a few words; a page of unexpected ones is rendered, not kept.
    if (STATES.size < 64) STATES.set(state, m);
  }
  return m;
}

const STATES = new Map<string, Markup>();
