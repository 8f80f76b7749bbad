/**
 * Checks the browser tests share (Chromium via playwright-core): axe-core's serious and
 * critical violations, sideways page overflow, and a keyboard walk (Tab through every
 * focusable element in document order, each showing a visible focus indicator).
 */
import { createRequire } from "node:module";
import type { Page } from "playwright-core";

/** axe-core's browser bundle (injected into the page). */
export const AXE_PATH = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

/**
 * axe-core's serious and critical violations on the page as `rule: selector, …` lines
 * (empty: none). Runs the WCAG 2.x A/AA rules and best practices axe enables by default.
 */
export async function axeSerious(page: Page): Promise<string[]> {
  await page.addScriptTag({ path: AXE_PATH });
  const violations = (await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } }).axe;
    return (await axe.run()).violations;
  })) as { id: string; impact: string; nodes: { target: string[] }[] }[];
  return violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}

/** How far the page scrolls sideways, in CSS px (0: it does not). */
export function sideOverflow(page: Page): Promise<number> {
  return page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
}

/** One stop of the keyboard walk. */
export interface FocusStop {
  /** Position of the element among the page's focusable elements, in document order. */
  index: number;
  tag: string;
  /** Accessible text: the element's text, aria-label or value. */
  text: string;
  href: string | null;
  /** The focus indicator as computed: outline style and width (px), box-shadow. */
  outline: string;
  outlineWidth: number;
  boxShadow: string;
}

/**
 * Marks every visible focusable element (links, buttons, inputs, selects, summaries,
 * tabindex ≥ 0; not disabled, not hidden) with its document-order index, then presses Tab once
 * per element (bounded by their count) from the top of the page and returns where focus
 * went at each press, with the focused element's computed focus indicator.
 */
export async function keyboardWalk(page: Page): Promise<{ expected: number; stops: FocusStop[] }> {
  const expected = await page.evaluate(() => {
    const sel =
      'a[href],button,input:not([type="hidden"]),select,textarea,summary,[tabindex]:not([tabindex="-1"])';
    const all = Array.from(document.querySelectorAll<HTMLElement>(sel)).filter((el) => {
      if ((el as HTMLButtonElement).disabled) return false;
      if (el.tabIndex < 0) return false;
      // Inside a closed <details>, only its summary is reachable.
      const closed = el.closest("details:not([open])");
      if (closed && el.tagName !== "SUMMARY") return false;
      if (closed && el.parentElement !== closed) return false;
      return el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
    });
    all.forEach((el, i) => {
      el.dataset.kb = String(i);
    });
    (document.activeElement as HTMLElement | null)?.blur();
    window.scrollTo(0, 0);
    return all.length;
  });
  // Each focus change is recorded in the page (one round trip per Tab press, one to read).
  await page.evaluate(() => {
    const w = window as unknown as { kbStops: unknown[] };
    w.kbStops = [];
    document.addEventListener("focusin", (ev) => {
      const el = ev.target as HTMLElement;
      if (el.dataset.kb === undefined) {
        w.kbStops.push(null);
        return;
      }
      const cs = getComputedStyle(el);
      w.kbStops.push({
        index: Number(el.dataset.kb),
        tag: el.tagName,
        text: (el.getAttribute("aria-label") ?? el.textContent ?? "").trim(),
        href: el.getAttribute("href"),
        outline: cs.outlineStyle,
        outlineWidth: Number.parseFloat(cs.outlineWidth) || 0,
        boxShadow: cs.boxShadow,
      });
    });
  });
  for (let i = 0; i < expected; i++) await page.keyboard.press("Tab");
  const raw = (await page.evaluate(
    () => (window as unknown as { kbStops: unknown[] }).kbStops,
  )) as (FocusStop | null)[];
  // Stop at the first focus outside the marked elements (the browser's own UI, or the end).
  const end = raw.indexOf(null);
  const stops = (end < 0 ? raw : raw.slice(0, end)) as FocusStop[];
  return { expected, stops };
}

/** Whether a focus stop shows a visible indicator (an outline of ≥ 2 px, or a box-shadow). */
export function focusVisible(s: FocusStop): boolean {
  return (
    (s.outline !== "none" && s.outlineWidth >= 2) || (s.boxShadow !== "none" && s.boxShadow !== "")
  );
}
